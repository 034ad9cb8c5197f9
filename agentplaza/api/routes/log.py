"""/v1/log: the stored events that cannot be read back, and the owner's voiding of one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import log as log_commands
from ..errors import Body, read_body
from ..kit import api_of, endpoint


class VoidBody(Body):
    position: int
    reason: str


@endpoint
async def unreadable(request: Request) -> dict:
    api = api_of(request)
    return {"unreadable": await api.query(api.hub.unreadable)}


@endpoint
async def void(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, VoidBody)
    ctx = api.context(request, body.reason)
    await api.command(lambda: log_commands.void(api.hub.commands, ctx, body.position))
    found = [u for u in await api.query(api.hub.unreadable) if u["position"] == body.position]
    return {"voided": found[0] if found else {"position": body.position}}


ROUTES = [
    Route("/v1/log/unreadable", unreadable),
    Route("/v1/log/void", void, methods=["POST"]),
]
