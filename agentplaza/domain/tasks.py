"""Tasks and the workers the scheduler gives them to.

A task is one piece of work with a goal (title, details), an acceptance and a budget held in
escrow (the treasury's ``Escrow``, funded in the same commit that creates the task).  It is
always in one of five states, and moves only as the guide allows:

    open ----(claim, assign, award)----> claimed
    open ----(withdraw)----------------> withdrawn
    claimed --(review passes)----------> done        escrow settled: the worker's margin, the rest back
    claimed --(review fails, the worker
               gives up or goes offline)> failed      escrow returned
    claimed --(withdraw)---------------> withdrawn   escrow returned

Inside ``claimed`` the work has a phase: ``working`` (the worker has it), ``review`` (the
worker reported done: what it did, the files it changed, how it checked; it waits for a
reviewer) and ``reviewing`` (a reviewer has it).  An ended task (done, failed, withdrawn)
never changes again.  A reviewer is never the task's worker.

A ``Worker`` is the scheduler's view of one agent: its role and tier, and whether it is idle,
busy or offline.  The agents runtime reports availability (``Available``, ``Busy``,
``Offline``); taking a task or a review makes it busy and ending or handing in that work
releases it, in the same commit as the task's own event.

Agents as aggregates live elsewhere: here an agent is its CID, and the caller passes its role.
Roles and CIDs are checked by ``names``: a task's role and a worker's are roles known to the fleet.
"""

from __future__ import annotations

import uuid

from ..wire import TASK_STATES
from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import known_role, known_role_or_none

STATES = TASK_STATES
ENDED = frozenset({"done", "failed", "withdrawn"})
PHASES = ("working", "review", "reviewing")
#: The role of the agents that review finished work.
REVIEWER_ROLE = "reviewer"
#: How a worker came to hold a task.
CLAIM_HOW = ("scheduler", "assigned", "claimed", "awarded", "hired")
#: Why a claimed task failed.
FAIL_WHY = ("review", "worker", "offline")
MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 20_000
MAX_FILES = 500


def task_id(number: str) -> uuid.UUID:
    return fixed_id(f"task:{number}")


def worker_id(cid: str) -> uuid.UUID:
    return fixed_id(f"worker:{cid}")


def _text(value: str | None, what: str, limit: int, required: bool = False) -> str:
    value = (value or "").strip()
    if required and not value:
        raise Refusal("invalid_request", f"a task needs {what}")
    if len(value) > limit:
        raise Refusal("invalid_request", f"{what} is at most {limit:,} characters")
    return value


class Sequence(PlazaAggregate):
    """Hands out the short numbers people type: t1, t2 ... and a1, a2 ...; one per prefix."""

    family = "sequences"

    class Created(PlazaAggregate.Created):
        prefix: str

    class Issued(PlazaAggregate.Event):
        number: int

        def apply(self, seq: Sequence) -> None:
            seq.last = self.number

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.last = 0

    @staticmethod
    def id_for(prefix: str) -> uuid.UUID:
        return fixed_id(f"sequence:{prefix}")

    @classmethod
    def open(cls, ctx: Context, prefix: str) -> Sequence:
        return cls.start(ctx, id=cls.id_for(prefix), prefix=prefix)

    def issue(self, ctx: Context) -> str:
        self.record(self.Issued, ctx, number=self.last + 1)
        return f"{self.prefix}{self.last}"


class Task(PlazaAggregate):
    family = "tasks"

    class Created(PlazaAggregate.Created):
        number: str
        title: str
        details: str
        acceptance: str
        role: str | None
        budget: int
        project: str | None
        parent: str | None
        through_tools: bool

    class BidPlaced(PlazaAggregate.Event):
        worker: str
        price: int

        def apply(self, task: Task) -> None:
            task.bids[self.worker] = self.price

    class Claimed(PlazaAggregate.Event):
        worker: str
        how: str  # scheduler, assigned, claimed, awarded, hired
        price: int | None  # the awarded bid's price

        def apply(self, task: Task) -> None:
            task.state, task.phase, task.worker = "claimed", "working", self.worker

    class Reported(PlazaAggregate.Event):
        summary: str
        files: list[str]
        checks: str

        def apply(self, task: Task) -> None:
            task.phase = "review"
            task.report = {"summary": self.summary, "files": list(self.files), "checks": self.checks}

    class ReviewerAssigned(PlazaAggregate.Event):
        reviewer: str
        how: str  # scheduler, assigned, claimed

        def apply(self, task: Task) -> None:
            task.phase, task.reviewer = "reviewing", self.reviewer

    class ReviewReleased(PlazaAggregate.Event):
        reviewer: str

        def apply(self, task: Task) -> None:
            task.phase, task.reviewer = "review", None

    class Passed(PlazaAggregate.Event):
        reviewer: str
        notes: str

        def apply(self, task: Task) -> None:
            task.state, task.phase, task.notes = "done", None, self.notes

    class Failed(PlazaAggregate.Event):
        why: str  # review, worker, offline
        notes: str

        def apply(self, task: Task) -> None:
            task.state, task.phase, task.notes = "failed", None, self.notes

    class Withdrawn(PlazaAggregate.Event):
        def apply(self, task: Task) -> None:
            task.state, task.phase = "withdrawn", None

    def __init__(self, number: str, title: str, details: str, acceptance: str, role: str | None, budget: int,
                 project: str | None, parent: str | None, through_tools: bool) -> None:
        self.number, self.title, self.details, self.acceptance = number, title, details, acceptance
        self.role, self.budget, self.project, self.parent = role, budget, project, parent
        self.through_tools = through_tools
        self.state = "open"
        self.phase: str | None = None
        self.worker: str | None = None
        self.reviewer: str | None = None
        self.report: dict | None = None
        self.notes: str | None = None
        self.bids: dict[str, int] = {}

    # -- creating ---------------------------------------------------------------------

    @classmethod
    def create(cls, ctx: Context, number: str, *, title: str, acceptance: str, budget: int, details: str = "",
               role: str | None = None, project: str | None = None, parent: str | None = None,
               through_tools: bool = False) -> Task:
        return cls.start(
            ctx, id=task_id(number), number=number,
            title=_text(title, "a title", MAX_TITLE_CHARS, True),
            details=_text(details, "the details", MAX_TEXT_CHARS),
            acceptance=_text(acceptance, "an acceptance (what counts as done)", MAX_TEXT_CHARS, True),
            role=known_role_or_none(role), budget=budget, project=(project or None), parent=parent,
            through_tools=through_tools,
        )

    # -- checks -------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    def _not_ended(self) -> None:
        if self.ended:
            raise Refusal("task_ended", f"task {self.number} has ended ({self.state}); an ended task never changes")

    def _open(self, doing: str) -> None:
        self._not_ended()
        if self.state != "open":
            raise Refusal("task_not_open", f"task {self.number} is {self.state} by {self.worker}; only an open task can be {doing}")

    def _claimed(self) -> None:
        self._not_ended()
        if self.state != "claimed":
            raise Refusal("task_not_claimed", f"task {self.number} is open: no worker has it yet")

    def _fits(self, role: str | None) -> None:
        if self.role is not None and role != self.role:
            raise Refusal("wrong_role", f"task {self.number} is for the role {self.role}, not {role or 'no role'}")

    # -- transitions -----------------------------------------------------------------------

    def bid(self, ctx: Context, worker: str, role: str | None, price: int) -> None:
        """A worker of the task's role bids a price on the open call."""
        self._open("bid on")
        if self.role is None:
            raise Refusal("no_open_call", f"task {self.number} names no role, so it is not an open call for bids")
        self._fits(role)
        if type(price) is not int or price < 1:
            raise Refusal("invalid_price", "a bid's price is a whole number of credits, at least 1")
        if price > self.budget:
            raise Refusal("bid_over_budget", f"a bid of {price} is above task {self.number}'s budget of {self.budget}")
        self.record(self.BidPlaced, ctx, worker=worker, price=price)

    def claim(self, ctx: Context, worker: str, role: str | None, how: str, price: int | None = None) -> None:
        """An open task goes to one worker (the scheduler, the owner's assign, an award, the worker's own claim)."""
        assert how in CLAIM_HOW, how
        self._open("claimed")
        self._fits(role)
        if how == "awarded":
            if worker not in self.bids:
                raise Refusal("no_bid", f"{worker} has not bid on task {self.number}; award it to one of the bidders"
                              + (f" ({', '.join(sorted(self.bids))})" if self.bids else ""))
            price = self.bids[worker]
        self.record(self.Claimed, ctx, worker=worker, how=how, price=price)

    def report_done(self, ctx: Context, worker: str, summary: str, files: list[str], checks: str) -> None:
        self._claimed()
        if worker != self.worker:
            raise Refusal("not_your_task", f"task {self.number} is {self.worker}'s, not {worker}'s")
        if self.phase != "working":
            raise Refusal("already_reported", f"task {self.number} was already reported done; it waits for review")
        summary = _text(summary, "a summary of what was done", MAX_TEXT_CHARS, True)
        if not isinstance(files, list) or len(files) > MAX_FILES or not all(isinstance(f, str) and f.strip() for f in files):
            raise Refusal("invalid_request", f"the files changed are a list of at most {MAX_FILES} paths")
        checks = _text(checks, "how the result was checked", MAX_TEXT_CHARS, True)
        self.record(self.Reported, ctx, summary=summary, files=[f.strip() for f in files], checks=checks)

    def give_up(self, ctx: Context, worker: str, notes: str) -> None:
        """The worker failed: the task ends failed."""
        self._claimed()
        if worker != self.worker:
            raise Refusal("not_your_task", f"task {self.number} is {self.worker}'s, not {worker}'s")
        self.record(self.Failed, ctx, why="worker", notes=_text(notes, "notes", MAX_TEXT_CHARS))

    def take_review(self, ctx: Context, reviewer: str, role: str | None, how: str) -> None:
        self._claimed()
        if role != REVIEWER_ROLE:
            raise Refusal("not_a_reviewer", f"only an agent of the role {REVIEWER_ROLE} reviews work")
        if reviewer == self.worker:
            raise Refusal("own_work", f"{reviewer} did task {self.number} and cannot review its own work")
        if self.phase == "working":
            raise Refusal("not_reported", f"task {self.number} has not been reported done yet")
        if self.phase == "reviewing":
            raise Refusal("review_taken", f"task {self.number} is already being reviewed by {self.reviewer}")
        self.record(self.ReviewerAssigned, ctx, reviewer=reviewer, how=how)

    def release_review(self, ctx: Context) -> None:
        self._claimed()
        if self.phase != "reviewing":
            raise Refusal("not_reviewing", f"task {self.number} has no reviewer")
        self.record(self.ReviewReleased, ctx, reviewer=self.reviewer)

    def check_verdict(self, reviewer: str) -> None:
        self._claimed()
        if reviewer == self.worker:
            raise Refusal("own_work", f"{reviewer} did task {self.number} and cannot review its own work")
        if self.phase != "reviewing" or self.reviewer != reviewer:
            raise Refusal("not_your_review", f"task {self.number} is not under review by {reviewer}")

    def verdict(self, ctx: Context, reviewer: str, passed: bool, notes: str) -> None:
        """The reviewer rules: pass (done) or fail (failed), with notes."""
        self.check_verdict(reviewer)
        notes = _text(notes, "the review's notes", MAX_TEXT_CHARS, True)
        if passed:
            self.record(self.Passed, ctx, reviewer=reviewer, notes=notes)
        else:
            self.record(self.Failed, ctx, why="review", notes=notes)

    def worker_offline(self, ctx: Context) -> None:
        """Its worker went offline while working: the task fails."""
        self._claimed()
        self.record(self.Failed, ctx, why="offline", notes=f"worker {self.worker} went offline")

    def withdraw(self, ctx: Context) -> None:
        """Cancelled before it finished, by the owner or the orchestrator."""
        self._not_ended()
        self.record(self.Withdrawn, ctx)


class Worker(PlazaAggregate):
    """One agent as the scheduler sees it: role, tier, idle/busy/offline, the task it holds."""

    family = "workers"

    class Created(PlazaAggregate.Created):
        cid: str
        role: str
        tier: str

    class Available(PlazaAggregate.Event):
        role: str
        tier: str

        def apply(self, w: Worker) -> None:
            w.role, w.tier, w.status, w.activity = self.role, self.tier, "idle", None

    class Busy(PlazaAggregate.Event):
        activity: str

        def apply(self, w: Worker) -> None:
            w.status, w.activity = "busy", self.activity

    class Offline(PlazaAggregate.Event):
        def apply(self, w: Worker) -> None:
            w.status, w.activity, w.task = "offline", None, None

    class Took(PlazaAggregate.Event):
        task: str
        work: str  # "task" or "review"

        def apply(self, w: Worker) -> None:
            w.status, w.task, w.work, w.activity = "busy", self.task, self.work, None
            w.taken += 1

    class Released(PlazaAggregate.Event):
        task: str

        def apply(self, w: Worker) -> None:
            w.task = w.work = None
            if w.status == "busy":
                w.status = "idle"

    TIERS = ("worker", "orchestrator")

    def __init__(self, cid: str, role: str, tier: str) -> None:
        self.cid, self.role, self.tier = cid, role, tier
        self.status = "offline"
        self.activity: str | None = None
        self.task: str | None = None
        self.work: str | None = None
        self.taken = 0

    @classmethod
    def join(cls, ctx: Context, cid: str, role: str, tier: str) -> Worker:
        return cls.start(ctx, id=worker_id(cid), cid=cid, role=role, tier=tier)

    def available(self, ctx: Context, role: str, tier: str) -> None:
        known_role(role)
        if tier not in self.TIERS:
            raise Refusal("invalid_tier", f"a tier is one of {', '.join(self.TIERS)}")
        if self.task is not None:
            raise Refusal("worker_holds_task", f"{self.cid} holds task {self.task}; it is released when that work ends or is handed in")
        self.record(self.Available, ctx, role=role, tier=tier)

    def busy(self, ctx: Context, activity: str) -> None:
        if self.status == "offline":
            raise Refusal("worker_offline", f"{self.cid} is offline")
        if self.task is not None:
            raise Refusal("worker_holds_task", f"{self.cid} already holds task {self.task}")
        self.record(self.Busy, ctx, activity=_text(activity, "the activity", MAX_TITLE_CHARS) or "busy")

    def offline(self, ctx: Context) -> None:
        if self.status == "offline":
            raise Refusal("worker_offline", f"{self.cid} is already offline")
        self.record(self.Offline, ctx)

    def take(self, ctx: Context, task: str, work: str) -> None:
        if self.status == "offline":
            raise Refusal("worker_offline", f"{self.cid} is offline")
        if self.task is not None:
            raise Refusal("worker_busy", f"{self.cid} already holds task {self.task}")
        if self.tier != "worker":
            raise Refusal("not_a_worker", f"{self.cid} is the orchestrator; it plans and does not take tasks")
        self.record(self.Took, ctx, task=task, work=work)

    def release(self, ctx: Context, task: str) -> None:
        if self.task == task:
            self.record(self.Released, ctx, task=task)
