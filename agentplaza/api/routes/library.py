"""/v1/library: the Library of deliverables (the files agents hand in): list with search and a filter by
type, show one, download its bytes (checked against the log's digest), delete it."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...domain.library import KINDS, item_number
from ...projections import library as rm
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


@endpoint
async def items(request: Request) -> dict:
    api = api_of(request)
    q = request.query_params
    kind = q.get("type") or None
    if kind is not None and kind not in KINDS:
        raise ApiError("invalid_request", f"type is one of {', '.join(KINDS)}")
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return {"items": await api.query(rm.item_rows, api.hub.read_models, q.get("q") or None, kind, limit)}


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    return {"item": await api.query(rm.item_row, api.hub.read_models, item_number(request.path_params["id"]))}


@endpoint
async def content(request: Request) -> Response:
    api = api_of(request)
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
    number = item_number(request.path_params["id"])
    ctx = api.context(request)
    await api.command(lambda: library_of(api.hub).delete(ctx, number))
    return {"deleted": number}


ROUTES = [
    Route("/v1/library", items),
    Route("/v1/library/{id}", show),
    Route("/v1/library/{id}", delete, methods=["DELETE"]),
    Route("/v1/library/{id}/content", content),
]
