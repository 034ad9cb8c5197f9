"""The treasury's read models: balances, wallets, the journal, flows and balances over time.

Everything is folded from ``Entry.Posted`` (the postings) and the accounts'
``Created`` events (names, roles, tasks): a balance is the sum of its
postings, kept up to date one posting at a time, so reading it is one row
whatever the size of the journal.  Every handler is O(1) in the journal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..domain import treasury as t
from ..domain.base import Refusal
from ..events.records import EventRecord
from ..wire import WALLET_SORTS
from .framework import Projection, Rows, append_only, evictable, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

accounts = sa.Table(
    "rm_treasury_accounts",
    metadata,
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("kind", sa.String(20), nullable=False),  # budget, treasury, mint, model-costs, wallet, escrow
    sa.Column("cid", sa.String(64)),
    sa.Column("name", sa.String(200)),
    sa.Column("role", sa.String(100)),
    sa.Column("task", sa.String(64)),
    sa.Column("status", sa.String(20)),  # an escrow: open, passed, failed, withdrawn
    sa.Column("balance", sa.BigInteger, nullable=False),
    sa.Column("earned", sa.BigInteger, nullable=False),
    sa.Column("spent", sa.BigInteger, nullable=False),
    sa.Column("postings", sa.BigInteger, nullable=False),
    sa.Column("last_position", sa.BigInteger, nullable=False),
)

journal = append_only(sa.Table(
    "rm_treasury_journal",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("id", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False, index=True),
    sa.Column("memo", sa.Text, nullable=False),
    sa.Column("task", sa.String(64), index=True),
    sa.Column("agents", sa.JSON, nullable=False),
    sa.Column("postings", sa.JSON, nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("shortfall", sa.BigInteger, nullable=False),
    sa.Column("uncollected", sa.BigInteger, nullable=False),
    sa.Column("ref", sa.String(64)),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
))

# Keyed by (account, position) alone, without SQLite's rowid: one B-tree a row, not two.
postings = append_only(sa.Table(
    "rm_treasury_postings",
    metadata,
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("balance_after", sa.BigInteger, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sqlite_with_rowid=False,
))

# The accounts an entry names without posting to them: the wallets of the agents it names, its task's escrow.
# With the postings, the entries that concern an account (the journal's wallet filter, ``concerning``).  Most
# entries name no account they do not post to: a table of every account an entry concerned (version 1) was as
# many rows as the postings, 154,530 of the rows a rebuild over a million events wrote.
entry_mentions = append_only(sa.Table(
    "rm_treasury_entry_mentions",
    metadata,
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sqlite_with_rowid=False,
))

totals = sa.Table(
    "rm_treasury_totals",
    metadata,
    sa.Column("name", sa.String(40), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

FLOWS = {
    t.MINT: "minted", t.SUBCONTRACT: "escrowed", t.PAYMENT: "paid", t.REFUND: "refunded", t.FINE: "fined",
    t.SPEND: "spent", t.MODEL_CALL: "model_calls", t.TRANSFER: "transfers", t.BONUS: "bonuses",
}
#: Closing balances kept per hour: the budget, the treasury, all wallets, all escrows.
CLOSING = ("budget", "treasury", "wallets", "escrows")

hours = evictable(sa.Table(
    "rm_treasury_hours",
    metadata,
    sa.Column("hour", sa.String(13), primary_key=True),  # "2026-01-01T09", UTC
    *[sa.Column(name, sa.BigInteger, nullable=False) for name in FLOWS.values()],
    *[sa.Column(name, sa.BigInteger, nullable=False) for name in CLOSING],
))

payments = evictable(sa.Table(
    "rm_treasury_payments",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("payer", sa.String(64), nullable=False),
    sa.Column("payee", sa.String(64), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("memo", sa.Text, nullable=False),
    sa.Column("task", sa.String(64)),
    sa.Column("status", sa.String(20), nullable=False, index=True),
    sa.Column("approve_over", sa.BigInteger, nullable=False),
    sa.Column("held_at", sa.String(40), nullable=False),
    sa.Column("decided_at", sa.String(40)),
    sa.Column("decided_by", sa.String(200)),
    sa.Column("reason", sa.Text),
    sa.Column("entry_id", sa.String(32)),
))


#: The total (``rm_treasury_totals``) each kind of account counts in.
_TOTAL_OF_KIND = {"budget": "budget", "treasury": "treasury", "mint": "mint", "model-costs": "model_costs",
                  "wallet": "wallets", "escrow": "escrows"}


def _total_name(account: str) -> str | None:
    return _TOTAL_OF_KIND.get(t.kind_of(account))


class TreasuryProjection(Projection):
    name = "treasury"
    # 2: rm_treasury_entry_mentions (the accounts an entry names, not posts to) for rm_treasury_entry_accounts (every
    # account it concerned, as many rows as the postings); postings and mentions without SQLite's rowid
    version = 2
    tables = (accounts, journal, postings, entry_mentions, totals, hours, payments)
    retired_tables = ("rm_treasury_entry_accounts",)

    # -- accounts ----------------------------------------------------------------

    @staticmethod
    def _account(rows: Rows, key: str, position: int) -> dict:
        row = rows.get("rm_treasury_accounts", key)
        if row is None:
            row = {"account": key, "kind": t.kind_of(key), "cid": None, "name": None, "role": None, "task": None,
                   "status": None, "balance": 0, "earned": 0, "spent": 0, "postings": 0, "last_position": position}
        return dict(row)

    def on_Budget_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_treasury_accounts", self._account(rows, t.BUDGET, e.position))

    def on_Wallet_Created(self, e: EventRecord, rows: Rows) -> None:
        row = self._account(rows, t.wallet_key(e.data["cid"]), e.position)
        row.update(cid=e.data["cid"], name=e.data["name"], role=e.data["role"])
        rows.put("rm_treasury_accounts", row)

    def on_Escrow_Created(self, e: EventRecord, rows: Rows) -> None:
        row = self._account(rows, t.escrow_key(e.data["task"]), e.position)
        row.update(task=e.data["task"], status="open")
        rows.put("rm_treasury_accounts", row)

    def on_Escrow_Closed(self, e: EventRecord, rows: Rows) -> None:
        row = self._account(rows, t.escrow_key(e.data["task"]), e.position)
        rows.put("rm_treasury_accounts", dict(row, status=e.data["outcome"]))

    # -- entries -------------------------------------------------------------------

    def on_Entry_Posted(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        moves: dict[str, int] = d["postings"]
        rows.put("rm_treasury_journal", {
            "position": e.position, "id": e.originator_id, "kind": d["kind"], "memo": d["memo"], "task": d["task"],
            "agents": list(d["agents"]), "postings": dict(moves), "amount": sum(v for v in moves.values() if v > 0),
            "shortfall": d["shortfall"], "uncollected": d["uncollected"], "ref": d["ref"], "at": e.at, "actor": e.actor,
        })
        named = {t.wallet_key(a) for a in d["agents"]}
        if d["task"]:
            named.add(t.escrow_key(d["task"]))
        for key in named.difference(moves):
            rows.put("rm_treasury_entry_mentions", {"account": key, "position": e.position})
        hour = e.at[:13]
        bucket = rows.get("rm_treasury_hours", hour)
        bucket = dict(bucket) if bucket else {"hour": hour, **{n: 0 for n in FLOWS.values()}, **{n: 0 for n in CLOSING}}
        flow = FLOWS[d["kind"]]
        bucket[flow] += sum(v for v in moves.values() if v > 0)
        for key, amount in moves.items():
            row = self._account(rows, key, e.position)
            row["balance"] += amount
            if amount > 0:
                row["earned"] += amount
            else:
                row["spent"] -= amount
            row["postings"] += 1
            row["last_position"] = e.position
            rows.put("rm_treasury_accounts", row)
            rows.put("rm_treasury_postings", {
                "account": key, "position": e.position, "kind": d["kind"], "amount": amount,
                "balance_after": row["balance"], "at": e.at,
            })
            name = _total_name(key)
            if name is not None:
                tot = rows.get("rm_treasury_totals", name)
                rows.put("rm_treasury_totals", {"name": name, "value": (tot["value"] if tot else 0) + amount})
        for name in CLOSING:
            tot = rows.get("rm_treasury_totals", name)
            bucket[name] = tot["value"] if tot else 0
        rows.put("rm_treasury_hours", bucket)

    # -- held payments ----------------------------------------------------------------

    def on_Payment_Held(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_treasury_payments", {
            "id": e.originator_id, "payer": d["payer"], "payee": d["payee"], "amount": d["amount"], "memo": d["memo"],
            "task": d["task"], "status": "pending", "approve_over": d["approve_over"], "held_at": e.at,
            "decided_at": None, "decided_by": None, "reason": None, "entry_id": None,
        })

    def _decide(self, e: EventRecord, rows: Rows, status: str) -> None:
        row = rows.get("rm_treasury_payments", e.originator_id)
        if row is not None:
            rows.put("rm_treasury_payments", dict(row, status=status, decided_at=e.at, decided_by=e.actor,
                                                   reason=e.reason, entry_id=e.data.get("entry_id")))

    def on_Payment_Approved(self, e: EventRecord, rows: Rows) -> None:
        self._decide(e, rows, "approved")

    def on_Payment_Denied(self, e: EventRecord, rows: Rows) -> None:
        self._decide(e, rows, "denied")


# -- the queries the treasury's screens make (read models only) -----------------------------

SORTS = set(WALLET_SORTS)


def _totals(models: ReadModels) -> dict[str, int]:
    return {r["name"]: r["value"] for r in models.rows(totals)}


def dollars(credits: int) -> str:
    """1 credit = $0.001, shown exactly (no floats)."""
    sign = "-" if credits < 0 else ""
    c = abs(credits)
    return f"{sign}${c // 1000:,}.{c % 1000:03d}"


def balances(models: ReadModels) -> dict:
    tot = _totals(models)
    budget = tot.get("budget", 0)
    wallets, escrows = tot.get("wallets", 0), tot.get("escrows", 0)
    return {
        "budget": budget, "budget_usd": dollars(budget),
        "treasury": tot.get("treasury", 0),
        "wallets": wallets, "escrows": escrows, "in_circulation": wallets + escrows,
        "model_costs": tot.get("model_costs", 0),
        "minted": -tot.get("mint", 0),
    }


def balance_of(models: ReadModels, account: str) -> int | None:
    """One account's balance: one row, whatever the size of the journal."""
    found = models.rows(accounts, accounts.c.account == account)
    return found[0]["balance"] if found else None


def wallets(models: ReadModels, sort: str = "balance", descending: bool = True) -> list[dict]:
    rows = models.rows(accounts, accounts.c.kind == "wallet")
    total = sum(r["balance"] for r in rows)
    out = [{
        "cid": r["cid"], "name": r["name"], "role": r["role"], "balance": r["balance"],
        "earned": r["earned"], "spent": r["spent"],
        # the share of all wallets' credits, in percent with one decimal, as text (no floats)
        "share": f"{(r['balance'] * 1000 // total) / 10 if total else 0:.1f}%",
    } for r in rows]
    out.sort(key=lambda w: (w[sort] is None, w[sort]), reverse=descending)
    return out


def concerning(account: str) -> sa.CompoundSelect:
    """The positions of the entries that concern ``account``: those that post to it, and those that name it."""
    p, m = postings, entry_mentions
    return sa.union_all(sa.select(p.c.position).where(p.c.account == account),
                        sa.select(m.c.position).where(m.c.account == account))


def journal_rows(models: ReadModels, *, kind: str | None = None, wallet: str | None = None, task: str | None = None,
                 before: int | None = None, limit: int = 50) -> list[dict]:
    j = journal
    where = []
    if kind:
        where.append(j.c.kind == kind)
    if task:
        where.append(j.c.task == task)
    if before is not None:
        where.append(j.c.position < before)
    if wallet:
        where.append(j.c.position.in_(concerning(t.wallet_key(wallet))))
    return models.rows(j, *where, order_by=sa.desc(j.c.position), limit=limit)


def explain(models: ReadModels, account: str, before: int | None, limit: int) -> dict:
    a = account if t.valid_account(account) else t.wallet_key(account) if account.isdigit() else account
    found = models.rows(accounts, accounts.c.account == a)
    if not found:
        raise Refusal("no_account", f"no account {account!r}; try budget, treasury, mint, model-costs, "
                      "wallet:CID, escrow:TASK or a CID")
    p, j = postings, journal
    where = [p.c.account == a] + ([p.c.position < before] if before is not None else [])
    q = (sa.select(p.c.position, p.c.kind, p.c.amount, p.c.balance_after, p.c.at, j.c.memo, j.c.task, j.c.id)
         .join(j, j.c.position == p.c.position).where(*where).order_by(sa.desc(p.c.position)).limit(limit))
    with models.engine.connect() as conn:
        lines = [dict(r._mapping) for r in conn.execute(q)]
    row = found[0]
    return {"account": a, "balance": row["balance"], "postings_count": row["postings"],
            "earned": row["earned"], "spent": row["spent"], "postings": lines}


def _hour_rows(models: ReadModels, start: str | None, end: str | None) -> list[dict]:
    h = hours
    where = []
    if start:
        where.append(h.c.hour >= start[:13])
    if end:
        where.append(h.c.hour <= end[:13])
    return models.rows(h, *where, order_by=h.c.hour)


FLOW_LABELS = {"minted": "Minted", "escrowed": "Escrowed", "paid": "Paid", "refunded": "Refunded",
               "fined": "Fined", "spent": "Spent"}


def flows(models: ReadModels, start: str | None, end: str | None) -> dict:
    """The Treasury screen's totals over a range (whole UTC hours)."""
    rows = _hour_rows(models, start, end)
    out: dict[str, Any] = {name: sum(r[name] for r in rows) for name in FLOWS.values()}
    if end is None:
        circulation = balances(models)["in_circulation"]
    else:
        upto = models.rows(hours, hours.c.hour <= end[:13], order_by=sa.desc(hours.c.hour), limit=1)
        circulation = (upto[0]["wallets"] + upto[0]["escrows"]) if upto else 0
    out["in_circulation"] = circulation
    return {"from": start, "to": end, "flows": out}


def series(models: ReadModels, by: str, start: str | None, end: str | None) -> list[dict]:
    """Balances and flows by hour or by day (a day's balances are its last hour's)."""
    rows = _hour_rows(models, start, end)
    if by == "hour":
        return [{"at": r["hour"] + ":00Z", **{k: v for k, v in r.items() if k != "hour"}} for r in rows]
    days: dict[str, dict] = {}
    for r in rows:
        day = r["hour"][:10]
        d = days.setdefault(day, {"at": day, **{n: 0 for n in FLOWS.values()}})
        for n in FLOWS.values():
            d[n] += r[n]
        d.update({n: r[n] for n in CLOSING})
    return list(days.values())


def payments_list(models: ReadModels, status: str | None, limit: int) -> list[dict]:
    p = payments
    where = [p.c.status == status] if status else []
    return models.rows(p, *where, order_by=sa.desc(p.c.held_at), limit=limit)


def treasury_overview(models: ReadModels) -> dict:
    """The overview's treasury line: the budget, what circulates, payments waiting."""
    b = balances(models)
    pending = len(models.rows(payments, payments.c.status == "pending"))
    return {"budget": b["budget"], "budget_usd": b["budget_usd"], "in_circulation": b["in_circulation"],
            "pending_payments": pending}
