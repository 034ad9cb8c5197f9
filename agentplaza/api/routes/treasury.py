"""/v1/treasury: balances, wallets, the journal, flows, explain; mint, fine; held payments.

Read routes read the treasury's read models only.  Some write routes stand in
for areas not built yet and are marked TEMPORARY-ADMIN: opening a wallet (the
agents area will do it on spawn), funding, charging and settling a task's
escrow (the tasks area and the model gateway will), and an agent's payment
(the payment tool).  They sit behind the owner-only wall like every route.
The held-payment routes (list, approve, deny) are what the approvals area
takes over.
"""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa
from starlette.requests import Request
from starlette.routing import Route

from ...commands import payments as payment_commands
from ...commands import treasury as cmd
from ...commands.unit import Done
from ...domain import treasury as t
from ...projections import treasury as rm
from ...when import parse_when
from ..errors import ApiError, Body, read_body
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, Api

# -- queries (read models only) -------------------------------------------------------


def _totals(hub: Hub) -> dict[str, int]:
    return {r["name"]: r["value"] for r in hub.read_models.rows(rm.totals)}


def dollars(credits: int) -> str:
    """1 credit = $0.001, shown exactly (no floats)."""
    sign = "-" if credits < 0 else ""
    c = abs(credits)
    return f"{sign}${c // 1000:,}.{c % 1000:03d}"


def balances(hub: Hub) -> dict:
    tot = _totals(hub)
    budget = tot.get("budget", 0)
    wallets, escrows = tot.get("wallets", 0), tot.get("escrows", 0)
    return {
        "budget": budget, "budget_usd": dollars(budget),
        "treasury": tot.get("treasury", 0),
        "wallets": wallets, "escrows": escrows, "in_circulation": wallets + escrows,
        "model_costs": tot.get("model_costs", 0),
        "minted": -tot.get("mint", 0),
    }


def balance_of(hub: Hub, account: str) -> int | None:
    """One account's balance: one row, whatever the size of the journal."""
    found = hub.read_models.rows(rm.accounts, rm.accounts.c.account == account)
    return found[0]["balance"] if found else None


SORTS = {"name", "role", "balance", "earned", "spent", "cid"}


def wallets(hub: Hub, sort: str = "balance", descending: bool = True) -> list[dict]:
    rows = hub.read_models.rows(rm.accounts, rm.accounts.c.kind == "wallet")
    total = sum(r["balance"] for r in rows)
    out = [{
        "cid": r["cid"], "name": r["name"], "role": r["role"], "balance": r["balance"],
        "earned": r["earned"], "spent": r["spent"],
        # the share of all wallets' credits, in percent with one decimal, as text (no floats)
        "share": f"{(r['balance'] * 1000 // total) / 10 if total else 0:.1f}%",
    } for r in rows]
    out.sort(key=lambda w: (w[sort] is None, w[sort]), reverse=descending)
    return out


def journal_rows(hub: Hub, *, kind: str | None = None, wallet: str | None = None, task: str | None = None,
                 before: int | None = None, limit: int = 50) -> list[dict]:
    j = rm.journal
    where = []
    if kind:
        where.append(j.c.kind == kind)
    if task:
        where.append(j.c.task == task)
    if before is not None:
        where.append(j.c.position < before)
    if wallet:
        ea = rm.entry_accounts
        where.append(j.c.position.in_(sa.select(ea.c.position).where(ea.c.account == t.wallet_key(wallet))))
    return hub.read_models.rows(j, *where, order_by=sa.desc(j.c.position), limit=limit)


def explain(hub: Hub, account: str, before: int | None, limit: int) -> dict:
    a = account if t.valid_account(account) else t.wallet_key(account) if account.isdigit() else account
    found = hub.read_models.rows(rm.accounts, rm.accounts.c.account == a)
    if not found:
        raise ApiError("no_account", f"no account {account!r}; try budget, treasury, mint, model-costs, "
                       "wallet:CID, escrow:TASK or a CID")
    p, j = rm.postings, rm.journal
    where = [p.c.account == a] + ([p.c.position < before] if before is not None else [])
    q = (sa.select(p.c.position, p.c.kind, p.c.amount, p.c.balance_after, p.c.at, j.c.memo, j.c.task, j.c.id)
         .join(j, j.c.position == p.c.position).where(*where).order_by(sa.desc(p.c.position)).limit(limit))
    with hub.read_models.engine.connect() as conn:
        lines = [dict(r._mapping) for r in conn.execute(q)]
    row = found[0]
    return {"account": a, "balance": row["balance"], "postings_count": row["postings"],
            "earned": row["earned"], "spent": row["spent"], "postings": lines}


def _hour_rows(hub: Hub, start: str | None, end: str | None) -> list[dict]:
    h = rm.hours
    where = []
    if start:
        where.append(h.c.hour >= start[:13])
    if end:
        where.append(h.c.hour <= end[:13])
    return hub.read_models.rows(h, *where, order_by=h.c.hour)


FLOW_LABELS = {"minted": "Minted", "escrowed": "Escrowed", "paid": "Paid", "refunded": "Refunded",
               "fined": "Fined", "spent": "Spent"}


def flows(hub: Hub, start: str | None, end: str | None) -> dict:
    """The Treasury screen's totals over a range (whole UTC hours)."""
    rows = _hour_rows(hub, start, end)
    out: dict[str, Any] = {name: sum(r[name] for r in rows) for name in rm.FLOWS.values()}
    if end is None:
        closing = balances(hub)
        circulation = closing["in_circulation"]
    else:
        upto = hub.read_models.rows(rm.hours, rm.hours.c.hour <= end[:13], order_by=sa.desc(rm.hours.c.hour), limit=1)
        circulation = (upto[0]["wallets"] + upto[0]["escrows"]) if upto else 0
    out["in_circulation"] = circulation
    return {"from": start, "to": end, "flows": out}


def series(hub: Hub, by: str, start: str | None, end: str | None) -> list[dict]:
    """Balances and flows by hour or by day (a day's balances are its last hour's)."""
    rows = _hour_rows(hub, start, end)
    if by == "hour":
        return [{"at": r["hour"] + ":00Z", **{k: v for k, v in r.items() if k != "hour"}} for r in rows]
    days: dict[str, dict] = {}
    for r in rows:
        day = r["hour"][:10]
        d = days.setdefault(day, {"at": day, **{n: 0 for n in rm.FLOWS.values()}})
        for n in rm.FLOWS.values():
            d[n] += r[n]
        d.update({n: r[n] for n in rm.CLOSING})
    return list(days.values())


def payments(hub: Hub, status: str | None, limit: int) -> list[dict]:
    p = rm.payments
    where = [p.c.status == status] if status else []
    return hub.read_models.rows(p, *where, order_by=sa.desc(p.c.held_at), limit=limit)


def treasury_overview(hub: Hub) -> dict:
    """The overview's treasury line: the budget, what circulates, payments waiting."""
    b = balances(hub)
    pending = len(hub.read_models.rows(rm.payments, rm.payments.c.status == "pending"))
    return {"budget": b["budget"], "budget_usd": b["budget_usd"], "in_circulation": b["in_circulation"],
            "pending_payments": pending}


# -- bodies ------------------------------------------------------------------------------


class MintBody(Body):
    amount: int
    memo: str | None = None


class FineBody(Body):
    cid: str | int
    amount: int
    memo: str
    sanction: bool = False


class WalletBody(Body):
    cid: str | int
    name: str
    role: str = ""


class EscrowBody(Body):
    task: str
    amount: int | None = None
    parent: str | None = None
    through_tools: bool = False
    memo: str | None = None


class SettleBody(Body):
    passed: bool
    worker: str | int | None = None
    metered_cost: int | None = None


class RefundBody(Body):
    outcome: Literal["failed", "withdrawn"] = "withdrawn"


class ChargeBody(Body):
    cid: str | int
    task: str | None = None
    route: Literal["own_loop", "gateway"] = "own_loop"
    input_tokens: int = 0
    output_tokens: int = 0
    price_in: int | None = None
    price_out: int | None = None
    reported_cost: int | None = None
    ref: str | None = None


class PayBody(Body):
    payer: str | int
    payee: str | int
    amount: int
    memo: str
    task: str | None = None
    approve_over: int = t.DEFAULT_APPROVE_OVER
    kind: Literal["payment", "transfer", "bonus"] = "payment"


class DecideBody(Body):
    reason: str | None = None


def routes(api: Api) -> list:
    hub = api.hub
    cmds = hub.commands

    def when(request: Request, name: str) -> str | None:
        raw = request.query_params.get(name)
        if not raw:
            return None
        try:
            return parse_when(raw)
        except ValueError as e:
            raise ApiError("invalid_request", f"{name}: {e}") from None

    async def get_balances(request: Request) -> dict:
        return await api.query(balances, hub)

    async def get_wallets(request: Request) -> dict:
        sort = request.query_params.get("sort") or "balance"
        if sort not in SORTS:
            raise ApiError("invalid_request", f"sort is one of {', '.join(sorted(SORTS))}")
        asc = request.query_params.get("order") == "asc"
        return {"wallets": await api.query(wallets, hub, sort, not asc)}

    async def get_journal(request: Request) -> dict:
        q = request.query_params
        kind = q.get("kind") or None
        if kind is not None and kind not in t.KINDS:
            raise ApiError("invalid_request", f"kind is one of {', '.join(t.KINDS)}")
        limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
        before = api.int_param(request, "before", None, 1)
        rows = await api.query(lambda: journal_rows(hub, kind=kind, wallet=q.get("wallet") or None,
                                                    task=q.get("task") or None, before=before, limit=limit))
        return {"entries": rows, "older": rows[-1]["position"] if len(rows) == limit else None}

    async def get_flows(request: Request) -> dict:
        return await api.query(flows, hub, when(request, "from"), when(request, "to"))

    async def get_series(request: Request) -> dict:
        by = request.query_params.get("by") or "hour"
        if by not in ("hour", "day"):
            raise ApiError("invalid_request", "by is hour or day")
        return {"by": by, "series": await api.query(series, hub, by, when(request, "from"), when(request, "to"))}

    async def get_explain(request: Request) -> dict:
        limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
        before = api.int_param(request, "before", None, 1)
        return await api.query(explain, hub, request.path_params["account"], before, limit)

    async def run(request: Request, fn) -> dict:
        box: list = []

        def go() -> list[int]:
            done = fn()  # a command of commands.payments gives Done(outcome, positions)
            box.append(done.value if isinstance(done, Done) else done)
            return done.positions

        await api.command(go)
        return box[0].as_dict()

    async def post_mint(request: Request) -> dict:
        body = await read_body(request, MintBody)
        ctx = api.context(request, body.memo)
        out = await run(request, lambda: cmd.mint(cmds, ctx, body.amount, body.memo))
        return {**out, "balances": await api.query(balances, hub)}

    async def post_fine(request: Request) -> dict:
        body = await read_body(request, FineBody)
        ctx = api.context(request, body.memo)
        return await run(request, lambda: cmd.fine(cmds, ctx, str(body.cid), body.amount, body.memo, sanction=body.sanction))

    async def post_wallet(request: Request) -> dict:
        body = await read_body(request, WalletBody)
        ctx = api.context(request)
        return await run(request, lambda: cmd.open_wallet(cmds, ctx, str(body.cid), body.name, body.role))

    async def post_escrow(request: Request) -> dict:
        body = await read_body(request, EscrowBody)
        ctx = api.context(request, body.memo)
        return await run(request, lambda: cmd.fund_task_escrow(
            cmds, ctx, body.task, body.amount, parent=body.parent, through_tools=body.through_tools, memo=body.memo))

    async def post_settle(request: Request) -> dict:
        body = await read_body(request, SettleBody)
        ctx = api.context(request)
        task = request.path_params["task"]
        worker = str(body.worker) if body.worker is not None else None
        return await run(request, lambda: cmd.settle_task(cmds, ctx, task, body.passed, worker=worker,
                                                          metered_cost=body.metered_cost))

    async def post_refund(request: Request) -> dict:
        body = await read_body(request, RefundBody)
        ctx = api.context(request)
        return await run(request, lambda: cmd.refund_task(cmds, ctx, request.path_params["task"], body.outcome))

    async def post_charge(request: Request) -> dict:
        body = await read_body(request, ChargeBody)
        cid = str(body.cid)
        ctx = cmds.context(f"agent:{cid}", None, request.headers.get("x-correlation-id"))
        price = (body.price_in or 0, body.price_out or 0) if body.price_in is not None or body.price_out is not None else None
        if body.route == "own_loop":
            return await run(request, lambda: cmd.charge_own_loop(cmds, ctx, cid, body.task, body.input_tokens,
                                                                  body.output_tokens, price, body.ref))
        return await run(request, lambda: cmd.charge_gateway(
            cmds, ctx, cid, body.task, reported_cost=body.reported_cost, input_tokens=body.input_tokens,
            output_tokens=body.output_tokens, price=price, ref=body.ref))

    async def post_gateway_check(request: Request) -> dict:
        body = await read_body(request, ChargeBody)
        return await api.query(cmd.check_gateway_call, cmds, str(body.cid), body.task)

    async def post_payment(request: Request) -> dict:
        body = await read_body(request, PayBody)
        payer, payee = str(body.payer), str(body.payee)
        ctx = cmds.context(f"agent:{payer}", None, request.headers.get("x-correlation-id"))
        if body.kind == "transfer":
            return await run(request, lambda: cmd.transfer(cmds, ctx, payer, payee, body.amount, body.memo, body.task))
        if body.kind == "bonus":
            if body.task is None:
                raise ApiError("invalid_request", "a bonus names the hired task")
            return await run(request, lambda: cmd.bonus(cmds, ctx, payer, payee, body.amount, body.task, body.memo))
        return await run(request, lambda: payment_commands.pay(cmds, ctx, payer, payee, body.amount, body.memo, body.task,
                                                  body.approve_over))

    async def get_payments(request: Request) -> dict:
        status = request.query_params.get("status", "pending")
        if status not in ("pending", "approved", "denied", "all"):
            raise ApiError("invalid_request", "status is pending, approved, denied or all")
        limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
        return {"payments": await api.query(payments, hub, None if status == "all" else status, limit)}

    async def approve(request: Request) -> dict:
        body = await read_body(request, DecideBody)
        ctx = api.context(request, body.reason)
        return await run(request, lambda: payment_commands.approve_payment(cmds, ctx, request.path_params["id"]))

    async def deny(request: Request) -> dict:
        body = await read_body(request, DecideBody)
        ctx = api.context(request, body.reason)
        return await run(request, lambda: payment_commands.deny_payment(cmds, ctx, request.path_params["id"]))

    e = api.endpoint
    return [
        Route("/v1/treasury", e(get_balances)),
        Route("/v1/treasury/balances", e(get_balances)),
        Route("/v1/treasury/wallets", e(get_wallets)),
        Route("/v1/treasury/wallets", e(post_wallet), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/journal", e(get_journal)),
        Route("/v1/treasury/flows", e(get_flows)),
        Route("/v1/treasury/series", e(get_series)),
        Route("/v1/treasury/accounts/{account}/explain", e(get_explain)),
        Route("/v1/treasury/mint", e(post_mint), methods=["POST"]),
        Route("/v1/treasury/fines", e(post_fine), methods=["POST"]),
        Route("/v1/treasury/escrows", e(post_escrow), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/escrows/{task}/settle", e(post_settle), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/escrows/{task}/refund", e(post_refund), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/charges", e(post_charge), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/charges/check", e(post_gateway_check), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/payments", e(get_payments)),
        Route("/v1/treasury/payments", e(post_payment), methods=["POST"]),  # TEMPORARY-ADMIN
        Route("/v1/treasury/payments/{id}/approve", e(approve), methods=["POST"]),
        Route("/v1/treasury/payments/{id}/deny", e(deny), methods=["POST"]),
    ]
