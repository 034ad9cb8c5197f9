"""The MCP tools' door into the hub: the hub's own routes, called in-process.

A tool does what the console does by calling the same route the console calls, through the same
handler (body checks, idempotency, the command, its laws and refusals), never around it.  The
request carries ``x-correlation-id: mcp:<caller>:<call>``, so every event the call causes says it
came over MCP.  Only the routes the tool table names (``ROUTES_USED``) can be called here: any
other path is refused before it is dispatched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import anyio
import orjson
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message

from ..commands.unit import Commands, Done
from ..domain.base import Context, Refusal
from .auth import AUTH_SCOPE_KEY

#: How the caller got in, for the routes (never the owner token: a route that asks for it refuses).
AUTH_MCP = "mcp"
#: The name an in-process request is addressed to (it never crosses the edge).
INNER_HOST = b"127.0.0.1"
#: The most an answer from a route may hold, read back into the tool's result.
MAX_ANSWER_BYTES = 8 * 1024 * 1024


class RouteRefused(Exception):
    """A route answered with the error shape; carries its code, message and status."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _patterns(routes: Iterable[tuple[str, str]]) -> list[tuple[str, re.Pattern]]:
    return [(method, compile_path(path)[0]) for method, path in routes]


class Inner:
    def __init__(self, app: ASGIApp, commands: Commands, follower_settle: Callable, correlation_id: str,
                 routes: Iterable[tuple[str, str]], reason: str | None = None):
        self.app, self.commands, self.settle = app, commands, follower_settle
        self.correlation_id, self.reason = correlation_id, reason
        self.allowed = _patterns(routes)

    def _check(self, method: str, path: str) -> None:
        if not any(m == method and p.fullmatch(path) for m, p in self.allowed):
            raise Refusal("not_allowed", f"{method} {path} is not reachable over MCP")

    async def get(self, path: str, **query: Any) -> Any:
        return await self.request("GET", path, query={k: v for k, v in query.items() if v is not None})

    async def post(self, path: str, body: dict) -> Any:
        return await self.request("POST", path, body=body)

    async def request(self, method: str, path: str, *, query: dict | None = None, body: dict | None = None) -> Any:
        self._check(method, path)
        raw = orjson.dumps(body) if body is not None else b""
        headers = [(b"host", INNER_HOST), (b"x-correlation-id", self.correlation_id.encode())]
        if body is not None:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "headers": headers,
            "query_string": urlencode(query or {}).encode(), "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0), "app": self.app, AUTH_SCOPE_KEY: AUTH_MCP,
        }
        sent = False
        status, chunks = 500, []

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if sum(map(len, chunks)) > MAX_ANSWER_BYTES:
                    raise RouteRefused(500, "internal", "the answer is too large for a tool result")

        await self.app.router(scope, receive, send)
        data = orjson.loads(b"".join(chunks) or b"null")
        if status >= 400:
            err = (data or {}).get("error", {}) if isinstance(data, dict) else {}
            raise RouteRefused(status, err.get("code", "internal"), err.get("message", f"the hub answered {status}"))
        return data

    async def command(self, run: Callable[[Commands, Context], Any]) -> Any:
        """A command the guide gives no route for, in the caller's name (correlation id ``mcp:...``)."""
        ctx = self.commands.context("owner", self.reason, self.correlation_id)
        result = await anyio.to_thread.run_sync(lambda: run(self.commands, ctx))
        done = result if isinstance(result, Done) else Done(result, [])
        if done.positions:
            await self.settle(done.positions[-1])
        return done.value
