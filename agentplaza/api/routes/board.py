"""/v1/board: the board (list, show, post and reply as the owner, pause and resume deliveries, export);
its events are the ``board`` family on /v1/ws. What an agent does on the board goes through its
harness's tools (``plaza_board_read``, ``plaza_board_post``), not through these routes."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import board as cmd
from ...domain.board import check_project
from ...domain.names import post_number
from ...projections import board as rm
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, api_of, endpoint

#: The export's formats (``board export --format``).
EXPORT_FORMATS = ("md", "json")


class PostBody(Body):
    text: str
    project: str | None = None
    task: str | None = None


class ReplyBody(Body):
    text: str


class PauseBody(Body):
    on: bool
    project: str | None = None


def _project(request: Request) -> str | None:
    return check_project(request.query_params.get("project") or None)


@endpoint
async def list_posts(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return await api.query(rm.board, api.hub.read_models, _project(request), limit)


@endpoint
async def get_post(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.post_row, api.hub.read_models, post_number(request.path_params["id"]))


@endpoint
async def create_post(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, PostBody)
    ctx = api.context(request)
    out = await api.command(lambda: cmd.post(api.hub.commands, ctx, body.text, body.project, body.task))
    return {**out, "post": await api.query(rm.post_row, api.hub.read_models, out["id"])}


@endpoint
async def create_reply(request: Request) -> dict:
    api = api_of(request)
    number = post_number(request.path_params["id"])
    body = await read_body(request, ReplyBody)
    ctx = api.context(request)
    out = await api.command(lambda: cmd.reply(api.hub.commands, ctx, number, body.text))
    return {**out, "post": await api.query(rm.post_row, api.hub.read_models, number)}


@endpoint
async def pause(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, PauseBody)
    ctx = api.context(request)
    out = await api.command(lambda: cmd.pause(api.hub.commands, ctx, body.on, body.project))
    return {**out, "paused_scopes": await api.query(rm.paused, api.hub.read_models)}


@endpoint
async def export(request: Request) -> dict:
    api = api_of(request)
    fmt = request.query_params.get("format") or "md"
    if fmt not in EXPORT_FORMATS:
        raise ApiError("invalid_format", f"the export's format is {' or '.join(EXPORT_FORMATS)}")
    project = _project(request)
    return {"project": project, "format": fmt, "text": await api.query(rm.export, api.hub.read_models, project, fmt)}


ROUTES = [
    Route("/v1/board", list_posts),
    Route("/v1/board", create_post, methods=["POST"]),
    Route("/v1/board/pause", pause, methods=["POST"]),
    Route("/v1/board/export", export),
    Route("/v1/board/{id}", get_post),
    Route("/v1/board/{id}/replies", create_reply, methods=["POST"]),
]
