"""The approvals queue's commands: request an approval, decide one (approve or deny, with a reason).

Every kind goes through ``decide``; what a decision does besides recording itself depends on
the kind, and happens in the same commit:

- payment: approving makes the held transfer (the treasury's ``approve_payment``: the daily
  limit and the wallet still apply, STOP ALL holds it); denying cancels it (``deny_payment``).
- sanction: approving acknowledges the step; denying lifts the suspension it belongs to.
- call: approving lets the agent run that exact call once (``conduct.check_call`` uses it).
- agent, project, motion, tool_version: the decision is recorded; their areas act on the event.

Other areas make approvals with ``request`` (or ``Maker`` to add them to their own commit).
"""

from __future__ import annotations

import uuid
from typing import Any

from ..domain import treasury as t
from ..domain.approvals import (
    KINDS,
    Approval,
    ApprovalRef,
    approval_id,
    detail_problem,
    ref_id,
)
from ..domain.base import Context, Refusal
from ..domain.conduct import conduct_id
from ..domain.names import APPROVAL_PREFIX, approval_number
from ..domain.tasks import Sequence
from . import treasury
from .unit import Commands


def payment_ref(payment_id: str) -> str:
    try:
        return f"payment:{uuid.UUID(hex=str(payment_id)).hex}"
    except (ValueError, TypeError):
        return f"payment:{payment_id}"


def call_ref(agent: str, digest: str) -> str:
    return f"call:{agent}:{digest}"


def suspension_ref(cid: str, suspension: str) -> str:
    return f"suspension:{cid}:{suspension}"


def view(a: Approval) -> dict:
    return {"id": a.number, "kind": a.kind, "title": a.title, "agent": a.agent, "ref": a.ref,
            "detail": dict(a.detail), "status": a.status, "used": a.used}


def load(cmds: Commands, number: str) -> Approval:
    found = cmds.store.get(approval_id(approval_number(number)))
    if not isinstance(found, Approval):
        raise Refusal("no_approval", f"no approval {number!r}")
    return found


def by_ref(cmds: Commands, ref: str) -> Approval | None:
    pointer = cmds.store.get(ref_id(ref))
    if pointer is None:
        return None
    return cmds.store.get(approval_id(pointer.number))


class Maker:
    """Makes approvals inside another command's commit: numbers them (a1, a2 ...) and points refs."""

    def __init__(self, cmds: Commands, ctx: Context):
        self.cmds, self.ctx = cmds, ctx
        self.seq: Sequence | None = None
        self.made: list[Any] = []
        self.refs: dict[str, ApprovalRef] = {}

    def make(self, kind: str, title: str, *, agent: str | None = None, ref: str | None = None,
             detail: dict[str, Any] | None = None) -> str:
        if kind not in KINDS:
            raise Refusal("invalid_kind", f"an approval's kind is one of {', '.join(KINDS)}")
        if self.seq is None:
            self.seq = self.cmds.store.get(Sequence.id_for(APPROVAL_PREFIX)) or Sequence.open(self.ctx, APPROVAL_PREFIX)
        number = self.seq.issue(self.ctx)
        self.made.append(Approval.request(self.ctx, number, kind, title, agent=agent, ref=ref, detail=detail))
        if ref is not None:
            existing = self.refs.get(ref) or self.cmds.store.get(ref_id(ref))
            self.refs[ref] = ApprovalRef.point(self.ctx, existing, ref, number)
        return number

    def payment(self, p: t.Payment) -> str:
        return self.make("payment", f"Payment of {p.amount:,} credits from {p.payer} to {p.payee}: {p.memo}",
                         agent=p.payer, ref=payment_ref(p.id.hex),
                         detail={"payment": p.id.hex, "payer": p.payer, "payee": p.payee, "amount": p.amount,
                                 "memo": p.memo, "task": p.task, "approve_over": p.approve_over})

    def aggregates(self) -> list[Any]:
        return ([self.seq] if self.seq is not None else []) + self.made + list(self.refs.values())


def request(cmds: Commands, ctx: Context, kind: str, title: str, *, agent: str | None = None,
            ref: str | None = None, detail: dict[str, Any] | None = None) -> dict:
    """Put one item in the queue (other areas: an agent proposal, a flagged project, a motion, a tool version)."""
    box: dict = {}

    def decide():
        maker = Maker(cmds, ctx)
        box["number"] = maker.make(kind, title, agent=agent, ref=ref, detail=detail)
        return maker.aggregates()

    positions = cmds.run_aggregates(decide)
    return {"id": box["number"], "positions": positions}


def decide(cmds: Commands, ctx: Context, number: str, approve: bool) -> treasury.Outcome:
    """Approve or deny one approval; the decision is an event and is final.

    Approving an agent proposal starts the agents it names first (the owner's spawn: a refusal, such
    as no free CID, leaves the proposal pending and changes nothing), then records the approval."""
    box: dict = {}
    spawned: list[int] = []
    pre = load(cmds, number)
    if approve and pre.kind == "agent" and pre.status == "pending":
        from . import agents

        pre.check_actable()
        d = pre.detail
        spawned = agents.spawn(cmds, ctx, d["role"], d.get("count", 1), d.get("model"))

    def attempt():
        a = load(cmds, number)
        books = t.Books(ctx, {})
        result: Any = None
        if a.kind == "payment":
            if approve:
                a.check_actable()
            # a malformed detail (from before details were checked) names no payment: denying only records
            p = treasury.payment_of(cmds, a.detail["payment"]) if detail_problem(a.kind, a.detail) is None else None
            if approve:
                books = treasury.load_books(cmds, ctx, [t.wallet_key(p.payer), t.wallet_key(p.payee)] if p else [],
                                            [p.task] if p else [])
                t.approve_payment(books, treasury.plaza(cmds), p)
            elif p is not None and p.status == "pending":
                t.deny_payment(books, p)
            result = p
        (a.approve if approve else a.deny)(ctx)
        books.add(a)
        if a.kind == "sanction" and not approve and a.detail.get("suspension") and a.agent:
            conduct = cmds.store.get(conduct_id(a.agent))
            s = conduct.suspensions.get(a.detail["suspension"]) if conduct is not None else None
            if s is not None and not s["lifted"] and s["until"] > ctx.at.isoformat():
                conduct.lift(ctx, s["id"], how="denied")
                books.add(conduct)
        box["approval"] = a
        return books, result

    out = treasury.run_books(cmds, attempt)
    out.detail["approval"] = view(box["approval"])
    if spawned:
        out.detail["spawned"] = spawned
    return out
