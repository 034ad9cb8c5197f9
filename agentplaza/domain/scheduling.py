"""The scheduler's plan: which idle worker gets which open task, fairly. Pure, O(T + W).

Tasks are taken oldest first (by when they were created, or reported done for reviews); workers
least recently served first (the position of the last work they took, a worker that never took any
first, then by CID), so every idle worker is served before any worker is served twice. A task that
names a role goes only to a worker of that role; one without goes to any worker except reviewers;
a review never goes to the task's own worker. ``commands.scheduler`` makes the assignments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from .tasks import REVIEWER_ROLE

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
