"""/v1/plaza: the plaza's state, STOP ALL and resume."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import plaza as plaza_commands
from .. import queries
from ..errors import Body, read_body
from ..kit import MAX_LIST_LIMIT, Api


class StopBody(Body):
    reason: str


class ResumeBody(Body):
    reason: str | None = None


def routes(api: Api) -> list:
    hub = api.hub

    async def state(request: Request) -> dict:
        return await api.query(queries.plaza_state_view, hub)

    async def stop(request: Request) -> dict:
        body = await read_body(request, StopBody)
        ctx = api.context(request, body.reason)
        await api.command(lambda: plaza_commands.stop_all(hub.commands, ctx))
        return await api.query(queries.plaza_state_view, hub)

    async def resume(request: Request) -> dict:
        body = await read_body(request, ResumeBody)
        ctx = api.context(request, body.reason)
        await api.command(lambda: plaza_commands.resume(hub.commands, ctx))
        return await api.query(queries.plaza_state_view, hub)

    async def history(request: Request) -> dict:
        limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
        return {"history": await api.query(queries.plaza_history, hub, limit)}

    return [
        Route("/v1/plaza", api.endpoint(state)),
        Route("/v1/plaza/stop", api.endpoint(stop), methods=["POST"]),
        Route("/v1/plaza/resume", api.endpoint(resume), methods=["POST"]),
        Route("/v1/plaza/history", api.endpoint(history)),
    ]
