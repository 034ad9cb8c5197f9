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

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..domain.base import Refusal
from ..domain.plaza import PLAZA_ID
from ..domain.tasks import REVIEWER_ROLE
from . import tasks
from .commands import Commands

#: How often the hub runs a pass when nothing asks for one sooner.
INTERVAL_S = 1.0
#: The most assignments one pass makes (the rest wait for the next pass).
MAX_PER_PASS = 1_000


@dataclass(frozen=True)
class OpenTask:
    number: str
    role: str | None
    position: int


@dataclass(frozen=True)
class ReviewTask:
    number: str
    worker: str
    position: int


@dataclass(frozen=True)
class Idle:
    cid: str
    role: str
    last: int  # position of the last work it took (0: never)


@dataclass
class Queue:
    open: list[OpenTask] = field(default_factory=list)
    review: list[ReviewTask] = field(default_factory=list)
    idle: list[Idle] = field(default_factory=list)


@dataclass
class Pass:
    held: bool = False
    assigned: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


def _order(workers: Iterable[Idle]) -> list[Idle]:
    return sorted(workers, key=lambda w: (w.last, w.cid))


def plan(queue: Queue, limit: int = MAX_PER_PASS) -> list[tuple[str, str, str]]:
    """The assignments to make: ("task" | "review", task number, CID), fairly. Pure; O(T + W)."""
    workers = [w for w in _order(queue.idle) if w.role != REVIEWER_ROLE]
    reviewers = deque(w for w in _order(queue.idle) if w.role == REVIEWER_ROLE)
    by_role: dict[str, deque[Idle]] = {}
    for w in workers:
        by_role.setdefault(w.role, deque()).append(w)
    anyone = deque(workers)
    taken: set[str] = set()
    out: list[tuple[str, str, str]] = []

    def first(line: deque[Idle]) -> Idle | None:
        while line and line[0].cid in taken:
            line.popleft()
        return line.popleft() if line else None

    for task in sorted(queue.open, key=lambda x: x.position):
        if len(out) >= limit or len(taken) >= len(workers):
            break
        w = first(by_role.get(task.role, deque()) if task.role is not None else anyone)
        if w is not None:
            taken.add(w.cid)
            out.append(("task", task.number, w.cid))
    for task in sorted(queue.review, key=lambda x: x.position):
        if len(out) >= limit or not reviewers:
            break
        skipped: list[Idle] = []
        w = None
        while reviewers:
            cand = reviewers.popleft()
            if cand.cid == task.worker:  # never its own work
                skipped.append(cand)
                continue
            w = cand
            break
        reviewers.extendleft(reversed(skipped))
        if w is not None:
            out.append(("review", task.number, w.cid))
    return out


def held(cmds: Commands) -> bool:
    plaza = cmds.store.get(PLAZA_ID)
    return bool(plaza is not None and plaza.held)


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
