"""Conduct: permission modes, the check every tool call passes, violations and their sanctions.

``check_in`` is what the agent harness composes into the unit of work of each tool call's check, so
the whole check (and the harness's transcript entry of it) is one commit; ``check_call`` is the same
check as a command of its own. In order:

1. Nothing runs while the plaza is held (STOP ALL): refused, and no call is made.
2. A tool under a suspension in force for this agent (probation, lockout) is refused.
3. The agent's permission mode goes into the call (autonomous, ask, read-only).
4. If the owner approved this exact call (same agent, same tool, same input: the digest) and it
   has not run yet, it is used now (``Approval.Used``, committed with the check, before the call
   runs, with optimistic concurrency on the approval, so it runs once) and the call is decided as
   approved.
5. The laws decide; the decision is recorded (``ToolCall.CallDecided``).
6. A call the laws hold (ask mode, an ask law) becomes an approval of kind call, with the exact
   tool and input; asking again for the same call while it waits gives the same approval.
7. A violation is recorded and sanctioned by the schedule (``record_violation``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import jhrl

from ..domain import treasury as t
from ..domain.approvals import approval_id, ref_id
from ..domain.base import Context, Refusal
from ..domain.conduct import ASK_ONLY, DEFAULT_MODE, Conduct, conduct_id, step_text
from ..domain.conduct import mode_of as conduct_mode
from ..domain.laws import SECRET_ARG, severity_of
from ..domain.names import check_cid
from ..domain.plaza import require_running
from . import approvals, laws, treasury
from .unit import Commands, Done, Unit

#: Shown in place of an argument whose name says it may hold a secret.
HIDDEN = "[hidden]"


def load(cmds: Commands, cid: str) -> Conduct | None:
    return cmds.store.get(conduct_id(cid))


def _conduct(unit: Unit, ctx: Context, cid: str) -> Conduct:
    cid = check_cid(cid)
    return unit.get(conduct_id(cid)) or Conduct.open(ctx, cid)


def mode_of(cmds: Commands, cid: str) -> str:
    return conduct_mode(cmds.store.get, cid)


def set_mode(cmds: Commands, ctx: Context, cid: str, mode: str) -> Done[None]:
    """The agent's permission mode: autonomous (default), ask, read-only. Conduct alone holds it: the
    agent's check and what it is offered at hello read it here (``mode_of``)."""

    def decide(unit: Unit) -> None:
        c = _conduct(unit, ctx, cid)
        c.set_mode(ctx, mode)
        unit.add(c)

    return cmds.run(decide)


def lift(cmds: Commands, ctx: Context, cid: str, suspension: str) -> Done[None]:
    """Lift a suspension in force (from the agent's conduct). Its approval, if any, stays for the owner."""

    def decide(unit: Unit) -> None:
        c = unit.get(conduct_id(str(cid)))
        if c is None:
            raise Refusal("no_suspension", f"agent {cid} has no suspension {suspension}")
        c.lift(ctx, suspension)
        unit.add(c)

    return cmds.run(decide)


def view(c: Conduct | None, cid: str, at) -> dict:
    if c is None:
        return {"cid": cid, "mode": DEFAULT_MODE, "suspensions": [], "offences_30d": 0}
    return {"cid": c.cid, "mode": c.mode, "suspensions": c.in_force(at), "offences_30d": len(c.offences),
            "warnings": c.warnings, "fined": c.fined}


# -- violations and the schedule ---------------------------------------------------------------


def record_violation(cmds: Commands, ctx: Context, cid: str, law: str, severity: str | None, tool: str,
                     call_id: str | None = None) -> dict:
    """Record one offence and carry out the schedule's steps for it, in one commit (``violate_in``)."""
    return cmds.run(lambda unit: violate_in(unit, cmds, ctx, cid, law, severity, tool, call_id)).value


def violate_in(unit: Unit, cmds: Commands, ctx: Context, cid: str, law: str, severity: str | None, tool: str,
               call_id: str | None = None, maker: approvals.Maker | None = None) -> dict:
    """One offence and the schedule's steps for it, added to ``unit`` (approvals made with ``maker``,
    shared with the rest of the unit, so their numbers do not collide).

    Warning: recorded on the profile, with the note for the agent's memory.  Fine: through the
    treasury's sanction fine (its caps; what the wallet cannot pay is not collected; an agent
    with no wallet yet is recorded as not collected).  Probation: the tool refused for the stated
    hours.  Lockout: the same, and an approval for the owner.  Demotion, retirement, owner
    review: an approval only.
    """
    c = _conduct(unit, ctx, cid)
    count, steps = c.offend(ctx, law, severity or "medium", tool, call_id)
    books = treasury.books(unit, ctx, [t.wallet_key(c.cid)])
    maker = maker or approvals.Maker(unit, ctx)
    done: list[dict] = []
    for step in steps:
        kind = step[0]
        if kind == "warning":
            c.warn(ctx, law, tool)
            done.append({"step": "warning"})
        elif kind == "fine":
            amount = step[1]
            memo = f"sanction: law {law}, offence {count} in 30 days"
            try:
                r = t.sanction_fine(books, c.cid, amount, memo, ref=call_id)
                levied, collected, uncollected, entry, note = r.levied, r.collected, r.uncollected, r.entry.id.hex, memo
            except Refusal as refusal:
                if refusal.code == "no_wallet":
                    levied = min(amount, t.MAX_SANCTION_FINE)
                    collected, uncollected, entry = 0, levied, None
                else:  # the seven-day cap has no room left
                    levied = collected = uncollected = 0
                    entry = None
                note = refusal.message
            c.record(Conduct.Fined, ctx, law=law, amount=amount, levied=levied, collected=collected,
                     uncollected=uncollected, entry_id=entry, note=note)
            done.append({"step": "fine", "amount": amount, "levied": levied, "collected": collected,
                         "uncollected": uncollected})
        elif kind in ("probation", "lockout"):
            hours = step[1]
            sid = f"s{len(c.suspensions) + 1}"
            number = None
            if kind == "lockout":
                number = maker.make(
                    "sanction", f"Lockout of agent {c.cid} from {tool} for {hours} hours (law {law}, offence {count})",
                    agent=c.cid, ref=approvals.suspension_ref(c.cid, sid),
                    detail={"step": "lockout", "suspension": sid, "tool": tool, "hours": hours, "law": law,
                            "count": count})
            c.suspend(ctx, kind, tool, hours, law, number)
            done.append({"step": kind, "suspension": sid, "tool": tool, "hours": hours, "approval": number})
        elif kind in ASK_ONLY:
            label = {"demotion": "Demotion", "retirement": "Retirement", "owner_review": "Owner review"}[kind]
            number = maker.make("sanction", f"{label} of agent {c.cid} (law {law}, offence {count})",
                                agent=c.cid, detail={"step": kind, "law": law, "count": count, "tool": tool})
            c.record(Conduct.OwnerAsked, ctx, step=kind, law=law, approval=number)
            done.append({"step": kind, "approval": number})
    unit.add(c, *books.changed())
    return {"agent": cid, "law": law, "count": count, "steps": [step_text(s) for s in steps], "done": done,
            "entries": [treasury.entry_view(e) for e in books.entries]}


# -- the check before every tool call ---------------------------------------------------------------


@dataclass
class CallCheck:
    decision: jhrl.Decision
    digest: str
    call_id: str
    mode: str
    approved: str | None = None  # the approval this call used (it ran once, now)
    approval: str | None = None  # the approval the call waits for
    sanction: dict | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = self.decision
        return {"decision": d.effect, "why": d.reason, "matched": list(d.matched), "forbidding": d.forbidding,
                "violation": d.violation, "digest": self.digest, "call_id": self.call_id, "mode": self.mode,
                "approved_by": self.approved, "approval": self.approval, "sanction": self.sanction}


def shown_input(args: Any) -> dict:
    """The call's input as the owner sees it in the queue: every argument, secrets hidden."""
    plain = json.loads(json.dumps(dict(args), default=repr))
    return {k: (HIDDEN if SECRET_ARG.search(k) else v) for k, v in plain.items()}


def _use_approval(unit: Unit, ctx: Context, agent: str, digest: str) -> str | None:
    """Use the owner's approval of this exact call, if there is one not yet used. At most once: the use
    is saved with the check, before the call runs, with optimistic concurrency on the approval (a
    second run of the same call that loses the race is decided anew, finding it used)."""
    pointer = unit.get(ref_id(approvals.call_ref(agent, digest)))
    if pointer is None:
        return None
    a = unit.get(approval_id(pointer.number))
    if a is None or a.status != "approved" or a.used:
        return None
    a.use(ctx, agent, digest)
    unit.add(a)
    return a.number


def _ask(unit: Unit, maker: approvals.Maker, ctx: Context, agent: str, call: jhrl.Call, digest: str,
         decided: laws.Decided) -> str:
    """The approval the held call waits for: the pending one for this exact call, or a new one."""
    ref = approvals.call_ref(agent, digest)
    pointer = unit.get(ref_id(ref))
    existing = unit.get(approval_id(pointer.number)) if pointer is not None else None
    if existing is not None and existing.status == "pending":
        return existing.number
    number = maker.make(
        "call", f"{agent} asks to run {call.action}", agent=agent, ref=ref,
        detail={"tool": call.action, "input": shown_input(call.args), "digest": digest, "risk": call.risk,
                "role": call.role, "tier": call.tier, "mode": call.mode, "why": decided.decision.reason,
                "call_id": decided.call_id})
    return number


def check_call(cmds: Commands, call: jhrl.Call, agent: str, ctx: Context | None = None) -> CallCheck:
    """Decide one tool call of ``agent`` (its role and tier in ``call``, as the hub gave them), as one
    commit. A refusal before the laws (the plaza held, a suspension in force) is raised."""
    ctx = ctx or cmds.context(f"agent:{agent}")
    return cmds.run(lambda unit: check_in(unit, cmds, call, agent, ctx)).value


def refused_before_laws(unit: Unit, call: jhrl.Call, agent: str, ctx: Context) -> None:
    """Raise the refusal a call meets before the laws see it: the plaza held, a suspension in force."""
    require_running(unit.get)
    c = unit.get(conduct_id(agent))
    s = c.suspension_of(call.action, ctx.at) if c is not None else None
    if s is not None:
        raise Refusal("tool_suspended", f"the tool {call.action} is refused for agent {agent} until {s['until']} "
                      f"({s['kind']} {s['id']} for law {s['law']})")


def check_in(unit: Unit, cmds: Commands, call: jhrl.Call, agent: str, ctx: Context) -> CallCheck:
    """The whole check of one tool call, added to ``unit``: the approval used, the decision, the ask or
    the violation and its sanctions. Raises a refusal before the laws before it adds anything."""
    refused_before_laws(unit, call, agent, ctx)
    c = unit.get(conduct_id(agent))
    mode = c.mode if c is not None else DEFAULT_MODE
    call = dataclasses.replace(call, mode=mode, approved=False)
    digest = call.digest()
    used = _use_approval(unit, ctx, agent, digest)
    if used is not None:
        call = dataclasses.replace(call, approved=True)
    decided = laws.decide_in(unit, cmds, call, agent, ctx)
    out = CallCheck(decided.decision, digest, decided.call_id, mode, approved=used)
    maker = approvals.Maker(unit, ctx)
    if decided.decision.effect == "ask":
        out.approval = _ask(unit, maker, ctx, agent, call, digest, decided)
    if decided.decision.violation:
        d = decided.decision
        law = d.forbidding or d.recorded[0]
        severity = severity_of(d, laws.current(cmds).book.lawset)
        out.sanction = violate_in(unit, cmds, ctx, agent, law, severity, call.action, decided.call_id, maker)
    return out
