"""The three wire formats: where a call goes, how its key travels, and how it is metered.

Anthropic Messages (``POST {base}/v1/messages``), OpenAI Chat Completions
(``POST {base}/chat/completions``, the base ending in ``/v1``) and Gemini
(``POST {base}/v1beta/models/{model}:generateContent``, or
``:streamGenerateContent?alt=sse``).  Streams are server-sent events in all
three.  The ``Meter`` reads token counts (and a cost, where the provider
reports one) from a body or from a stream as it passes, without holding it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import orjson

from .presets import ANTHROPIC, GEMINI, OPENAI

ANTHROPIC_VERSION = "2023-06-01"
#: Gemini's thinking levels for the plaza's efforts.
GEMINI_LEVELS = {"none": "minimal", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
                 "xhigh": "high", "max": "high"}


@dataclass
class Ask:
    """What a request asks for, as the gateway reads it."""

    model: str
    stream: bool
    effort: str | None


def read_ask(wire: str, body: dict, path_model: str | None = None, path_stream: bool = False) -> Ask:
    if wire == GEMINI:
        cfg = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
        level = cfg.get("thinkingLevel")
        return Ask(path_model or "", path_stream, level.lower() if isinstance(level, str) else None)
    model = body.get("model")
    stream = body.get("stream") is True
    if wire == ANTHROPIC:
        effort = (body.get("output_config") or {}).get("effort") if isinstance(body.get("output_config"), dict) else None
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


def _int(x: Any) -> int:
    return x if type(x) is int and x >= 0 else 0


class Meter:
    """Token counts from a whole body or from a stream, chunk by chunk."""

    def __init__(self, wire: str):
        self.wire = wire
        self.tokens = Tokens()
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

    def _cost(self, usage: dict) -> None:
        cost = usage.get("cost")
        if isinstance(cost, (int, float, str)) and not isinstance(cost, bool):
            try:
                value = Fraction(str(cost))
            except (ValueError, ZeroDivisionError):
                return
            if value >= 0:
                self.tokens.cost_usd = value

    def _event(self, d: dict) -> None:
        t = self.tokens
        if self.wire == ANTHROPIC:
            usage = d.get("usage")
            if d.get("type") == "message_start":
                usage = (d.get("message") or {}).get("usage")
            if isinstance(usage, dict):
                if "input_tokens" in usage:
                    t.input = _int(usage["input_tokens"])
                if "output_tokens" in usage:
                    t.output = _int(usage["output_tokens"])
                if "cache_read_input_tokens" in usage:
                    t.cache_read = _int(usage["cache_read_input_tokens"])
                if "cache_creation_input_tokens" in usage:
                    t.cache_write = _int(usage["cache_creation_input_tokens"])
                self._cost(usage)
        elif self.wire == OPENAI:
            usage = d.get("usage")
            if isinstance(usage, dict):
                cached = _int((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
                t.cache_read = cached
                t.input = max(_int(usage.get("prompt_tokens")) - cached, 0)
                t.output = _int(usage.get("completion_tokens"))
                t.cache_write = _int(usage.get("cache_creation_input_tokens"))
                self._cost(usage)
        else:
            usage = d.get("usageMetadata")
            if isinstance(usage, dict):
                cached = _int(usage.get("cachedContentTokenCount"))
                t.cache_read = cached
                t.input = max(_int(usage.get("promptTokenCount")) - cached, 0)
                t.output = _int(usage.get("candidatesTokenCount")) + _int(usage.get("thoughtsTokenCount"))
                self._cost(usage)


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
