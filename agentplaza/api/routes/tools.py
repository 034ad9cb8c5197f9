"""/v1/tools: the tool library (the programs agents packaged as tools): every named tool with its
versions, one version's program (for the owner to read before deciding), and the owner's approve or
reject of a version (its approval of kind tool_version, decided with a reason)."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...commands import toollib as cmd
from ...domain.base import Refusal
from ...domain.toollib import tool_name
from ...projections import toollib as rm
from ...projections import work as approvals_rm
from ...runtime.library import library_of
from ...runtime.librarystore import read_checked
from ..errors import Body, read_body
from ..kit import api_of, endpoint


class DecideBody(Body):
    reason: str | None = None


def _version(request: Request) -> int:
    raw = request.path_params["version"]
    if not raw.isdigit() or len(raw) > 6:
        raise Refusal("unknown_version", f"a version is a whole number, not {raw[:20]!r}")
    return int(raw)


@endpoint
async def list_tools(request: Request) -> dict:
    api = api_of(request)
    return {"tools": await api.query(rm.tool_rows, api.hub.read_models)}


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    return {"tool": await api.query(rm.tool_row, api.hub.read_models, tool_name(request.path_params["name"]))}


def _program(hub, name: str, version: int) -> tuple[dict, bytes]:
    v = cmd.load(hub.commands, name).version_of(version)  # (a blob cut short is refused, never shown)
    return v, read_checked(library_of(hub).store, v["key"], v["sha256"], f"{name} version {version}")


@endpoint
async def program(request: Request) -> Response:
    """A version's program, as text for reading (never run nor rendered by the browser)."""
    api = api_of(request)
    v, data = await api.query(_program, api.hub, tool_name(request.path_params["name"]), _version(request))
    headers = {"Content-Disposition": f"inline; filename*=UTF-8''{quote(v['filename'])}",
               "X-Content-Type-Options": "nosniff", "Digest": f"sha-256={v['sha256']}",
               "Content-Security-Policy": "sandbox; default-src 'none'"}
    return Response(data, 200, headers, media_type="text/plain; charset=utf-8")


async def _decide(request: Request, approve: bool) -> dict:
    api = api_of(request)
    body = await read_body(request, DecideBody)
    ctx = api.context(request, body.reason)
    name, version = tool_name(request.path_params["name"]), _version(request)
    out = (await api.command(lambda: cmd.decide(api.hub.commands, ctx, name, version, approve))).as_dict()
    out["tool"] = await api.query(rm.tool_row, api.hub.read_models, name)
    approval = next(v["approval"] for v in out["tool"]["versions"] if v["version"] == version)
    out["approval"] = await api.query(approvals_rm.approval_row, api.hub.read_models, approval)
    return out


@endpoint
async def approve(request: Request) -> dict:
    return await _decide(request, True)


@endpoint
async def reject(request: Request) -> dict:
    return await _decide(request, False)


ROUTES = [
    Route("/v1/tools", list_tools),
    Route("/v1/tools/{name}", show),
    Route("/v1/tools/{name}/versions/{version}/program", program),
    Route("/v1/tools/{name}/versions/{version}/approve", approve, methods=["POST"]),
    Route("/v1/tools/{name}/versions/{version}/reject", reject, methods=["POST"]),
]
