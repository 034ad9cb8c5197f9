"""An agent's conduct: its permission mode, its offences, and the sanctions in force.

``Conduct`` (one per agent CID) records the agent's permission mode (autonomous, ask,
read-only) -- the one home of the mode: the tools offered at hello, every call's check and the
roster all read it here (``mode_of``) -- every offence (a law it broke, with the offence count that set the sanction), and
each sanction step: warnings, fines (the treasury moves the credits), suspensions (probation
and lockout: the offending tool refused until a stated time) and the steps that only ask the
owner (demotion, retirement, owner review).  A suspension is lifted by the owner from the
agent's conduct, or by denying its approval.

The schedule itself is data, in ``sanction_schedule.py``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from jhrl.call import MODES as _JHRL_MODES

from . import sanction_schedule as sched
from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import check_cid

MODES = _JHRL_MODES  # autonomous, ask, read-only
DEFAULT_MODE = "autonomous"
OFFENCE_WINDOW = dt.timedelta(days=sched.OFFENCE_WINDOW_DAYS)
STEP_KINDS = ("warning", "fine", "probation", "lockout", "demotion", "retirement", "owner_review")
#: Steps that only ask the owner: an approval, nothing carried out.
ASK_ONLY = ("demotion", "retirement", "owner_review")


def conduct_id(cid: str | int) -> uuid.UUID:
    return fixed_id(f"conduct:{cid}")


def mode_of(get: Callable[[uuid.UUID], Any], cid: str | int) -> str:
    """The agent's permission mode: its conduct's, autonomous while it has none. ``get`` is the store's
    or a unit's ``get`` (what the hello, a tool call's check and the agent page all ask)."""
    c = get(conduct_id(str(cid)))
    return c.mode if c is not None else DEFAULT_MODE


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise Refusal("invalid_mode", f"a permission mode is one of {', '.join(MODES)}")
    return mode  # type: ignore[return-value]


def steps_for(severity: str | None, count: int, culpability: str = sched.CULPABILITY) -> list[tuple]:
    """The schedule's cell: severity x offence count (third and later use the third column)."""
    sev = severity if severity in sched.SCHEDULE else "medium"
    column = min(max(count, 1), sched.COLUMNS) - 1 + sched.CULPABILITY_SHIFT[culpability]
    column = min(max(column, 0), sched.COLUMNS - 1)
    return [tuple(step) for step in sched.SCHEDULE[sev][column]]


def step_text(step: tuple) -> str:
    kind = step[0]
    if kind == "fine":
        return f"fine {step[1]}"
    if kind in ("probation", "lockout"):
        return f"{kind} {step[1]}h"
    return kind


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat()


class Conduct(PlazaAggregate):
    family = "conduct"

    class Created(PlazaAggregate.Created):
        cid: str

    class ModeSet(PlazaAggregate.Event):
        mode: str

        def apply(self, c: Conduct) -> None:
            c.mode = self.mode

    class Offended(PlazaAggregate.Event):
        law: str
        severity: str
        tool: str
        call_id: str | None
        count: int  # this law by this agent in the last 30 days, this one included
        steps: list[str]

        def apply(self, c: Conduct) -> None:
            now = _iso(self.timestamp)
            cutoff = _iso(self.timestamp - OFFENCE_WINDOW)
            c.offences = [o for o in c.offences if o[1] > cutoff] + [(self.law, now)]

    class Warned(PlazaAggregate.Event):
        law: str
        note: str  # what the agent's memory is told

        def apply(self, c: Conduct) -> None:
            c.warnings += 1

    class Fined(PlazaAggregate.Event):
        law: str
        amount: int  # what the schedule said
        levied: int
        collected: int
        uncollected: int
        entry_id: str | None
        note: str

        def apply(self, c: Conduct) -> None:
            c.fined += self.levied

    class Suspended(PlazaAggregate.Event):
        suspension: str
        kind: str  # probation or lockout
        tool: str
        until: str
        law: str
        approval: str | None

        def apply(self, c: Conduct) -> None:
            c.suspensions[self.suspension] = {
                "id": self.suspension, "kind": self.kind, "tool": self.tool, "until": self.until,
                "law": self.law, "approval": self.approval, "lifted": False,
            }

    class Lifted(PlazaAggregate.Event):
        suspension: str
        how: str  # lifted (from the conduct) or denied (its approval was denied)

        def apply(self, c: Conduct) -> None:
            c.suspensions[self.suspension] = dict(c.suspensions[self.suspension], lifted=True)

    class OwnerAsked(PlazaAggregate.Event):
        step: str  # demotion, retirement, owner_review
        law: str
        approval: str

        def apply(self, c: Conduct) -> None:
            c.asked += 1

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.mode = DEFAULT_MODE
        self.offences: list[tuple[str, str]] = []  # (law, at) within the last 30 days
        self.suspensions: dict[str, dict] = {}
        self.warnings = self.fined = self.asked = 0

    @classmethod
    def open(cls, ctx: Context, cid: str) -> Conduct:
        cid = check_cid(cid)
        return cls.start(ctx, id=conduct_id(cid), cid=cid)

    @classmethod
    def for_new_agent(cls, ctx: Context, existing: Conduct | None, cid: str | int,
                      mode: str = DEFAULT_MODE) -> Conduct:
        """The conduct of an agent just spawned (``mode`` autonomous) or forked (its source's mode) at
        ``cid``: the CID's own conduct if it has one (a deleted agent's CID keeps its record), else a new
        one; in ``mode`` either way. Add it to the same unit as the agent."""
        c = existing if existing is not None else cls.open(ctx, str(cid))
        c.ensure_mode(ctx, mode)
        return c

    # -- reading ----------------------------------------------------------------------------

    def offence_count(self, law: str, at: dt.datetime) -> int:
        cutoff = _iso(at - OFFENCE_WINDOW)
        return sum(1 for law_id, when in self.offences if law_id == law and when > cutoff)

    def next_steps(self, law: str, severity: str | None, at: dt.datetime) -> list[tuple]:
        """The schedule's steps the next offence of ``law`` at ``at`` would bring (nothing recorded)."""
        return steps_for(severity, self.offence_count(law, at) + 1)

    def in_force(self, at: dt.datetime) -> list[dict]:
        now = _iso(at)
        return [s for s in self.suspensions.values() if not s["lifted"] and s["until"] > now]

    def suspension_of(self, tool: str, at: dt.datetime) -> dict | None:
        found = [s for s in self.in_force(at) if s["tool"] == tool]
        return max(found, key=lambda s: s["until"]) if found else None

    # -- changes ------------------------------------------------------------------------------

    def set_mode(self, ctx: Context, mode: str) -> None:
        """The owner sets the mode (``POST /v1/conduct/{cid}/mode``): an unchanged mode is refused."""
        if check_mode(mode) == self.mode:
            raise Refusal("mode_unchanged", f"agent {self.cid} is already {mode}")
        self.record(self.ModeSet, ctx, mode=mode)

    def ensure_mode(self, ctx: Context, mode: str) -> None:
        """The agent is in ``mode`` afterwards, recorded only if it changes (``PATCH /v1/agents/{cid}``, a
        spawn, a fork): an unchanged mode is no refusal here."""
        if check_mode(mode) != self.mode:
            self.record(self.ModeSet, ctx, mode=mode)

    def offend(self, ctx: Context, law: str, severity: str, tool: str, call_id: str | None) -> tuple[int, list[tuple]]:
        """Record an offence; returns its count and the schedule's steps for it."""
        if severity not in sched.SEVERITIES:
            severity = "medium"
        count = self.offence_count(law, ctx.at) + 1
        steps = steps_for(severity, count)
        self.record(self.Offended, ctx, law=law, severity=severity, tool=tool, call_id=call_id, count=count,
                    steps=[step_text(s) for s in steps])
        return count, steps

    def warn(self, ctx: Context, law: str, tool: str) -> None:
        self.record(self.Warned, ctx, law=law,
                    note=f"Warning: you broke the law {law} with the tool {tool}. Repeating it brings heavier sanctions.")

    def suspend(self, ctx: Context, kind: str, tool: str, hours: int, law: str, approval: str | None) -> str:
        assert kind in ("probation", "lockout")
        sid = f"s{len(self.suspensions) + 1}"
        until = _iso(ctx.at + dt.timedelta(hours=hours))
        self.record(self.Suspended, ctx, suspension=sid, kind=kind, tool=tool, until=until, law=law, approval=approval)
        return sid

    def lift(self, ctx: Context, suspension: str, how: str = "lifted") -> None:
        s = self.suspensions.get(suspension)
        if s is None:
            raise Refusal("no_suspension", f"agent {self.cid} has no suspension {suspension}")
        if s["lifted"]:
            raise Refusal("already_lifted", f"suspension {suspension} of agent {self.cid} was already lifted")
        if s["until"] <= _iso(ctx.at):
            raise Refusal("suspension_over", f"suspension {suspension} of agent {self.cid} ended at {s['until']}")
        self.record(self.Lifted, ctx, suspension=suspension, how=how)
