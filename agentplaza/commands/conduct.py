"""Conduct: permission modes, the check every tool call passes, violations and their sanctions.

``check_call`` is what the agent harness calls before each tool call runs (it wraps
``laws.decide_call``):

1. Nothing runs while the plaza is held (STOP ALL): refused, and no call is made.
2. A tool under a suspension in force for this agent (probation, lockout) is refused.
3. The agent's permission mode goes into the call (autonomous, ask, read-only).
4. If the owner approved this exact call (same agent, same tool, same input: the digest) and it
   has not run yet, it is used now (``Approval.Used``, committed before the call runs, so it
   runs once) and the call is decided as approved.
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
from ..domain.approvals import ref_id
from ..domain.base import Context, Refusal
from ..domain.conduct import ASK_ONLY, DEFAULT_MODE, Conduct, conduct_id, step_text
from ..domain.laws import SECRET_ARG, severity_of
from . import approvals, laws, treasury
from .unit import Commands, Unit

#: Shown in place of an argument whose name says it may hold a secret.
HIDDEN = "[hidden]"


def load(cmds: Commands, cid: str) -> Conduct | None:
    return cmds.store.get(conduct_id(cid))


def _conduct(cmds: Commands, ctx: Context, cid: str) -> Conduct:
    cid = str(cid).strip()
    laws_check(cid)
    return load(cmds, cid) or Conduct.open(ctx, cid)


def laws_check(cid: str) -> None:
    from ..domain.laws import check_agent

    check_agent(cid)


def mode_of(cmds: Commands, cid: str) -> str:
    c = load(cmds, cid)
    return c.mode if c is not None else DEFAULT_MODE


def set_mode(cmds: Commands, ctx: Context, cid: str, mode: str) -> list[int]:
    """The agent's permission mode: autonomous (default), ask, read-only."""

    def decide():
        c = _conduct(cmds, ctx, cid)
        c.set_mode(ctx, mode)
        return [c]

    return cmds.run_aggregates(decide)


def lift(cmds: Commands, ctx: Context, cid: str, suspension: str) -> list[int]:
    """Lift a suspension in force (from the agent's conduct). Its approval, if any, stays for the owner."""

    def decide():
        c = load(cmds, cid)
        if c is None:
            raise Refusal("no_suspension", f"agent {cid} has no suspension {suspension}")
        c.lift(ctx, suspension)
        return [c]

    return cmds.run_aggregates(decide)


def view(c: Conduct | None, cid: str, at) -> dict:
    if c is None:
        return {"cid": cid, "mode": DEFAULT_MODE, "suspensions": [], "offences_30d": 0}
    return {"cid": c.cid, "mode": c.mode, "suspensions": c.in_force(at), "offences_30d": len(c.offences),
            "warnings": c.warnings, "fined": c.fined}


# -- violations and the schedule ---------------------------------------------------------------


def record_violation(cmds: Commands, ctx: Context, cid: str, law: str, severity: str | None, tool: str,
                     call_id: str | None = None) -> dict:
    """Record one offence and carry out the schedule's steps for it, in one commit.

    Warning: recorded on the profile, with the note for the agent's memory.  Fine: through the
    treasury's sanction fine (its caps; what the wallet cannot pay is not collected; an agent
    with no wallet yet is recorded as not collected).  Probation: the tool refused for the stated
    hours.  Lockout: the same, and an approval for the owner.  Demotion, retirement, owner
    review: an approval only.
    """
    box: dict = {}

    def decide():
        c = _conduct(cmds, ctx, cid)
        count, steps = c.offend(ctx, law, severity or "medium", tool, call_id)
        books = treasury.load_books(cmds, ctx, [t.wallet_key(c.cid)])
        maker = approvals.Maker(Unit(cmds.store), ctx)
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
        box.update(count=count, steps=[step_text(s) for s in steps], done=done)
        for agg in [c, *maker.unit.changed]:
            books.add(agg)
        return books, None

    out = treasury.run_books(cmds, decide)
    return {"agent": cid, "law": law, "count": box["count"], "steps": box["steps"], "done": box["done"],
            "entries": out.entries}


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


def _use_approval(cmds: Commands, ctx: Context, agent: str, digest: str) -> str | None:
    """Use the owner's approval of this exact call, if there is one not yet used. At most once:
    the use is committed before the call runs, with optimistic concurrency on the approval."""
    pointer = cmds.store.get(ref_id(approvals.call_ref(agent, digest)))
    if pointer is None:
        return None
    a = approvals.load(cmds, pointer.number)
    if a.status != "approved" or a.used:
        return None
    used: list[str] = []

    def decide():
        fresh = approvals.load(cmds, pointer.number)
        fresh.use(ctx, agent, digest)
        used.append(fresh.number)
        return [fresh]

    try:
        cmds.run_aggregates(decide)
    except Refusal:  # another run of the same call used it first
        return None
    return used[-1]


def _ask(cmds: Commands, ctx: Context, agent: str, call: jhrl.Call, digest: str, decided: laws.Decided) -> str:
    """The approval the held call waits for: the pending one for this exact call, or a new one."""
    box: list[str] = []

    def decide():
        ref = approvals.call_ref(agent, digest)
        existing = approvals.by_ref(cmds, ref)
        if existing is not None and existing.status == "pending":
            box[:] = [existing.number]
            return []
        maker = approvals.Maker(Unit(cmds.store), ctx)
        box[:] = [maker.make(
            "call", f"{agent} asks to run {call.action}", agent=agent, ref=ref,
            detail={"tool": call.action, "input": shown_input(call.args), "digest": digest, "risk": call.risk,
                    "role": call.role, "tier": call.tier, "mode": call.mode, "why": decided.decision.reason,
                    "call_id": decided.call_id})]
        return maker.unit.changed

    cmds.run_aggregates(decide)
    return box[0]


def check_call(cmds: Commands, call: jhrl.Call, agent: str, ctx: Context | None = None) -> CallCheck:
    """Decide one tool call of ``agent`` (its role and tier in ``call``, as the hub gave them)."""
    ctx = ctx or cmds.context(f"agent:{agent}")
    plaza = treasury.plaza(cmds)
    if plaza is not None:
        plaza.require_running()
    c = load(cmds, agent)
    mode = c.mode if c is not None else DEFAULT_MODE
    if c is not None:
        s = c.suspension_of(call.action, ctx.at)
        if s is not None:
            raise Refusal("tool_suspended", f"the tool {call.action} is refused for agent {agent} until {s['until']} "
                          f"({s['kind']} {s['id']} for law {s['law']})")
    call = dataclasses.replace(call, mode=mode, approved=False)
    digest = call.digest()
    used = _use_approval(cmds, ctx, agent, digest)
    if used is not None:
        call = dataclasses.replace(call, approved=True)
    decided = laws.decide_call(cmds, call, agent, ctx).value
    out = CallCheck(decided.decision, digest, decided.call_id, mode, approved=used)
    if decided.decision.effect == "ask":
        out.approval = _ask(cmds, ctx, agent, call, digest, decided)
    if decided.decision.violation:
        d = decided.decision
        law = d.forbidding or d.recorded[0]
        severity = severity_of(d, laws.current(cmds).book.lawset)
        out.sanction = record_violation(cmds, ctx, agent, law, severity, call.action, decided.call_id)
    return out
