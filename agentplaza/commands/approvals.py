"""The approvals queue's commands: request an approval, decide one (approve or deny, with a reason).

Every kind goes through ``decide``; what a decision does besides recording itself depends on
the kind, and happens in the same commit:

- payment: approving makes the held transfer (the treasury's ``approve_payment``: the daily
  limit and the wallet still apply, STOP ALL holds it); denying cancels it (``deny_payment``).
- sanction: approving acknowledges the step; denying lifts the suspension it belongs to.
- call: approving lets the agent run that exact call once (``conduct.check_call`` uses it).
- project: approving is the owner's approval of the project, denying its veto (``projects.decided_in``).
- motion: the owner's decision on a motion the count gave them (``council.decided_in``).
- tool_version: approving offers the version to every agent, denying rejects it (``toollib.decided_in``).
- agent: the decision is recorded; its area acts on the event.

Other areas make approvals with ``request`` (or ``Maker`` to add them to their own unit).
Approving an agent proposal spawns its agents in the same commit as the decision.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..domain import treasury as t
from ..domain.agents import check_count
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
from . import agents, treasury
from .unit import Commands, Done, Unit


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
    return load_in(Unit(cmds.store), number)


def load_in(unit: Unit, number: str) -> Approval:
    found = unit.get(approval_id(approval_number(number)))
    if not isinstance(found, Approval):
        raise Refusal("no_approval", f"no approval {number!r}")
    return found


def by_ref(cmds: Commands, ref: str) -> Approval | None:
    return by_ref_in(Unit(cmds.store), ref)


def by_ref_in(unit: Unit, ref: str) -> Approval | None:
    pointer = unit.get(ref_id(ref))
    if pointer is None:
        return None
    return unit.get(approval_id(pointer.number))


class Maker:
    """Makes approvals inside another command's unit: numbers them (a1, a2 ...) and points refs."""

    def __init__(self, unit: Unit, ctx: Context):
        self.unit, self.ctx = unit, ctx

    def make(self, kind: str, title: str, *, agent: str | None = None, ref: str | None = None,
             detail: dict[str, Any] | None = None) -> str:
        if kind not in KINDS:
            raise Refusal("invalid_kind", f"an approval's kind is one of {', '.join(KINDS)}")
        seq = self.unit.get(Sequence.id_for(APPROVAL_PREFIX)) or Sequence.open(self.ctx, APPROVAL_PREFIX)
        number = seq.issue(self.ctx)
        self.unit.add(seq, Approval.request(self.ctx, number, kind, title, agent=agent, ref=ref, detail=detail))
        if ref is not None:
            self.unit.add(ApprovalRef.point(self.ctx, self.unit.get(ref_id(ref)), ref, number))
        return number

    def payment(self, p: t.Payment) -> str:
        return self.make("payment", f"Payment of {p.amount:,} credits from {p.payer} to {p.payee}: {p.memo}",
                         agent=p.payer, ref=payment_ref(p.id.hex),
                         detail={"payment": p.id.hex, "payer": p.payer, "payee": p.payee, "amount": p.amount,
                                 "memo": p.memo, "task": p.task, "approve_over": p.approve_over})


def request(cmds: Commands, ctx: Context, kind: str, title: str, *, agent: str | None = None,
            ref: str | None = None, detail: dict[str, Any] | None = None) -> Done[str]:
    """Put one item in the queue (other areas: an agent proposal, a flagged project, a motion, a tool
    version); its number."""
    return cmds.run(lambda unit: Maker(unit, ctx).make(kind, title, agent=agent, ref=ref, detail=detail))


def decide_in(unit: Unit, cmds: Commands, ctx: Context, number: str, approve: bool,
              new_agents: list | None = None) -> treasury.Outcome:
    """The decision on one approval, with what it does (see the module's doc), in ``unit``.
    ``new_agents``: the ids of the agents an approved agent proposal starts."""
    a = load_in(unit, number)
    books = t.Books(ctx, {})
    payment: t.Payment | None = None
    spawned: list[int] = []
    if a.kind == "agent" and approve and a.status == "pending":
        a.check_actable()  # spawned first: a refusal (no free CID) leaves the proposal pending
        d = a.detail
        spawned = agents.spawn_in(unit, ctx, new_agents or [], d["role"], d.get("model"))
    if a.kind == "payment":
        if approve:
            a.check_actable()
        # a malformed detail (from before details were checked) names no payment: denying only records
        payment = treasury.payment_of(cmds, a.detail["payment"]) if detail_problem(a.kind, a.detail) is None else None
        if approve:
            books = treasury.books(unit, ctx, [t.wallet_key(payment.payer), t.wallet_key(payment.payee)]
                                        if payment else [], [payment.task] if payment else [])
            t.approve_payment(books, treasury.plaza_in(unit), payment)
        elif payment is not None and payment.status == "pending":
            t.deny_payment(books, payment)
    if a.kind in ("project", "motion") and a.status == "pending":
        from . import council, projects  # their areas act on the decision, in its commit

        (projects if a.kind == "project" else council).decided_in(unit, ctx, a, approve)
    if a.kind == "tool_version" and a.status == "pending":
        from . import toollib  # the tool library acts on the decision, in its commit

        toollib.decided_in(unit, ctx, a, approve)
    (a.approve if approve else a.deny)(ctx)
    unit.add(a)
    if a.kind == "sanction" and not approve and a.detail.get("suspension") and a.agent:
        conduct = unit.get(conduct_id(a.agent))
        s = conduct.suspensions.get(a.detail["suspension"]) if conduct is not None else None
        if s is not None and not s["lifted"] and s["until"] > ctx.at.isoformat():
            conduct.lift(ctx, s["id"], how="denied")
            unit.add(conduct)
    out = treasury.booked(unit, books, payment, approval=view(a))
    if spawned:
        out.detail["spawned"] = spawned
    return out


def decide(cmds: Commands, ctx: Context, number: str, approve: bool) -> Done[treasury.Outcome]:
    """Approve or deny one approval; the decision is an event and is final, and is one commit with
    what it does (an approved agent proposal's agents, a held payment's transfer)."""
    pre = load(cmds, number)
    new_agents = []
    if approve and pre.kind == "agent" and pre.status == "pending":
        pre.check_actable()
        new_agents = agents.new_ids(cmds, check_count(pre.detail.get("count", 1)))
    return cmds.run(lambda unit: decide_in(unit, cmds, ctx, number, approve, new_agents))
