"""The hub's HTTP and WebSocket API under /v1 (Starlette; served by Hypercorn on trio)."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any, Awaitable, Callable

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..domain.base import Refusal
from ..events import plaza as plaza_commands
from ..events.bus import SUBPROTOCOL, BusFull
from . import queries
from .auth import bearer_ok, is_loopback
from .errors import ApiError, Body, error_response, read_body, refusal_response
from .hub import Hub

#: How often the hub looks for events written by another hub process.
POLL_INTERVAL_S = 0.25
#: How long a command's answer waits for the read models to show it.
READ_YOUR_WRITES_S = 5.0
MAX_LIST_LIMIT = 1000


class StopBody(Body):
    reason: str


class ResumeBody(Body):
    reason: str | None = None


class RebuildBody(Body):
    name: str | None = None


class Follower:
    """Keeps the read models caught up and feeds the bus, on the hub's event loop."""

    def __init__(self, hub: Hub):
        self.hub = hub
        self.kick = anyio.Event()
        self.caught_up = anyio.Event()

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(POLL_INTERVAL_S):
                await self.kick.wait()
            self.kick = anyio.Event()
            records = await anyio.to_thread.run_sync(self.hub.read_models.catch_up)
            self.hub.bus.publish(records)
            done, self.caught_up = self.caught_up, anyio.Event()
            done.set()

    async def settle(self, position: int) -> None:
        """Wait until the read models include ``position`` (read your own writes)."""
        with anyio.move_on_after(READ_YOUR_WRITES_S):
            while self.hub.read_models.position() < position:
                waiter = self.caught_up
                self.kick.set()
                await waiter.wait()


def actor_of(conn: HTTPConnection) -> str:
    return "owner"


class OwnerOnly:
    """Loopback callers are the owner; any other caller presents the owner token."""

    def __init__(self, app: ASGIApp, hub: Hub):
        self.app, self.hub = app, hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client") or (None, None)
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"").decode("latin-1") or None
            if not is_loopback(client[0]) and not bearer_ok(auth, self.hub.owner_token_sha256):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 4401})
                    return
                await error_response(401, "unauthorized", "present the owner token as a bearer token")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(hub: Hub) -> Starlette:
    follower = Follower(hub)

    def endpoint(fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            try:
                result = await fn(request)
            except ApiError as e:
                return error_response(e.status, e.code, e.message)
            except Refusal as r:
                return refusal_response(r)
            return result if isinstance(result, Response) else JSONResponse(result)

        return wrapped

    async def command(run: Callable[[], list[int]]) -> list[int]:
        positions = await anyio.to_thread.run_sync(run)
        if positions:
            await follower.settle(positions[-1])
        return positions

    def int_param(request: Request, name: str, default: int | None, lo: int = 0, hi: int | None = None) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ApiError(422, "invalid_request", f"{name} must be an integer") from None
        if value < lo or (hi is not None and value > hi):
            raise ApiError(422, "invalid_request", f"{name} must be between {lo} and {hi}")
        return value

    # -- hub and overview ---------------------------------------------------

    async def health(request: Request) -> dict:
        return {"ok": True}

    async def hub_info(request: Request) -> dict:
        return await anyio.to_thread.run_sync(hub.info)

    async def overview(request: Request) -> dict:
        return await anyio.to_thread.run_sync(queries.overview, hub)

    # -- the plaza and STOP ALL -------------------------------------------------

    async def plaza_state(request: Request) -> dict:
        return await anyio.to_thread.run_sync(queries.plaza_state_view, hub)

    async def plaza_stop(request: Request) -> dict:
        body = await read_body(request, StopBody)
        ctx = hub.commands.context(actor_of(request), body.reason, request.headers.get("x-correlation-id"))
        await command(lambda: plaza_commands.stop_all(hub.commands, ctx))
        return await anyio.to_thread.run_sync(queries.plaza_state_view, hub)

    async def plaza_resume(request: Request) -> dict:
        body = await read_body(request, ResumeBody)
        ctx = hub.commands.context(actor_of(request), body.reason, request.headers.get("x-correlation-id"))
        await command(lambda: plaza_commands.resume(hub.commands, ctx))
        return await anyio.to_thread.run_sync(queries.plaza_state_view, hub)

    async def plaza_history(request: Request) -> dict:
        limit = int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
        return {"history": await anyio.to_thread.run_sync(queries.plaza_history, hub, limit)}

    # -- the log, audit and replay --------------------------------------------

    async def events(request: Request) -> dict:
        after = int_param(request, "after", 0)
        limit = int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
        kinds = [k for k in (request.query_params.get("kinds") or "").split(",") if k]

        def read() -> list[dict]:
            out = []
            for rec in hub.store.read(after, limit):
                if not kinds or rec.family in kinds or rec.kind in kinds:
                    out.append(rec.as_message())
            return out

        return {"events": await anyio.to_thread.run_sync(read)}

    async def audit_verify(request: Request) -> dict:
        verdict = await anyio.to_thread.run_sync(hub.store.verify)
        return verdict.as_dict()

    async def replay_rebuild(request: Request) -> dict:
        body = await read_body(request, RebuildBody)
        if body.name is not None and body.name not in hub.read_models.states:
            raise ApiError(404, "unknown_read_model", f"no read model named {body.name!r}; known: {', '.join(hub.read_models.states)}")
        return {"rebuilt": await anyio.to_thread.run_sync(hub.read_models.rebuild, body.name)}

    async def replay(request: Request) -> dict:
        at = request.query_params.get("at")
        upto = int_param(request, "upto", None, 0)
        name = request.query_params.get("name")
        if name and name not in hub.read_models.states:
            raise ApiError(404, "unknown_read_model", f"no read model named {name!r}")
        if at:
            at = parse_when(at)
            upto = await anyio.to_thread.run_sync(hub.store.position_at, at)
        if upto is None:
            upto = hub.store.max_position()
        models = await anyio.to_thread.run_sync(hub.read_models.replay, upto, [name] if name else None)
        return {"upto": upto, "at": at, "read_models": models}

    async def read_models(request: Request) -> dict:
        return {"read_models": {n: s.position for n, s in hub.read_models.states.items()}}

    # -- the live bus ------------------------------------------------------------

    async def ws(websocket: WebSocket) -> None:
        if SUBPROTOCOL not in (websocket.scope.get("subprotocols") or []):
            await websocket.close(code=4400, reason=f"use the subprotocol {SUBPROTOCOL}")
            return
        families = [k for k in (websocket.query_params.get("kinds") or "").split(",") if k] or None
        wake = anyio.Event()
        state = {"wake": wake}

        def wake_up() -> None:
            state["wake"].set()

        address = (websocket.client.host if websocket.client else "?")
        try:
            sub = hub.bus.subscribe(address, families, wake_up)
        except BusFull as e:
            await websocket.close(code=4429, reason=str(e))
            return
        await websocket.accept(subprotocol=SUBPROTOCOL)
        try:
            async with anyio.create_task_group() as tg:

                async def drain_incoming() -> None:
                    # Read-only: anything a client sends is ignored; a close ends the socket.
                    with contextlib.suppress(WebSocketDisconnect):
                        while True:
                            await websocket.receive_text()
                    tg.cancel_scope.cancel()

                tg.start_soon(drain_incoming)
                while True:
                    await state["wake"].wait()
                    state["wake"] = anyio.Event()
                    if sub.dropped:
                        await websocket.close(code=4408, reason="more than 1024 events behind; reconnect and read the state again")
                        break
                    while sub.queue:
                        await websocket.send_json(sub.queue.popleft().as_message())
                tg.cancel_scope.cancel()
        except (WebSocketDisconnect, anyio.get_cancelled_exc_class()):
            raise
        except Exception:  # noqa: BLE001 - a broken socket only ends itself
            pass
        finally:
            hub.bus.unsubscribe(sub)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            yield
            tg.cancel_scope.cancel()

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_response(404, "not_found", f"no route {request.method} {request.url.path}")

    async def wrong_method(request: Request, exc: Exception) -> Response:
        return error_response(405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}")

    async def crashed(request: Request, exc: Exception) -> Response:
        return error_response(500, "internal", "the hub failed to answer; see its log")

    routes = [
        Route("/v1/health", endpoint(health)),
        Route("/v1/hub", endpoint(hub_info)),
        Route("/v1/overview", endpoint(overview)),
        Route("/v1/plaza", endpoint(plaza_state)),
        Route("/v1/plaza/stop", endpoint(plaza_stop), methods=["POST"]),
        Route("/v1/plaza/resume", endpoint(plaza_resume), methods=["POST"]),
        Route("/v1/plaza/history", endpoint(plaza_history)),
        Route("/v1/events", endpoint(events)),
        Route("/v1/audit/verify", endpoint(audit_verify)),
        Route("/v1/replay", endpoint(replay)),
        Route("/v1/replay/rebuild", endpoint(replay_rebuild), methods=["POST"]),
        Route("/v1/read-models", endpoint(read_models)),
        WebSocketRoute("/v1/ws", ws),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(OwnerOnly, hub=hub)],
        exception_handlers={404: not_found, 405: wrong_method, 500: crashed},
    )
    app.state.hub = hub
    app.state.follower = follower
    return app


def parse_when(text: str) -> str:
    """A timestamp from the command line, as the log's UTC ISO form."""
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(422, "invalid_request", f"not a timestamp: {text!r} (use ISO 8601, e.g. 2026-11-29T21:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).isoformat()
