"""/v1/approvals: the one queue of what waits for the owner; approve or deny, with a reason.

``POST /v1/approvals`` (TEMPORARY-ADMIN) puts an item in the queue the way other areas will
(an agent proposal, a flagged project, a council motion, a tool version).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from starlette.requests import Request
from starlette.routing import Route

from ...commands import approvals as cmd
from ...domain.approvals import KINDS, STATUSES
from ...domain.names import approval_number
from ...projections import work as rm
from ...projections.runner import equal_to
from ..errors import ApiError, Body, read_body
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, Api


def approval_rows(hub: Hub, status: str | None, kind: str | None, agent: str | None, limit: int) -> list[dict]:
    a = rm.approvals
    where = equal_to(a, status=status, kind=kind, agent=agent)
    order = a.c.position if status == "pending" else sa.desc(a.c.position)
    return [_shown(r) for r in hub.read_models.rows(a, *where, order_by=order, limit=limit)]


def _shown(row: dict) -> dict:
    row = dict(row)
    row["id"] = row.pop("number")
    return row


def approval_row(hub: Hub, number: str) -> dict:
    number = approval_number(number)
    found = hub.read_models.rows(rm.approvals, rm.approvals.c.number == number)
    if not found:
        raise ApiError("no_approval", f"no approval {number!r}")
    return _shown(found[0])


def pending_count(hub: Hub) -> dict:
    a = rm.approvals
    with hub.read_models.engine.connect() as conn:
        counts = dict(conn.execute(sa.select(a.c.kind, sa.func.count()).where(a.c.status == "pending")
                                   .group_by(a.c.kind)).all())
    return {"pending": sum(counts.values()), "by_kind": counts}


class DecideBody(Body):
    reason: str | None = None


class RequestBody(Body):
    kind: str
    title: str
    agent: str | int | None = None
    ref: str | None = None
    detail: dict[str, Any] = {}


def routes(api: Api) -> list:
    hub = api.hub
    cmds = hub.commands

    async def list_approvals(request: Request) -> dict:
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
        return {"approvals": await api.query(approval_rows, hub, status, kind, q.get("agent") or None, limit)}

    async def show(request: Request) -> dict:
        return await api.query(approval_row, hub, request.path_params["id"])

    async def decide(request: Request, approve: bool) -> dict:
        body = await read_body(request, DecideBody)
        ctx = api.context(request, body.reason)
        number = request.path_params["id"]
        box: list = []

        def go():
            box.append(cmd.decide(cmds, ctx, number, approve))
            return box[0].positions

        await api.command(go)
        out = box[0].as_dict()
        out["approval"] = await api.query(approval_row, hub, number)
        return out

    async def approve(request: Request) -> dict:
        return await decide(request, True)

    async def deny(request: Request) -> dict:
        return await decide(request, False)

    async def request_one(request: Request) -> dict:
        body = await read_body(request, RequestBody)
        ctx = api.context(request)
        box: dict = {}

        def go():
            box.update(cmd.request(cmds, ctx, body.kind, body.title, agent=None if body.agent is None else str(body.agent),
                                   ref=body.ref, detail=body.detail))
            return box["positions"]

        await api.command(go)
        return await api.query(approval_row, hub, box["id"])

    e = api.endpoint
    return [
        Route("/v1/approvals", e(list_approvals)),
        Route("/v1/approvals", e(request_one), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/approvals/{id}", e(show)),
        Route("/v1/approvals/{id}/approve", e(approve), methods=["POST"]),
        Route("/v1/approvals/{id}/deny", e(deny), methods=["POST"]),
    ]
