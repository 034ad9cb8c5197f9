"""The scheduler: gives each open task to an idle worker of its role, and each task reported
done to an idle reviewer.

Fair: tasks are taken oldest first (by when they were created, or reported done for reviews);
workers are taken least recently served first (the position of the last work they took, a
worker that never took any first, then by CID), so every idle worker is served before any
worker is served twice, and no worker is starved.  A task that names a role goes only to a
worker of that role; a task without one goes to any worker except reviewers.  An open call
that has bids waits for the owner's award and is skipped.

It stops entirely while the plaza is held: a pass first checks the hold and does nothing at
all, and every assignment checks it again in its own commit.  Its queue is the tasks' state
itself (read from the read models), so after RESUME it carries on exactly where it was.

A pass plans on the read models, which may be a moment behind; each assignment is a command
that re-checks the task and the worker on fresh state, and one that lost a race is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.base import Refusal
from ..domain.plaza import held as plaza_held
from ..domain.scheduling import MAX_PER_PASS, Idle, OpenTask, Queue, ReviewTask, plan  # noqa: F401 - the queue's types
from . import tasks
from .unit import Commands

#: How often the hub runs a pass when nothing asks for one sooner.
INTERVAL_S = 1.0


@dataclass
class Pass:
    held: bool = False
    assigned: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


def held(cmds: Commands) -> bool:
    return plaza_held(cmds.store.get)


def run_pass(cmds: Commands, queue: Queue, limit: int = MAX_PER_PASS) -> Pass:
    """One pass: nothing at all while the plaza is held; else plan and make each assignment."""
    out = Pass()
    if held(cmds):
        out.held = True
        return out
    for what, number, cid in plan(queue, limit):
        ctx = cmds.context("hub", "scheduler")
        try:
            if what == "task":
                tasks.assign(cmds, ctx, number, cid, how="scheduler")
            else:
                tasks.assign_review(cmds, ctx, number, cid, how="scheduler")
        except Refusal as r:
            out.skipped.append({"work": what, "task": number, "worker": cid, "code": r.code})
            if r.code == "plaza_held":  # STOP ALL came in the middle of the pass: stop here
                out.held = True
                break
            continue
        out.assigned.append({"work": what, "task": number, "worker": cid})
    return out
