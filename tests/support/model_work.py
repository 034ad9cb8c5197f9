"""An independent model of the task flow and the scheduler's workers, for the work machine.

Written from the guide (Tasks chapter) and docs/tasks.md: a task is open, claimed (working, then
review once reported done, then reviewing once a reviewer has it), done, failed or withdrawn; an
ended task never changes; a worker is offline, idle or busy and holds at most one task or review;
nobody reviews its own work; STOP ALL holds every claim, report and review.  Its money goes
through ``model_books.Books`` (the escrow of each task, the budget, the wallets).  Every
operation raises ``Refused(code)`` before it changes anything, or applies its whole effect.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentplaza.domain.treasury import DEFAULT_TOOL_TASK_BUDGET

from .model_books import Books, refuse_if

ENDED = ("done", "failed", "withdrawn")
REVIEWER = "reviewer"


@dataclass
class Task:
    budget: int
    role: str | None
    state: str = "open"
    phase: str | None = None  # working, review, reviewing (while claimed)
    worker: str | None = None
    reviewer: str | None = None
    bids: dict[str, int] = field(default_factory=dict)


@dataclass
class Worker:
    role: str
    status: str = "idle"  # idle, busy, offline
    task: str | None = None
    work: str | None = None  # task or review


class Work:
    def __init__(self, books: Books, workers: dict[str, str]):
        self.books = books
        self.tasks: dict[str, Task] = {}
        self.workers = {cid: Worker(role) for cid, role in workers.items()}

    # -- checks ---------------------------------------------------------------------------

    def task(self, n: str) -> Task:
        refuse_if(n not in self.tasks, "no_task")
        return self.tasks[n]

    @staticmethod
    def not_ended(x: Task) -> None:
        refuse_if(x.state in ENDED, "task_ended")

    def open_task(self, x: Task) -> None:
        self.not_ended(x)
        refuse_if(x.state != "open", "task_not_open")

    def claimed(self, x: Task) -> None:
        self.not_ended(x)
        refuse_if(x.state != "claimed", "task_not_claimed")

    @staticmethod
    def can_take(w: Worker) -> None:
        refuse_if(w.status == "offline", "worker_offline")
        refuse_if(w.task is not None, "worker_busy")

    def take(self, cid: str, n: str, work: str) -> None:
        w = self.workers[cid]
        w.status, w.task, w.work = "busy", n, work

    def release(self, cid: str | None, n: str) -> None:
        w = self.workers.get(cid) if cid else None
        if w is not None and w.task == n:
            w.task = w.work = None
            if w.status == "busy":
                w.status = "idle"

    # -- the flow -------------------------------------------------------------------------------

    def create(self, budget: int | None, role: str | None, by_agent: bool) -> str:
        n = f"t{len(self.tasks) + 1}"
        amount = DEFAULT_TOOL_TASK_BUDGET if budget is None else budget
        self.books.fund(n, amount, through_tools=by_agent)
        self.tasks[n] = Task(amount, role)
        return n

    def claim(self, n: str, cid: str, role: str | None) -> None:
        """The owner's assign (role: the worker's), the worker's own claim (role: what it says)."""
        self.books.running()
        x = self.task(n)
        self.open_task(x)
        refuse_if(x.role is not None and role != x.role, "wrong_role")
        self.can_take(self.workers[cid])
        x.state, x.phase, x.worker = "claimed", "working", cid
        self.take(cid, n, "task")

    def bid(self, n: str, cid: str, role: str, price: int) -> None:
        self.books.running()
        x = self.task(n)
        self.open_task(x)
        refuse_if(x.role is None, "no_open_call")
        refuse_if(role != x.role, "wrong_role")
        refuse_if(price < 1, "invalid_price")
        refuse_if(price > x.budget, "bid_over_budget")
        x.bids[cid] = price

    def award(self, n: str, cid: str) -> None:
        self.books.running()
        x = self.task(n)
        self.open_task(x)
        refuse_if(cid not in x.bids, "no_bid")
        self.can_take(self.workers[cid])
        x.state, x.phase, x.worker = "claimed", "working", cid
        self.take(cid, n, "task")

    def report(self, n: str, cid: str) -> None:
        self.books.running()
        x = self.task(n)
        self.claimed(x)
        refuse_if(cid != x.worker, "not_your_task")
        refuse_if(x.phase != "working", "already_reported")
        x.phase = "review"
        self.release(x.worker, n)

    def take_review(self, n: str, cid: str) -> None:
        self.books.running()
        x = self.task(n)
        self.claimed(x)
        refuse_if(self.workers[cid].role != REVIEWER, "not_a_reviewer")
        refuse_if(cid == x.worker, "own_work")
        refuse_if(x.phase == "working", "not_reported")
        refuse_if(x.phase == "reviewing", "review_taken")
        self.can_take(self.workers[cid])
        x.phase, x.reviewer = "reviewing", cid
        self.take(cid, n, "review")

    def review(self, n: str, cid: str, passed: bool) -> None:
        self.books.running()
        x = self.task(n)
        self.claimed(x)
        refuse_if(cid == x.worker, "own_work")
        refuse_if(x.phase != "reviewing" or x.reviewer != cid, "not_your_review")
        if passed:
            self.books.settle(n, x.worker)
        else:
            self.books.refund(n, "failed")
        x.state, x.phase = ("done" if passed else "failed"), None
        self.release(cid, n)

    def _end(self, x: Task, n: str, state: str) -> None:
        self.books.refund(n, state)
        x.state, x.phase = state, None
        self.release(x.worker, n)
        self.release(x.reviewer, n)

    def give_up(self, n: str, cid: str) -> None:
        x = self.task(n)
        self.claimed(x)
        refuse_if(cid != x.worker, "not_your_task")
        self._end(x, n, "failed")

    def withdraw(self, n: str, allowed: bool) -> None:
        refuse_if(not allowed, "not_allowed")
        x = self.task(n)
        self.not_ended(x)
        self._end(x, n, "withdrawn")

    # -- the workers -----------------------------------------------------------------------------

    def available(self, cid: str) -> None:
        w = self.workers[cid]
        refuse_if(w.task is not None, "worker_holds_task")
        w.status = "idle"

    def busy(self, cid: str) -> None:
        w = self.workers[cid]
        refuse_if(w.status == "offline", "worker_offline")
        refuse_if(w.task is not None, "worker_holds_task")
        w.status = "busy"

    def offline(self, cid: str) -> None:
        """Offline: a task it was working on fails (its escrow returns); a review it held goes back."""
        w = self.workers[cid]
        refuse_if(w.status == "offline", "worker_offline")
        holding, work = w.task, w.work
        w.status, w.task, w.work = "offline", None, None
        if holding is None:
            return
        x = self.tasks[holding]
        if x.state not in ENDED and work == "task" and x.phase == "working":
            self.books.refund(holding, "failed")
            x.state, x.phase = "failed", None
        elif x.state not in ENDED and work == "review" and x.phase == "reviewing":
            x.phase, x.reviewer = "review", None
