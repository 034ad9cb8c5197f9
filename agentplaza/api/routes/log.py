"""/v1/log: the stored events that cannot be read back, and the owner's voiding of one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...events import log as log_commands
from ..errors import Body, read_body
from ..kit import Api


class VoidBody(Body):
    position: int
    reason: str


def routes(api: Api) -> list:
    hub = api.hub

    async def unreadable(request: Request) -> dict:
        return {"unreadable": await api.query(hub.unreadable)}

    async def void(request: Request) -> dict:
        body = await read_body(request, VoidBody)
        ctx = api.context(request, body.reason)
        await api.command(lambda: log_commands.void(hub.commands, ctx, body.position))
        found = [u for u in await api.query(hub.unreadable) if u["position"] == body.position]
        return {"voided": found[0] if found else {"position": body.position}}

    return [
        Route("/v1/log/unreadable", api.endpoint(unreadable)),
        Route("/v1/log/void", api.endpoint(void), methods=["POST"]),
    ]
