"""/v1/treasury: balances, wallets, the journal, flows, explain; mint, fine; held payments.

Read routes read the treasury's read models only (the queries sit beside their tables in
``projections/treasury.py``).  Money moves through the areas that own the reason for it: a
task's escrow through the tasks area, a model call's charge through the gateway, a payment
through the payment tool; the owner mints, fines and decides held payments here.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import payments as payment_commands
from ...commands import treasury as cmd
from ...domain import treasury as t
from ...projections import treasury as rm
from ...when import parse_when
from ...wire import PAYMENT_STATUSES
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, api_of, endpoint


class MintBody(Body):
    amount: int
    memo: str | None = None


class FineBody(Body):
    cid: str | int
    amount: int
    memo: str
    sanction: bool = False


class DecideBody(Body):
    reason: str | None = None


def when(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        return parse_when(raw)
    except ValueError as e:
        raise ApiError("invalid_request", f"{name}: {e}") from None


@endpoint
async def get_balances(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.balances, api.hub.read_models)


@endpoint
async def get_wallets(request: Request) -> dict:
    api = api_of(request)
    sort = request.query_params.get("sort") or "balance"
    if sort not in rm.SORTS:
        raise ApiError("invalid_request", f"sort is one of {', '.join(sorted(rm.SORTS))}")
    asc = request.query_params.get("order") == "asc"
    return {"wallets": await api.query(rm.wallets, api.hub.read_models, sort, not asc)}


@endpoint
async def get_journal(request: Request) -> dict:
    api = api_of(request)
    q = request.query_params
    kind = q.get("kind") or None
    if kind is not None and kind not in t.KINDS:
        raise ApiError("invalid_request", f"kind is one of {', '.join(t.KINDS)}")
    limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
    before = api.int_param(request, "before", None, 1)
    wallet, task = q.get("wallet") or None, q.get("task") or None
    rows = await api.query(lambda: rm.journal_rows(api.hub.read_models, kind=kind, wallet=wallet, task=task,
                                                   before=before, limit=limit))
    return {"entries": rows, "older": rows[-1]["position"] if len(rows) == limit else None}


@endpoint
async def get_flows(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.flows, api.hub.read_models, when(request, "from"), when(request, "to"))


@endpoint
async def get_series(request: Request) -> dict:
    api = api_of(request)
    by = request.query_params.get("by") or "hour"
    if by not in ("hour", "day"):
        raise ApiError("invalid_request", "by is hour or day")
    rows = await api.query(rm.series, api.hub.read_models, by, when(request, "from"), when(request, "to"))
    return {"by": by, "series": rows}


@endpoint
async def get_explain(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    before = api.int_param(request, "before", None, 1)
    return await api.query(rm.explain, api.hub.read_models, request.path_params["account"], before, limit)


@endpoint
async def post_mint(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, MintBody)
    ctx = api.context(request, body.memo)
    out = await api.command(lambda: cmd.mint(api.hub.commands, ctx, body.amount, body.memo))
    return {**out.as_dict(), "balances": await api.query(rm.balances, api.hub.read_models)}


@endpoint
async def post_fine(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, FineBody)
    ctx = api.context(request, body.memo)
    out = await api.command(lambda: cmd.fine(api.hub.commands, ctx, str(body.cid), body.amount, body.memo,
                                             sanction=body.sanction))
    return out.as_dict()


@endpoint
async def get_payments(request: Request) -> dict:
    api = api_of(request)
    status = request.query_params.get("status", "pending")
    if status not in PAYMENT_STATUSES:
        raise ApiError("invalid_request", "status is pending, approved, denied or all")
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    rows = await api.query(rm.payments_list, api.hub.read_models, None if status == "all" else status, limit)
    return {"payments": rows}


@endpoint
async def approve(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, DecideBody)
    ctx = api.context(request, body.reason)
    out = await api.command(lambda: payment_commands.approve_payment(api.hub.commands, ctx, request.path_params["id"]))
    return out.as_dict()


@endpoint
async def deny(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, DecideBody)
    ctx = api.context(request, body.reason)
    out = await api.command(lambda: payment_commands.deny_payment(api.hub.commands, ctx, request.path_params["id"]))
    return out.as_dict()


ROUTES = [
    Route("/v1/treasury", get_balances),
    Route("/v1/treasury/balances", get_balances),
    Route("/v1/treasury/wallets", get_wallets),
    Route("/v1/treasury/journal", get_journal),
    Route("/v1/treasury/flows", get_flows),
    Route("/v1/treasury/series", get_series),
    Route("/v1/treasury/accounts/{account}/explain", get_explain),
    Route("/v1/treasury/mint", post_mint, methods=["POST"]),
    Route("/v1/treasury/fines", post_fine, methods=["POST"]),
    Route("/v1/treasury/payments", get_payments),
    Route("/v1/treasury/payments/{id}/approve", approve, methods=["POST"]),
    Route("/v1/treasury/payments/{id}/deny", deny, methods=["POST"]),
]
