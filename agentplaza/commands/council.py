"""The council's and the courts' commands (``domain.council``, ``domain.courts`` hold the rules).

- A motion proposed by a seat holder (``propose``), voted by the seats (``vote``): the fourth seat's
  vote counts it, in the same commit; a motion the count gives to the owner asks for an approval of
  kind ``motion``; the owner's decision (``decide``, or the approval decided in the queue) is final.
  A carried budget move moves its credits through the treasury in the commit that carried it; if the
  plaza budget or the wallet cannot take it, the motion stays carried and the move records why not.
- The courts: an incident opened, a case filed, defended and ruled; a ruling of ``violation`` records
  the confirmed violation on the accused's conduct, and the sanctions schedule follows, in the
  ruling's commit (``conduct.violate_in``).

``role`` is the acting agent's role as the hub's records give it (None for the owner).
"""

from __future__ import annotations

from ..domain import treasury as t
from ..domain.approvals import Approval
from ..domain.base import Context, Refusal
from ..domain.conduct import conduct_id, steps_for
from ..domain.council import Motion, motion_id
from ..domain.courts import Case, Incident, case_id, incident_id
from ..domain.names import (
    CASE_PREFIX,
    INCIDENT_PREFIX,
    MOTION_PREFIX,
    case_number,
    check_cid,
    incident_number,
    motion_number,
    short_number,
)
from ..domain.plaza import require_running
from ..domain.sanction_schedule import heaviest
from ..domain.tasks import Sequence
from . import approvals, conduct, treasury
from .unit import Commands, Done, Unit


def motion_ref(number: str) -> str:
    return f"motion:{number}"


def minted_of(events) -> int:
    """All the credits ever minted, from the budget's own events (every Mint posts to the budget)."""
    return sum(e.amount for e in events if isinstance(e, t.Account.Posted) and e.entry_kind == t.MINT and e.amount > 0)


def _issue(unit: Unit, ctx: Context, prefix: str) -> str:
    seq = unit.get(Sequence.id_for(prefix)) or Sequence.open(ctx, prefix)
    unit.add(seq)
    return seq.issue(ctx)


def load_in(unit: Unit, number: str) -> Motion:
    found = unit.get(motion_id(motion_number(number)))
    if not isinstance(found, Motion):
        raise Refusal("no_motion", f"no motion {number!r}")
    return found


def load(cmds: Commands, number: str) -> Motion:
    return load_in(Unit(cmds.store), number)


def view(m: Motion) -> dict:
    return {"id": m.number, "kind": m.kind, "title": m.title, "text": m.text, "seat": m.seat, "amount": m.amount,
            "to": m.to, "minted": m.minted, "decider": m.decider, "status": m.status, "result": m.result,
            "votes": {s: dict(v) for s, v in m.votes.items()}, "owner": m.owner, "moved": m.moved}


def propose(cmds: Commands, ctx: Context, kind: str, title: str, text: str = "", *, role: str | None,
            amount: int | None = None, to: str | None = None) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        require_running(unit.get)
        budget = treasury.account(unit, t.BUDGET)
        minted = 0 if budget is None else budget.minted
        if minted is None:  # a budget loaded from a snapshot older than its count: fold its own events
            minted = minted_of(unit.store.events_of(t.account_id(t.BUDGET)))
        payee = check_cid(to, "the recipient") if to is not None else None
        if payee is not None and treasury.account(unit, t.wallet_key(payee)) is None:
            raise Refusal("no_wallet", f"no wallet for agent {payee}")
        m = Motion.propose(ctx, _issue(unit, ctx, MOTION_PREFIX), kind, title, text, role=role, amount=amount,
                           to=payee, minted=minted)
        unit.add(m)
        return view(m)

    return cmds.run(decide)


def _carried(unit: Unit, ctx: Context, m: Motion) -> None:
    """A carried budget move's credits, from the plaza budget to the named wallet."""
    if m.kind != "budget_move" or m.status != "carried" or m.moved is not None:
        return
    books = treasury.books(unit, ctx, [t.BUDGET, t.wallet_key(m.to)])
    try:
        entry = t.budget_move(books, treasury.plaza_in(unit), m.to, m.amount, f"budget move {m.number}: {m.title}",
                              motion_ref(m.number))
    except Refusal as r:
        m.budget_moved(ctx, None, r.message)
        return
    m.budget_moved(ctx, entry.id.hex, f"{m.amount:,} credits moved to agent {m.to}")
    treasury.booked(unit, books)


def vote(cmds: Commands, ctx: Context, number: str, vote_: str, why: str, *, role: str | None) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        require_running(unit.get)
        m = load_in(unit, number)
        status = m.vote(ctx, vote_, why, role=role)
        extra = {}
        if status == "waiting":
            extra["approval"] = approvals.Maker(unit, ctx).make(
                "motion", f"Motion {m.number} ({m.kind}): {m.title}: the count gives it to you",
                ref=motion_ref(m.number), detail={"motion": m.number, "kind": m.kind, "result": m.result,
                                                  "amount": m.amount, "to": m.to})
        _carried(unit, ctx, m)
        unit.add(m)
        return {**view(m), **extra}

    return cmds.run(decide)


def decide(cmds: Commands, ctx: Context, number: str, approve: bool, note: str | None = None) -> Done[dict]:
    """The owner decides a motion the count gave them; the approval in the queue is decided with it."""
    def decide_(unit: Unit) -> dict:
        m = load_in(unit, number)
        m.owner_decides(ctx, approve, note)
        found = approvals.by_ref_in(unit, motion_ref(m.number))
        if found is not None and found.status == "pending":
            (found.approve if approve else found.deny)(ctx)
            unit.add(found)
        _carried(unit, ctx, m)
        unit.add(m)
        return view(m)

    return cmds.run(decide_)


def decided_in(unit: Unit, ctx: Context, a: Approval, approve: bool) -> None:
    """An approval of kind ``motion`` decided in the queue: the owner's decision on the motion."""
    number = a.detail.get("motion")
    m = unit.get(motion_id(number)) if isinstance(number, str) and short_number(MOTION_PREFIX, number) else None
    if not isinstance(m, Motion) or m.status != "waiting" or m.owner is not None:
        return
    m.owner_decides(ctx, approve, ctx.reason)
    _carried(unit, ctx, m)
    unit.add(m)


# -- the courts ------------------------------------------------------------------------------------------


def incident_view(i: Incident) -> dict:
    return {"id": i.number, "title": i.title, "text": i.text, "agent": i.agent}


def case_view(c: Case) -> dict:
    return {"id": c.number, "accused": c.accused, "law": c.law, "severity": c.severity, "charge": c.charge,
            "incident": c.incident, "prosecutor": c.prosecutor, "defences": list(c.defences), "ruling": c.ruling}


def open_incident(cmds: Commands, ctx: Context, title: str, text: str, agent: str | None = None, *,
                  role: str | None) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        concerned = check_cid(agent) if agent is not None else None
        i = Incident.open(ctx, _issue(unit, ctx, INCIDENT_PREFIX), title, text, concerned, role=role)
        unit.add(i)
        return incident_view(i)

    return cmds.run(decide)


def _case_in(unit: Unit, number: str) -> Case:
    found = unit.get(case_id(case_number(number)))
    if not isinstance(found, Case):
        raise Refusal("no_case", f"no case {number!r}")
    return found


def file_case(cmds: Commands, ctx: Context, accused: str, law: str, severity: str, charge: str,
              incident: str | None = None, *, role: str | None) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        who = check_cid(accused, "the accused")
        if incident is not None and not isinstance(unit.get(incident_id(incident_number(incident))), Incident):
            raise Refusal("no_incident", f"no incident {incident!r}")
        number = incident_number(incident) if incident is not None else None
        c = Case.file(ctx, _issue(unit, ctx, CASE_PREFIX), who, law, severity, charge, number, role=role)
        unit.add(c)
        return case_view(c)

    return cmds.run(decide)


def defend(cmds: Commands, ctx: Context, number: str, text: str, *, role: str | None) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        c = _case_in(unit, number)
        c.defend(ctx, text, role=role)
        unit.add(c)
        return case_view(c)

    return cmds.run(decide)


def rule(cmds: Commands, ctx: Context, number: str, verdict: str, text: str, *, role: str | None) -> Done[dict]:
    """The judge's ruling; a violation is recorded on the accused's conduct with its sanctions, same commit."""
    def decide(unit: Unit) -> dict:
        c = _case_in(unit, number)
        c.rule(ctx, verdict, text, role=role)
        unit.add(c)
        out = case_view(c)
        if verdict == "violation":
            out["sanction"] = conduct.violate_in(unit, cmds, ctx, c.accused, c.law, c.severity, "plaza_case_rule",
                                                 f"case:{c.number}")
        return out

    return cmds.run(decide)


def ruling_sanction(cmds: Commands, number: str, at) -> str | None:
    """The heaviest step of the schedule a ruling of ``violation`` on case ``number`` would bring at
    ``at`` (the law's severity and the accused's offence count of that law in 30 days): what S-041
    reads as the ruling's ``sanction``. None once the case is ruled."""
    c = _case_in(Unit(cmds.store), number)
    if c.ruling is not None:
        return None
    record = cmds.store.get(conduct_id(c.accused))
    steps = record.next_steps(c.law, c.severity, at) if record is not None else steps_for(c.severity, 1)
    return heaviest(steps)


def case_of(cmds: Commands, number: str) -> dict:
    return case_view(_case_in(Unit(cmds.store), number))

