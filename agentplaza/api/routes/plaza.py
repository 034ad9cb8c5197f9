"""/v1/plaza: the plaza's state, STOP ALL and resume."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import plaza as plaza_commands
from ...projections import plaza as rm
from ..errors import Body, read_body
from ..kit import MAX_LIST_LIMIT, api_of, endpoint


class StopBody(Body):
    reason: str | None = None  # the hold records none when none is given (``plaza stop --yes``)


class ResumeBody(Body):
    reason: str | None = None


@endpoint
async def state(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.state_view, api.hub.read_models)


@endpoint
async def stop(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, StopBody)
    ctx = api.context(request, body.reason)
    await api.command(lambda: plaza_commands.stop_all(api.hub.commands, ctx))
    return await api.query(rm.state_view, api.hub.read_models)


@endpoint
async def resume(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, ResumeBody)
    ctx = api.context(request, body.reason)
    await api.command(lambda: plaza_commands.resume(api.hub.commands, ctx))
    return await api.query(rm.state_view, api.hub.read_models)


@endpoint
async def history(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
    return {"history": await api.query(rm.history_rows, api.hub.read_models, limit)}


ROUTES = [
    Route("/v1/plaza", state),
    Route("/v1/plaza/stop", stop, methods=["POST"]),
    Route("/v1/plaza/resume", resume, methods=["POST"]),
    Route("/v1/plaza/history", history),
]
