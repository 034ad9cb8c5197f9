"""The hub's HTTP and WebSocket API under /v1 (Starlette; served by Hypercorn on trio)."""

from __future__ import annotations

import contextlib

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from ..runtime import prices, projectrepo, scheduling, vault_watch
from ..wire import ACP_PATH, MCP_PATH
from . import ws
from .acp_door import AcpDoor
from .auth import (
    AUTH_LOOPBACK,
    AUTH_SCOPE_KEY,
    AUTH_SESSION,
    AUTH_TOKEN,
    bearer_ok,
    cookie_value,
    is_loopback,
    session_of,
)
from .edge import GIT_PATH, Edge
from .errors import drain, error_response
from .hub import Hub
from .kit import Api
from .mcp_door import McpDoor
from .routes import AREAS
from .routes import gateway as gateway_routes
from .routes.console import ASSETS_PREFIX as CONSOLE_ASSETS
from .routes.e2b import E2B_PREFIX
from .routes.gateway import GATEWAY_PREFIX
from .routes.hosting import REDEEM_PATH
from .routes.nodelink import CONNECT_PATH as NODE_CONNECT_PATH

#: Open to every caller that passed the door: signing in checks the token it is given itself, the
#: console's files (routes/console.py) hold no plaza data (its sign-in page must load before a session),
#: git's smart HTTP door checks the owner token itself (as a git client sends it: basic auth), and the
# E2B API checks its own e2b_ keys (routes/e2b.py; the owner token does not open it).
OPEN_PREFIXES = (GATEWAY_PREFIX + "/", "/v1/auth/", CONSOLE_ASSETS, GIT_PATH, E2B_PREFIX + "/")
OPEN_PATHS = frozenset({"/", REDEEM_PATH})  # a node's redemption carries its own proof: the join code


class OwnerOnly:
    """Who may call: the owner token as a bearer token, a sign-in's session cookie, or, while loopback
    trust is on, any caller on this machine.  How the caller got in is left in the scope (AUTH_SCOPE_KEY),
    so a route that makes the hub run a program can ask for the token itself."""

    def __init__(self, app: ASGIApp, hub: Hub):
        self.app, self.hub = app, hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # The model gateway answers agents, who know no owner token: it checks its own per-agent tokens.
        path = scope.get("path", "")
        if scope["type"] == "http" and (path.startswith(OPEN_PREFIXES) or path in OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        # /mcp checks its own callers (hub MCP tokens; loopback trust does not count there): api/mcp_door.py.
        if scope["type"] == "http" and scope.get("path") == MCP_PATH:
            await self.app(scope, receive, send)
            return
        # /acp likewise checks its own callers (the owner token or a hub MCP token): api/acp_door.py.
        # A joined node's connection proves who it is with its signed hello (routes/nodelink.py), not a token.
        if scope["type"] == "websocket" and scope.get("path") == NODE_CONNECT_PATH:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket" and scope.get("path") == ACP_PATH:
            await self.app(scope, receive, send)
            return
        how = self.how(scope)
        if how is None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4401})
                return
            await error_response(401, "unauthorized", "present the owner token as a bearer token")(scope, receive, send)
            return
        scope[AUTH_SCOPE_KEY] = how
        await self.app(scope, receive, send)

    def how(self, scope: Scope) -> str | None:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1") or None
        if bearer_ok(auth, self.hub.owner_token_sha256):
            return AUTH_TOKEN
        if self.hub.sessions.valid(cookie_value(headers.get(b"cookie", b"").decode("latin-1"))):
            return AUTH_SESSION
        client = scope.get("client") or (None, None)
        if self.hub.loopback_trust and is_loopback(client[0]):
            return AUTH_LOOPBACK
        return None


#: The runtime's loops the hub runs beside its routes (each takes the hub).
RUNTIME_LOOPS = (scheduling.background, prices.daily, vault_watch.flush_uses, projectrepo.follow)


def session_holds(hub: Hub, scope: Scope) -> bool:
    """A caller that came in on a sign-in's cookie: whether that sign-in still holds (a rotated owner token
    or a sign-out ends it); any other way in holds for the socket's life."""
    if scope.get(AUTH_SCOPE_KEY) != AUTH_SESSION:
        return True
    return hub.sessions.valid(session_of(scope))


class HubApp(Starlette):
    """The hub's app: Starlette, with a model call taken by the gateway's door before Starlette's stack
    (``routes.gateway.Door``: every other request, and a call the edge refuses, goes the whole way)."""

    door: gateway_routes.Door | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.door is not None and await self.door.take(scope, receive, send):
            return
        await super().__call__(scope, receive, send)


def create_app(hub: Hub) -> Starlette:
    api = Api(hub)
    mcp = McpDoor(hub)
    acp = AcpDoor(hub, mcp)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        async with anyio.create_task_group() as tg:
            tg.start_soon(api.follower.run)
            for loop in RUNTIME_LOOPS:  # the runtime's own loops: they receive the hub
                tg.start_soon(loop, hub)
            async with mcp.lifespan():
                yield
            tg.cancel_scope.cancel()

    async def not_found(request: Request, exc: Exception) -> Response:
        await drain(request)
        return error_response(404, "not_found", f"no route {request.method} {request.url.path}")

    async def wrong_method(request: Request, exc: Exception) -> Response:
        await drain(request)
        return error_response(405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}")

    async def crashed(request: Request, exc: Exception) -> Response:
        return error_response(500, "internal", "the hub failed to answer; see its log")

    # The gateway's routes first: every model call is a request, and Starlette tries the routes in turn
    # (over 100 came before them). No other route matches a gateway path (tests/test_gateway_routes.py).
    routes = [*gateway_routes.ROUTES, *(r for area in AREAS if area is not gateway_routes for r in area.ROUTES)]
    routes.append(WebSocketRoute("/v1/ws", ws.endpoint(hub.bus, lambda scope: session_holds(hub, scope))))
    routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE", "OPTIONS"]))  # OPTIONS: CORS preflight
    routes.append(WebSocketRoute(ACP_PATH, acp.endpoint))
    app = HubApp(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(Edge, names=hub.names), Middleware(OwnerOnly, hub=hub)],
        exception_handlers={404: not_found, 405: wrong_method, 500: crashed},
    )
    app.state.hub = hub
    app.state.api = api
    app.door = gateway_routes.Door(api, hub.names)
    mcp.app, mcp.settle = app, api.follower.settle
    return app
