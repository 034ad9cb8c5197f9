"""Calling a provider over httpx: one shared async client, whole answers or streams.

The mock provider is answered in-process by the same interface, so the
gateway treats every provider alike.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import orjson

from . import http1
from . import mock as mock_provider
from .presets import ANTHROPIC, GEMINI, OPENAI, ProviderConfig
from .wire import auth_headers, upstream_url

#: Connections kept open to providers: as many as may be open, so that every concurrent caller's
#: connection is kept (with 50 kept of 200, bench/peers.py's 64 callers had 14 connections closed after
#: each answer and opened again for the next call: a TCP handshake on the way of those calls).
MAX_CONNECTIONS = http1.MAX_CONNECTIONS
MAX_KEEPALIVE = http1.MAX_KEEPALIVE
#: The body and length of ``models test``'s one short call.
TEST_PROMPT = "Reply with the word ok."
TEST_MAX_TOKENS = 16


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes | None = None  # a whole answer, or
    chunks: AsyncIterator[bytes] | None = None  # a stream, read once
    close: object = None  # awaitable closer for a stream


#: What a failed exchange with a provider raises (the pool's own errors, and httpx's for the price fetch).
UPSTREAM_ERRORS: tuple[type[BaseException], ...] = (http1.UpstreamError, httpx.HTTPError)
#: The answer headers a caller gets back from a provider.
KEPT_HEADERS = frozenset({b"content-type", b"retry-after", b"request-id", b"x-request-id"})


class Upstream:
    """The hub's one way out to model providers: one pool of kept-alive connections (``http1.Pool``,
    a lean HTTP/1.1 client: see its docstring for why the gateway does not go through httpcore)."""

    def __init__(self, pool: http1.Pool | None = None):
        self._pool = pool

    @property
    def pool(self) -> http1.Pool:
        if self._pool is None:
            self._pool = http1.Pool(MAX_CONNECTIONS, MAX_KEEPALIVE)
        return self._pool

    async def call(self, provider: ProviderConfig, wire: str, body: dict, model: str, stream: bool,
                   key: str | None, extra_headers: dict[str, str] | None = None, effort: str | None = None,
                   call_id: str = "mock") -> Answer:
        if provider.is_mock:
            a = mock_provider.answer(wire, body, model, stream, effort, call_id)
            if a.body is not None:
                return Answer(a.status, {"content-type": "application/json"}, orjson.dumps(a.body))

            async def events() -> AsyncIterator[bytes]:
                for e in a.events:
                    yield e

            return Answer(a.status, {"content-type": "text/event-stream"}, chunks=events())
        base = provider.endpoint(wire)
        assert base is not None
        headers = auth_headers(wire, provider.auth, key)
        headers["content-type"] = "application/json"
        if extra_headers:
            headers.update(extra_headers)
        url = upstream_url(wire, base, model, stream)
        response = await self.pool.post(url, list(headers.items()), orjson.dumps(body))
        kept = {k.decode("latin-1"): v.decode("latin-1") for k, v in response.headers if k in KEPT_HEADERS}
        if not stream or response.status >= 400 or "event-stream" not in kept.get("content-type", ""):
            return Answer(response.status, kept, await response.read())
        return Answer(response.status, kept, chunks=response.aiter(), close=response.aclose)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()


def test_body(wire: str, model: str) -> dict:
    if wire == ANTHROPIC:
        return {"model": model, "max_tokens": TEST_MAX_TOKENS, "messages": [{"role": "user", "content": TEST_PROMPT}]}
    if wire == OPENAI:
        return {"model": model, "max_tokens": TEST_MAX_TOKENS, "messages": [{"role": "user", "content": TEST_PROMPT}]}
    assert wire == GEMINI
    return {"contents": [{"role": "user", "parts": [{"text": TEST_PROMPT}]}],
            "generationConfig": {"maxOutputTokens": TEST_MAX_TOKENS}}


async def test_call(upstream: Upstream, provider: ProviderConfig, model: str, key: str | None) -> dict:
    """``models test``: one short call in the provider's own wire; says whether it answered."""
    wire = provider.wire
    start = time.perf_counter()
    try:
        a = await upstream.call(provider, wire, test_body(wire, model), model, False, key)
    except UPSTREAM_ERRORS as e:
        return {"provider": provider.id, "model": model, "ok": False, "status": None,
                "latency_ms": round((time.perf_counter() - start) * 1000, 1), "message": f"no answer: {type(e).__name__}: {e}"}
    ms = round((time.perf_counter() - start) * 1000, 1)
    message = "answered"
    if a.status >= 400:
        try:
            err = orjson.loads(a.body or b"{}")
            inner = err.get("error") if isinstance(err, dict) else None
            message = (inner.get("message") if isinstance(inner, dict) else None) or f"HTTP {a.status}"
        except orjson.JSONDecodeError:
            message = f"HTTP {a.status}"
    return {"provider": provider.id, "model": model, "ok": a.status < 400, "status": a.status, "latency_ms": ms,
            "message": message}
