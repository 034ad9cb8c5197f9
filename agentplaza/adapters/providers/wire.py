"""The three wire formats: where a call goes, how its key travels, and how it is metered.

Anthropic Messages (``POST {base}/v1/messages``), OpenAI Chat Completions
(``POST {base}/chat/completions``, the base ending in ``/v1``) and Gemini
(``POST {base}/v1beta/models/{model}:generateContent``, or
``:streamGenerateContent?alt=sse``).  Streams are server-sent events in all
three.  The ``Meter`` reads token counts (and a cost, where the provider
reports one) from a body or from a stream as it passes, without holding it.

A usage the plaza could not record (a count that is not a whole number from 0 to
``USAGE_TOKENS_MAX``, a reported cost over ``REPORTED_COST_USD_MAX``) is never
recorded: the meter keeps no count of that answer and names the field in ``fault``;
the gateway answers ``502 bad_upstream`` and records the call as an error with no tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import orjson

from .presets import ANTHROPIC, GEMINI, OPENAI

ANTHROPIC_VERSION = "2023-06-01"
#: The most tokens one count of one call's usage may hold (a hundred times the longest context offered
#: today); with the highest price the plaza takes (``domain.models.MAX_PRICE``) a call's cost in
#: millionths of a credit stays well inside signed 64 bits.
USAGE_TOKENS_MAX = 100_000_000
#: The most a provider may report one call cost, in dollars.
REPORTED_COST_USD_MAX = 1_000_000
COST_QUANTUM = Decimal("1e-12")
#: Gemini's thinking levels for the plaza's efforts.
GEMINI_LEVELS = {"none": "minimal", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
                 "xhigh": "high", "max": "high"}


@dataclass
class Ask:
    """What a request asks for, as the gateway reads it."""

    model: str
    stream: bool
    effort: str | None


def _obj(x: Any) -> dict:
    """``x`` where it is an object, else an empty one (a caller's or a provider's JSON is not trusted)."""
    return x if isinstance(x, dict) else {}


def read_ask(wire: str, body: dict, path_model: str | None = None, path_stream: bool = False) -> Ask:
    if wire == GEMINI:
        level = _obj(_obj(body.get("generationConfig")).get("thinkingConfig")).get("thinkingLevel")
        return Ask(path_model or "", path_stream, level.lower() if isinstance(level, str) else None)
    model = body.get("model")
    stream = body.get("stream") is True
    if wire == ANTHROPIC:
        effort = _obj(body.get("output_config")).get("effort")
    else:
        effort = body.get("reasoning_effort")
    return Ask(model if isinstance(model, str) else "", stream, effort if isinstance(effort, str) else None)


def rewrite(wire: str, body: dict, model: str, effort: str | None, stream: bool) -> dict:
    """The body the provider gets: its own model name, the effort the policy chose, usage in streams."""
    out = dict(body)
    if wire == GEMINI:
        if effort is not None:
            gen = dict(out.get("generationConfig") or {})
            gen["thinkingConfig"] = dict(gen.get("thinkingConfig") or {}, thinkingLevel=GEMINI_LEVELS[effort])
            out["generationConfig"] = gen
        return out
    out["model"] = model
    if wire == ANTHROPIC:
        if effort is not None:
            out["output_config"] = dict(out.get("output_config") or {}, effort=effort)
    else:
        if effort is not None:
            out["reasoning_effort"] = effort
        if stream:
            out["stream_options"] = dict(out.get("stream_options") or {}, include_usage=True)
    return out


def upstream_url(wire: str, base: str, model: str, stream: bool) -> str:
    base = base.rstrip("/")
    if wire == ANTHROPIC:
        return f"{base}/v1/messages"
    if wire == OPENAI:
        return f"{base}/chat/completions"
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{base}/v1beta/models/{model}:{action}"


def auth_headers(wire: str, auth: str, key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if wire == ANTHROPIC:
        headers["anthropic-version"] = ANTHROPIC_VERSION
    if key is None or auth == "none":
        return headers
    if auth == "x-api-key":
        headers["x-api-key"] = key
    elif auth == "x-goog-api-key":
        headers["x-goog-api-key"] = key
    else:
        headers["authorization"] = f"Bearer {key}"
    return headers


#: Request headers a caller may pass on to the provider (everything else stays behind, keys above all).
PASSED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")


@dataclass
class Tokens:
    input: int = 0  # input tokens read fresh (cache reads and writes are counted apart)
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: Fraction | None = None  # what the provider reported the call cost, where it does


class Meter:
    """Token counts from a whole body or from a stream, chunk by chunk."""

    def __init__(self, wire: str):
        self.wire = wire
        self.tokens = Tokens()
        self.fault: str | None = None  # the usage field the plaza could not record, and why
        self._buf = b""

    def body(self, data: Any) -> Tokens:
        if isinstance(data, dict):
            self._event(data)
        return self.tokens

    def feed(self, chunk: bytes) -> None:
        """Read the ``data:`` lines of server-sent events as they pass."""
        self._buf += chunk
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            line, self._buf = self._buf[:nl].rstrip(b"\r"), self._buf[nl + 1:]
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload and payload != b"[DONE]" and b"usage" in payload.lower():
                    try:
                        self._event(orjson.loads(payload))
                    except orjson.JSONDecodeError:
                        pass

    def _bad(self, field: str, why: str) -> None:
        if self.fault is None:
            self.fault = f"{field}: {why}"
        self.tokens = Tokens()

    def _int(self, usage: dict, key: str, field: str) -> int:
        """One count: absent or null is 0; anything but a whole number from 0 to ``USAGE_TOKENS_MAX`` is a fault."""
        x = usage.get(key)
        if x is None:
            return 0
        if type(x) is not int or not 0 <= x <= USAGE_TOKENS_MAX:
            # the value itself is not quoted: a provider's answer is not text to pass on
            got = "out of range" if type(x) is int else f"a {type(x).__name__}"
            self._bad(f"{field}.{key}", f"a token count is a whole number from 0 to {USAGE_TOKENS_MAX}, not {got}")
            return 0
        return x

    def _cost(self, usage: dict, field: str) -> None:
        cost = usage.get("cost")
        if not isinstance(cost, (int, float, str)) or isinstance(cost, bool):
            return
        try:
            approx = float(cost)
            # to the millionth of a cent, far finer than the millionth of a credit the plaza counts in
            exact = Fraction(Decimal(str(cost)).quantize(COST_QUANTUM)) if math.isfinite(approx) else None
        except (ValueError, ArithmeticError):
            return
        if exact is None or approx > REPORTED_COST_USD_MAX:
            self._bad(f"{field}.cost", f"a reported cost is at most {REPORTED_COST_USD_MAX} dollars")
        elif exact >= 0 and self.fault is None:
            self.tokens.cost_usd = exact

    def _event(self, d: dict) -> None:
        counts = self._counts(d)
        if counts is not None and self.fault is None:
            self.tokens = counts

    def _counts(self, d: dict) -> Tokens | None:
        """The counts this event carries over the ones read so far (None: it carries no usage)."""
        t = Tokens(**vars(self.tokens))
        if self.wire == ANTHROPIC:
            usage = d.get("usage")
            if d.get("type") == "message_start":
                usage = _obj(d.get("message")).get("usage")
            if not isinstance(usage, dict):
                return None
            for key, attr in (("input_tokens", "input"), ("output_tokens", "output"),
                              ("cache_read_input_tokens", "cache_read"), ("cache_creation_input_tokens", "cache_write")):
                if key in usage:
                    setattr(t, attr, self._int(usage, key, "usage"))
            self._cost(usage, "usage")
        elif self.wire == OPENAI:
            usage = d.get("usage")
            if not isinstance(usage, dict):
                return None
            cached = self._int(_obj(usage.get("prompt_tokens_details")), "cached_tokens", "usage.prompt_tokens_details")
            t.cache_read = cached
            t.input = max(self._int(usage, "prompt_tokens", "usage") - cached, 0)
            t.output = self._int(usage, "completion_tokens", "usage")
            t.cache_write = self._int(usage, "cache_creation_input_tokens", "usage")
            self._cost(usage, "usage")
        else:
            usage = d.get("usageMetadata")
            if not isinstance(usage, dict):
                return None
            cached = self._int(usage, "cachedContentTokenCount", "usageMetadata")
            t.cache_read = cached
            t.input = max(self._int(usage, "promptTokenCount", "usageMetadata") - cached, 0)
            t.output = (self._int(usage, "candidatesTokenCount", "usageMetadata")
                        + self._int(usage, "thoughtsTokenCount", "usageMetadata"))
            self._cost(usage, "usageMetadata")
        t.cost_usd = self.tokens.cost_usd
        return t


def error_body(wire: str, status: int, code: str, message: str) -> dict:
    """A refusal in the caller's own wire format, so its SDK raises a clear error."""
    if wire == ANTHROPIC:
        kind = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                503: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "code": code, "message": message}}
    if wire == OPENAI:
        return {"error": {"message": message, "type": code, "code": code, "param": None}}
    statuses = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
    return {"error": {"code": status, "message": message, "status": statuses.get(status, "INTERNAL"), "reason": code}}
