"""What every route module uses: the hub, JSON endpoints, commands that read their own writes.

A route module holds its handlers at module level, each wrapped by ``endpoint``, and a
module-level ``ROUTES`` list; a handler finds the hub's ``Api`` with ``api_of(request)``::

    @endpoint
    async def unreadable(request: Request) -> dict:
        api = api_of(request)
        return {"unreadable": await api.query(api.hub.unreadable)}

    ROUTES = [Route("/v1/log/unreadable", unreadable)]

A command returns ``Done(value, positions)``; ``api.command`` runs it off the event loop, waits
until the read models show its positions, and gives back its value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from .. import gate
from ..commands.unit import Done
from ..domain.base import Context, Refusal
from ..domain.idempotency import KeyTaken
from ..domain.refusals import Kind
from .errors import ApiError, drain, error_response, status_of
from .gateway import scrubber_of
from .hub import Hub
from .idempotency import Keys

#: How often the hub looks for events written by another hub process.
POLL_INTERVAL_S = 0.25
#: How long a command's answer waits for the read models to show it.
READ_YOUR_WRITES_S = 5.0
#: The most events one round of the follower folds before it hands them to the bus (a long catch-up
#: goes on in rounds, so the hub never holds more than this many records at once).
FOLLOW_BATCH_MAX = 20_000
#: The most rows one list request returns.
MAX_LIST_LIMIT = 1000


class Follower:
    """Keeps the read models caught up and feeds the bus, on the hub's event loop."""

    def __init__(self, hub: Hub):
        self.hub = hub
        self.kick = anyio.Event()
        self.caught_up = anyio.Event()
        #: The read models were far behind the log when apid began to listen (``Hub.caught_up_at_start``):
        #: apid says when they have caught up, with what it could not say at its start (``Hub.caught_up_notes``).
        self.behind_at_start = not hub.caught_up_at_start

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(POLL_INTERVAL_S):
                await self.kick.wait()
            self.kick = anyio.Event()
            records = await anyio.to_thread.run_sync(self.hub.read_models.catch_up, FOLLOW_BATCH_MAX)
            if len(records) >= FOLLOW_BATCH_MAX:
                self.kick.set()  # more to fold: go on at once, with this batch handed on first
            del records
            # Every event folded since the last turn, by this catch-up or any other (``Hub.folded``).
            self.hub.bus.publish(self.hub.bus.take_folded())
            self.hub.bus.publish(self.hub.bus.take_console())  # the VMs' console lines (events --all)
            done, self.caught_up = self.caught_up, anyio.Event()
            done.set()
            if self.behind_at_start and await anyio.to_thread.run_sync(self.hub.read_models.behind) == 0:
                self.behind_at_start = False
                for line in await anyio.to_thread.run_sync(self.hub.caught_up_notes):
                    print(line, flush=True)
            anchors = self.hub.anchors
            if anchors is not None and anchors.due(self.hub.read_models.position()):
                await anyio.to_thread.run_sync(anchors.checkpoint)

    async def settle(self, position: int) -> None:
        """Wait until the read models include ``position`` (read your own writes)."""
        with anyio.move_on_after(READ_YOUR_WRITES_S):
            while self.hub.read_models.position() < position:
                waiter = self.caught_up
                self.kick.set()
                await waiter.wait()


class Api:
    def __init__(self, hub: Hub):
        self.hub = hub
        self.follower = Follower(hub)
        self.keys = Keys(hub)

    def endpoint(self, fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
        """A route whose result is JSON and whose refusals are the error shape, with no vault value in a
        refusal's message; a write with an ``Idempotency-Key`` is done once (see ``idempotency``)."""
        scrub = scrubber_of(self.hub).scrub

        async def answer(request: Request) -> Response:
            try:
                check_params(request)
                result = await fn(request)
            except KeyTaken:
                raise  # the key's claim was lost to another request: ``Keys.around`` answers for it
            except ApiError as e:
                if e.kind is not Kind.TOO_LARGE:  # a body too large was drained as far as it is, or refused at once
                    await drain(request)
                return error_response(status_of(e), e.code, scrub(e.message))
            except Refusal as r:
                await drain(request)
                return error_response(status_of(r), r.code, scrub(r.message))
            return result if isinstance(result, Response) else JSONResponse(result)

        async def wrapped(request: Request) -> Response:
            return await self.keys.around(request, lambda: answer(request))

        wrapped.__name__ = fn.__name__
        return wrapped

    def context(self, conn: HTTPConnection, reason: str | None = None) -> Context:
        """Who is calling: the owner, for every caller the owner-only wall let in."""
        return self.hub.commands.context("owner", reason, conn.headers.get("x-correlation-id"))

    async def command(self, run: Callable[[], Any]) -> Any:
        """Run a command off the event loop, wait until the read models show it, and give back its
        value (a command gives ``Done``; the older ones give their positions, which are returned)."""
        result = await anyio.to_thread.run_sync(run)
        done = result if isinstance(result, Done) else Done(result, list(result or []))
        if done.positions:
            await self.follower.settle(done.positions[-1])
        return done.value

    async def query(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    @staticmethod
    def int_param(request: Request, name: str, default: int | None, lo: int = 0, hi: int | None = None) -> int | None:
        """An integer query parameter, within ``lo``..``hi`` and signed 64 bits (the gate's ``query_int``)."""
        try:
            return gate.query_int(name, request.query_params.get(name), default, lo, hi)
        except gate.OutOfBounds as e:
            raise ApiError("invalid_request", str(e)) from None


def api_of(conn: HTTPConnection) -> Api:
    """The hub's ``Api`` (set on the app by ``create_app``)."""
    return conn.app.state.api


def endpoint(fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
    """A module-level route handler as ``Api.endpoint`` makes it: JSON result, refusals as the error
    shape (scrubbed), a write with an ``Idempotency-Key`` done once."""
    made: dict[int, Callable[[Request], Awaitable[Response]]] = {}

    async def handler(request: Request) -> Response:
        api = api_of(request)
        wrapped = made.get(id(api))
        if wrapped is None:
            wrapped = made[id(api)] = api.endpoint(fn)
        return await wrapped(request)

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


def check_params(conn: HTTPConnection) -> None:
    """Every query and path parameter passes the gate's string rule before a handler reads it."""
    try:
        for name, value in conn.query_params.multi_items():
            gate.check_param("a query parameter's name", name)
            gate.check_param(name, value)
        for name, value in conn.path_params.items():
            if isinstance(value, str):
                gate.check_param(name, value)
    except gate.OutOfBounds as e:
        raise ApiError("invalid_request", str(e)) from None
