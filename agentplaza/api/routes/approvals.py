"""/v1/approvals: the one queue of what waits for the owner; approve or deny, with a reason.
Other areas put items in it (an agent proposal, a held payment, a call that asks, a sanction)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import approvals as cmd
from ...domain.approvals import KINDS, STATUSES
from ...domain.names import approval_number
from ...projections import work as rm
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, api_of, endpoint


class DecideBody(Body):
    reason: str | None = None


@endpoint
async def list_approvals(request: Request) -> dict:
    api = api_of(request)
    q = request.query_params
    status = q.get("status") or ("pending" if q.get("pending") in ("1", "true", "yes") else None)
    if status == "all":
        status = None
    if status is not None and status not in STATUSES:
        raise ApiError("invalid_request", f"status is one of {', '.join(STATUSES)} or all")
    kind = q.get("kind") or None
    if kind is not None and kind not in KINDS:
        raise ApiError("invalid_request", f"kind is one of {', '.join(KINDS)}")
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return {"approvals": await api.query(rm.approval_rows, api.hub.read_models, status, kind, q.get("agent") or None,
                                         limit)}


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.approval_row, api.hub.read_models, approval_number(request.path_params["id"]))


async def _decide(request: Request, approve: bool) -> dict:
    api = api_of(request)
    body = await read_body(request, DecideBody)
    ctx = api.context(request, body.reason)
    number = request.path_params["id"]
    out = (await api.command(lambda: cmd.decide(api.hub.commands, ctx, number, approve))).as_dict()
    out["approval"] = await api.query(rm.approval_row, api.hub.read_models, approval_number(number))
    return out


@endpoint
async def approve(request: Request) -> dict:
    return await _decide(request, True)


@endpoint
async def deny(request: Request) -> dict:
    return await _decide(request, False)


ROUTES = [
    Route("/v1/approvals", list_approvals),
    Route("/v1/approvals/{id}", show),
    Route("/v1/approvals/{id}/approve", approve, methods=["POST"]),
    Route("/v1/approvals/{id}/deny", deny, methods=["POST"]),
]
