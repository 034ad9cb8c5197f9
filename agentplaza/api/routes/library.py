"""/v1/library: the Library: the files agents hand in (deliverables, d1, d2 ...) and the files they share
(the file store, f1, f2 ...: ``/v1/library/shared``). List with search and a filter by type, show one,
download its bytes (checked against the log's digest), delete it; an id names which kind it is."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...domain.files import FILE_PREFIX, file_number
from ...domain.library import KINDS, item_number
from ...projections import files as files_rm
from ...projections import library as rm
from ...runtime.files import files_of
from ...runtime.library import library_of
from ..errors import ApiError
from ..kit import MAX_LIST_LIMIT, api_of, endpoint

#: A preview (``?inline=1``) runs in a sandbox: scripts may run, but it has no origin, submits no form
#: and navigates nothing (the guide's sandboxed frame for HTML reports). Only the hub's own pages (the
#: console's Library screen) may frame it; the edge's ``X-Frame-Options: DENY`` would refuse even those.
INLINE_CSP = ("sandbox allow-scripts; default-src 'none'; img-src data: blob:; media-src data: blob:; "
              "style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'self'")
#: The older header for the same rule, for a browser that does not read ``frame-ancestors``.
INLINE_FRAME_OPTIONS = "SAMEORIGIN"


def _search(request: Request) -> tuple[str | None, str | None, int]:
    q = request.query_params
    kind = q.get("type") or None
    if kind is not None and kind not in KINDS:
        raise ApiError("invalid_request", f"type is one of {', '.join(KINDS)}")
    return q.get("q") or None, kind, api_of(request).int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)


def _shared(request: Request) -> bool:
    """Whether the id names a shared file (f3) rather than a deliverable (d3)."""
    return str(request.path_params["id"]).strip().startswith(FILE_PREFIX)


@endpoint
async def items(request: Request) -> dict:
    api = api_of(request)
    return {"items": await api.query(rm.item_rows, api.hub.read_models, *_search(request))}


@endpoint
async def shared(request: Request) -> dict:
    api = api_of(request)
    return {"files": await api.query(files_rm.file_rows, api.hub.read_models, *_search(request))}


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    if _shared(request):
        return {"item": await api.query(files_rm.file_row, api.hub.read_models, file_number(request.path_params["id"]))}
    return {"item": await api.query(rm.item_row, api.hub.read_models, item_number(request.path_params["id"]))}


@endpoint
async def content(request: Request) -> Response:
    api = api_of(request)
    if _shared(request):
        item, data = await api.query(files_of(api.hub).download, file_number(request.path_params["id"]))
    else:
        item, data = await api.query(library_of(api.hub).download, item_number(request.path_params["id"]))
    inline = request.query_params.get("inline") in ("1", "true", "yes")
    disposition = "inline" if inline else "attachment"
    headers = {"Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(item.filename)}",
               "X-Content-Type-Options": "nosniff", "Digest": f"sha-256={item.sha256}"}
    if inline:
        headers["Content-Security-Policy"] = INLINE_CSP
        headers["X-Frame-Options"] = INLINE_FRAME_OPTIONS
    return Response(data, 200, headers, media_type=item.media_type if inline else "application/octet-stream")


@endpoint
async def delete(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request)
    if _shared(request):
        number = file_number(request.path_params["id"])
        await api.command(lambda: files_of(api.hub).delete(ctx, number))
    else:
        number = item_number(request.path_params["id"])
        await api.command(lambda: library_of(api.hub).delete(ctx, number))
    return {"deleted": number}


ROUTES = [
    Route("/v1/library", items),
    Route("/v1/library/shared", shared),
    Route("/v1/library/{id}", show),
    Route("/v1/library/{id}", delete, methods=["DELETE"]),
    Route("/v1/library/{id}/content", content),
]
