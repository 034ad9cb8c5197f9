"""``/mcp``: the hub as an MCP server, on the official ``mcp`` SDK's streamable-HTTP transport.

Off on a new install: until the owner turns it on, ``/mcp`` answers 404 like any unknown path.
Every request passes, before the SDK sees it:

1. the edge (``api/edge.py``): the hub's own ``Host``, JSON for every change; the ``Origin`` rule
   is applied here instead, since the owner may add origins for MCP (the hub's own always pass);
2. local or remote: a local server answers only this machine;
3. the caller: a hub MCP token (``apz_mcp_``), or the owner token; in open mode a request with no
   token runs as an anonymous caller at the open scope.  Loopback trust does not count here: a page
   in the owner's browser must never reach MCP.  A bad, revoked or expired token is refused.

The SDK binds each session to the caller that opened it (``scope["user"]``).  Its server, with the
checks of each tool call and the call log, is ``mcp_server``, loaded by the first request that passes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..commands import hub_mcp as commands
from ..domain.hub_mcp import scope_includes
from ..projections import hub_mcp as rm
from ..wire import ACP_ENTRY_PREFIX, MCP_TOKEN_PREFIX
from .auth import bearer_ok, is_loopback
from .errors import error_response
from .hub import Hub
from .mcp_tools import Tool

#: The guide: "60 calls a minute at observe, and 20 a minute at operate and govern" (shared with ACP).
RATE_PER_MINUTE = {"observe": 60, "operate": 20, "govern": 20}
RATE_WINDOW_S = 60.0
#: Callers the rate limiter tracks before it forgets those with no call in the window (open mode: addresses).
RATE_TRACKED = 10_000
#: Where the door leaves the caller for the tool handlers.
CALLER_KEY = "apz.mcp.caller"


@dataclass(frozen=True)
class Caller:
    key: str  # "token:<id>", "owner", "address:<ip>"
    scope: str
    tools: tuple[str, ...] = ()  # the allowlist's tool names (empty: every tool of the scope)
    acp: tuple[str, ...] = ()  # the allowlist's acp: entries

    def sees(self, tool: Tool) -> bool:
        return scope_includes(self.scope, tool.scope) and (not self.tools or tool.name in self.tools)


def caller_of(hub: Hub, scope: Scope, settings: dict) -> Caller | tuple[int, str, str]:
    """The caller of one request, or the refusal (status, code, message)."""
    headers = dict(scope.get("headers") or [])
    auth = headers.get(b"authorization", b"").decode("latin-1")
    if auth:
        if not auth.lower().startswith("bearer "):
            return 401, "unauthorized", "present a hub MCP token as a bearer token"
        value = auth[7:].strip()
        if bearer_ok(auth, hub.owner_token_sha256):
            return Caller("owner", "govern")
        if not value.startswith(MCP_TOKEN_PREFIX):
            return 401, "unauthorized", "that is not a hub MCP token"
        row = rm.token_by_hash(hub.read_models, commands.token_sha256(value))
        if row is None:
            return 401, "unauthorized", "that token is not known to this hub"
        if row["revoked_at"] is not None:
            return 401, "token_revoked", f"the token {row['name']!r} was revoked"
        if row["expires_at"] is not None and row["expires_at"] <= hub.commands.clock().isoformat():
            return 401, "token_expired", f"the token {row['name']!r} expired at {row['expires_at']}"
        entries = tuple(row["tools"])
        return Caller(f"token:{row['id']}", row["scope"],
                      tuple(e for e in entries if not e.startswith(ACP_ENTRY_PREFIX)),
                      tuple(e[len(ACP_ENTRY_PREFIX):] for e in entries if e.startswith(ACP_ENTRY_PREFIX)))
    if settings["mode"] == "open":
        client = scope.get("client") or ("", 0)
        return Caller(f"address:{client[0]}", settings["open_scope"])
    return 401, "unauthorized", "the hub's MCP server is in secure mode: present a hub MCP token"


class RateLimits:
    """Calls in the last minute, per caller (a token, or an address in open mode); in memory."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.seen: dict[str, deque[float]] = {}

    def take(self, key: str, scope: str) -> bool:
        now = self.clock()
        if len(self.seen) >= RATE_TRACKED:
            self.seen = {k: q for k, q in self.seen.items() if q and q[-1] > now - RATE_WINDOW_S}
        q = self.seen.setdefault(key, deque())
        while q and q[0] <= now - RATE_WINDOW_S:
            q.popleft()
        if len(q) >= RATE_PER_MINUTE[scope]:
            return False
        q.append(now)
        return True


def digest(arguments: dict | None) -> str:
    """What the call log keeps of a call's arguments: SHA-256 of their canonical JSON."""
    return hashlib.sha256(orjson.dumps(arguments or {}, option=orjson.OPT_SORT_KEYS)).hexdigest()


#: What a page at an origin the owner added may send and read (CORS, only for those origins, never "*").
CORS_METHODS = b"GET, POST, DELETE"
CORS_HEADERS = b"authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id"
CORS_EXPOSED = b"mcp-session-id, mcp-protocol-version"
CORS_MAX_AGE = b"600"


def added_origin(hub: Hub, scope: Scope, settings: dict) -> bytes | None:
    """The request's ``Origin`` where it is one the owner added for MCP (not the hub's own, which needs no
    CORS): the one origin the answer may name in ``Access-Control-Allow-Origin``."""
    origins = [v for k, v in scope.get("headers") or [] if k.lower() == b"origin"]
    if len(origins) != 1:
        return None
    origin = origins[0].decode("latin-1")
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    if hub.names.origin_ok(origin, host, scope.get("scheme", "http")):
        return None
    return origins[0] if origin.lower().rstrip("/") in settings["origins"] else None


def _cors(send: Send, origin: bytes, preflight: bool = False) -> Send:
    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            more = [(b"access-control-allow-origin", origin), (b"vary", b"Origin"),
                    (b"access-control-expose-headers", CORS_EXPOSED)]
            if preflight:
                more += [(b"access-control-allow-methods", CORS_METHODS),
                         (b"access-control-allow-headers", CORS_HEADERS), (b"access-control-max-age", CORS_MAX_AGE)]
            message = {**message, "headers": [*message.get("headers", []), *more]}
        await send(message)

    return sending


def own_origin_ok(hub: Hub, scope: Scope, origin: str, settings: dict) -> bool:
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    if hub.names.origin_ok(origin, host, scope.get("scheme", "http")):
        return True
    return origin.lower().rstrip("/") in settings["origins"]


#: A CORS preflight from an origin the owner added: answered 204 with what that page may send.
PREFLIGHT = (204, "preflight", "")


class McpDoor:
    """The ASGI app at ``/mcp``; ``lifespan`` holds the task group the SDK's session manager runs in.

    The SDK (``mcp``, ``mcp_types``: most of a second of imports) is loaded by the first request that
    passes the door (``mcp_server``), not at the hub's start: a hub whose MCP server is off never loads it."""

    def __init__(self, hub: Hub):
        self.hub = hub
        self.limits = RateLimits()
        self.manager: Any = None  # the SDK's StreamableHTTPSessionManager, running once the first caller is in
        self.app = None  # the Starlette app, set by create_app
        self.settle = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._starting: anyio.Lock | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            self._tg, self._starting = tg, anyio.Lock()
            try:
                yield
            finally:
                self._tg = None
                tg.cancel_scope.cancel()  # the session manager, if it was started, stops with the hub

    async def started(self) -> Any:
        """The SDK's session manager, loaded (off the event loop) and run on the first call."""
        if self.manager is None:
            if self._tg is None or self._starting is None:
                raise RuntimeError("the MCP door serves only while the hub's lifespan runs")
            async with self._starting:
                if self.manager is None:
                    server = await anyio.to_thread.run_sync(importlib.import_module, "agentplaza.api.mcp_server")
                    manager = server.manager_of(self)
                    await self._tg.start(_run_manager, manager)
                    self.manager = manager
        return self.manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal, cors = await anyio.to_thread.run_sync(self.checked, scope)
        if cors is not None:  # a page at an origin the owner added may read the answer (and only that page)
            send = _cors(send, cors, preflight=refusal is PREFLIGHT)
        if refusal is PREFLIGHT:
            await Response(status_code=204)(scope, receive, send)
            return
        if isinstance(refusal, tuple):
            status, code, message = refusal
            await error_response(status, code, message)(scope, receive, send)
            return
        manager = await self.started()
        from .mcp_server import authenticated  # loaded by started()

        scope[CALLER_KEY] = refusal
        scope["user"] = authenticated(refusal)
        await manager.handle_request(scope, receive, send)

    def checked(self, scope: Scope) -> tuple[Caller | tuple[int, str, str], bytes | None]:
        """The caller (or why not, or ``PREFLIGHT``), and the added origin the answer may name for CORS."""
        refusal = self.refusal(scope)
        settings = rm.settings(self.hub.read_models)
        cors = added_origin(self.hub, scope, settings) if settings["enabled"] else None
        if refusal is PREFLIGHT and cors is None:  # no page but an added origin's is ever answered
            return (404, "not_found", "no route OPTIONS /mcp"), None
        return refusal, cors

    def refusal(self, scope: Scope) -> Caller | tuple[int, str, str]:
        """The caller, or why not (it reads the read models: run off the event loop)."""
        settings = rm.settings(self.hub.read_models)
        if not settings["enabled"]:
            return 404, "not_found", f"no route {scope.get('method', 'GET')} {scope.get('path')}"
        origins = [v for k, v in scope.get("headers") or [] if k.lower() == b"origin"]
        origin = b"" if len(origins) > 1 else (origins[0] if origins else None)  # repeated is as bad as wrong
        if origin is not None and not own_origin_ok(self.hub, scope, origin.decode("latin-1"), settings):
            return 403, "foreign_origin", f"requests from other web pages are refused (Origin {origin[:200]!r})"
        client = scope.get("client") or (None, None)
        if not settings["remote"] and not is_loopback(client[0]):
            return 403, "mcp_local_only", "the hub's MCP server answers this machine only (it is local)"
        if scope.get("method") == "OPTIONS":  # a CORS preflight carries no token: answered by ``checked``
            return PREFLIGHT
        return caller_of(self.hub, scope, settings)


async def _run_manager(manager: Any, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()
