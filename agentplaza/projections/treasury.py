"""The treasury's read models: balances, wallets, the journal, flows and balances over time.

Everything is folded from ``Entry.Posted`` (the postings) and the accounts'
``Created`` events (names, roles, tasks): a balance is the sum of its
postings, kept up to date one posting at a time, so reading it is one row
whatever the size of the journal.  Every handler is O(1) in the journal.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..domain import treasury as t
from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, metadata

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

postings = append_only(sa.Table(
    "rm_treasury_postings",
    metadata,
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False),
    sa.Column("balance_after", sa.BigInteger, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
))

# Which entries concern an account: its postings, and every agent an entry names.
entry_accounts = append_only(sa.Table(
    "rm_treasury_entry_accounts",
    metadata,
    sa.Column("account", sa.String(100), primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
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

hours = sa.Table(
    "rm_treasury_hours",
    metadata,
    sa.Column("hour", sa.String(13), primary_key=True),  # "2026-01-01T09", UTC
    *[sa.Column(name, sa.BigInteger, nullable=False) for name in FLOWS.values()],
    *[sa.Column(name, sa.BigInteger, nullable=False) for name in CLOSING],
)

payments = sa.Table(
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
)


def _total_name(account: str) -> str | None:
    kind = t.kind_of(account)
    return {"budget": "budget", "treasury": "treasury", "mint": "mint", "model-costs": "model_costs",
            "wallet": "wallets", "escrow": "escrows"}.get(kind)


class TreasuryProjection(Projection):
    name = "treasury"
    version = 1
    tables = (accounts, journal, postings, entry_accounts, totals, hours, payments)

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
        concerned = set(moves) | {t.wallet_key(a) for a in d["agents"]}
        if d["task"]:
            concerned.add(t.escrow_key(d["task"]))
        for key in concerned:
            rows.put("rm_treasury_entry_accounts", {"account": key, "position": e.position})
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
