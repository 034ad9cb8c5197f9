"""/v1/toolbox: the discoveries agents shared (flagged ones last), and the owner's flag and remove
(``POST /v1/toolbox/{id}/flag``, ``DELETE /v1/toolbox/{id}``); the ``toolbox`` family on /v1/ws."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import toolbox as cmd
from ...domain.toolbox import MAX_ENTRIES
from ...projections import toolbox as rm
from ..kit import api_of, endpoint


@endpoint
async def list_(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", MAX_ENTRIES, 1, MAX_ENTRIES)
    return {"discoveries": await api.query(rm.discovery_rows, api.hub.read_models, limit)}


@endpoint
async def flag(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request)
    return await api.command(lambda: cmd.flag(api.hub.commands, ctx, request.path_params["id"]))


@endpoint
async def remove(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request)
    return await api.command(lambda: cmd.remove(api.hub.commands, ctx, request.path_params["id"]))


ROUTES = [
    Route("/v1/toolbox", list_),
    Route("/v1/toolbox/{id}/flag", flag, methods=["POST"]),
    Route("/v1/toolbox/{id}", remove, methods=["DELETE"]),
]
