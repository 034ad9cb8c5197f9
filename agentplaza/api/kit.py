"""What every route module uses: the hub, JSON endpoints, commands that read their own writes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from .. import gate
from ..domain.base import Context, Refusal
from ..domain.idempotency import KeyTaken
from .errors import ApiError, drain, error_response
from .gateway import scrubber_of
from .hub import Hub
from .idempotency import Keys

#: How often the hub looks for events written by another hub process.
POLL_INTERVAL_S = 0.25
#: How long a command's answer waits for the read models to show it.
READ_YOUR_WRITES_S = 5.0
#: The most rows one list request returns.
MAX_LIST_LIMIT = 1000


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
                if e.status != 413:  # a body too large was drained as far as it is, or refused at once
                    await drain(request)
                return error_response(e.status, e.code, scrub(e.message))
            except Refusal as r:
                await drain(request)
                return error_response(r.status, r.code, scrub(r.message))
            return result if isinstance(result, Response) else JSONResponse(result)

        async def wrapped(request: Request) -> Response:
            return await self.keys.around(request, lambda: answer(request))

        wrapped.__name__ = fn.__name__
        return wrapped

    def context(self, conn: HTTPConnection, reason: str | None = None) -> Context:
        """Who is calling: the owner, for every caller the owner-only wall let in."""
        return self.hub.commands.context("owner", reason, conn.headers.get("x-correlation-id"))

    async def command(self, run: Callable[[], list[int]]) -> list[int]:
        """Run a command off the event loop, then wait until the read models show it."""
        positions = await anyio.to_thread.run_sync(run)
        if positions:
            await self.follower.settle(positions[-1])
        return positions

    async def query(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    @staticmethod
    def int_param(request: Request, name: str, default: int | None, lo: int = 0, hi: int | None = None) -> int | None:
        """An integer query parameter, within ``lo``..``hi`` and signed 64 bits (the gate's ``query_int``)."""
        try:
            return gate.query_int(name, request.query_params.get(name), default, lo, hi)
        except gate.OutOfBounds as e:
            raise ApiError(422, "invalid_request", str(e)) from None


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
        raise ApiError(422, "invalid_request", str(e)) from None
