"""Calling a provider over httpx: one shared async client, whole answers or streams.

The mock provider is answered in-process by the same interface, so the
gateway treats every provider alike.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import AsyncIterator

import httpx
import orjson

from . import mock as mock_provider
from .presets import ANTHROPIC, GEMINI, OPENAI, ProviderConfig
from .wire import auth_headers, upstream_url

#: How long the hub waits to connect to a provider, and for each read of its answer.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0
#: Connections kept open to providers.
MAX_CONNECTIONS = 200
MAX_KEEPALIVE = 50
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


class Upstream:
    """The hub's one way out to model providers."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None):
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE)
            # No Nagle: a request's head and body go out at once, not one round trip apart.
            transport = self._transport or httpx.AsyncHTTPTransport(
                limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
            self._http = httpx.AsyncClient(
                transport=transport,
                timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
                limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE),
                follow_redirects=False,
            )
        return self._http

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
        if extra_headers:
            headers.update(extra_headers)
        request = self.http.build_request("POST", upstream_url(wire, base, model, stream),
                                          content=orjson.dumps(body), headers=headers)
        response = await self.http.send(request, stream=True)
        kept = {k: v for k, v in response.headers.items()
                if k.lower() in ("content-type", "retry-after", "request-id", "x-request-id")}
        if not stream or response.status_code >= 400 or "event-stream" not in response.headers.get("content-type", ""):
            try:
                data = await response.aread()
            finally:
                await response.aclose()
            return Answer(response.status_code, kept, data)
        return Answer(response.status_code, kept, chunks=response.aiter_raw(), close=response.aclose)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()


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
    except httpx.HTTPError as e:
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
