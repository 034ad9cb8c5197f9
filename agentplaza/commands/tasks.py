"""The tasks' commands: create (with its escrow), claim, report, review, bid, award, withdraw;
and the workers' availability, which the agents runtime reports.

Each command commits the task, the workers it concerns and the treasury's accounts together:
a task is created with its budget in escrow or not at all; a pass settles the escrow (the
worker's margin, the rest back to the plaza budget) in the same commit as the verdict; a
fail, a withdrawal or a worker gone offline returns it.  Starting work (claim, assign, award,
bid, report, review) is refused while the plaza is held; withdrawing and failing are not
(refunds go through while held).
"""

from __future__ import annotations

from typing import Any

from ..domain import treasury as t
from ..domain.base import Context, Refusal
from ..domain.names import TASK_PREFIX, check_cid, known_role, known_role_or_none, task_number
from ..domain.plaza import require_running
from ..domain.tasks import ENDED, Sequence, Task, Worker, task_id, worker_id
from . import treasury
from .unit import Commands


def load(cmds: Commands, number: str) -> Task:
    found = cmds.store.get(task_id(task_number(number)))
    if not isinstance(found, Task):
        raise Refusal("no_task", f"no task {number!r}")
    return found


def worker(cmds: Commands, cid: str) -> Worker | None:
    return cmds.store.get(worker_id(cid))


def _known_worker(cmds: Commands, cid: str) -> Worker:
    w = worker(cmds, check_cid(cid))
    if w is None:
        raise Refusal("no_worker", f"agent {cid} is not known to the scheduler; the agents runtime reports it available first")
    return w


def _running(cmds: Commands) -> None:
    require_running(cmds.store.get)


def view(task: Task) -> dict:
    return {"id": task.number, "title": task.title, "details": task.details, "acceptance": task.acceptance,
            "role": task.role, "budget": task.budget, "project": task.project, "parent": task.parent,
            "state": task.state, "phase": task.phase, "worker": task.worker, "reviewer": task.reviewer,
            "report": task.report, "notes": task.notes, "bids": dict(task.bids)}


def _one(cmds: Commands, decide) -> list[int]:
    return cmds.run_aggregates(decide)


# -- creating ------------------------------------------------------------------------------


def create(cmds: Commands, ctx: Context, title: str, acceptance: str, budget: int | None = None, *,
           details: str = "", role: str | None = None, project: str | None = None,
           parent: str | None = None) -> dict:
    """Create a task and move its budget into its escrow, in one commit.

    A task an agent creates (the orchestrator or a worker, through its tools) defaults to 2,000
    credits and one below 200 is refused; the owner's default is the same 2,000.  If the plaza
    budget cannot cover it, nothing is created.
    """
    through_tools = ctx.actor.startswith("agent:")
    amount = t.DEFAULT_TOOL_TASK_BUDGET if budget is None else budget
    if parent is not None:
        parent = load(cmds, parent).number
    box: dict = {}

    def decide():
        seq = cmds.store.get(Sequence.id_for(TASK_PREFIX)) or Sequence.open(ctx, TASK_PREFIX)
        number = seq.issue(ctx)
        books = treasury.load_books(cmds, ctx, [t.BUDGET], [parent])
        t.fund_task_escrow(books, number, amount, parent=parent, through_tools=through_tools,
                           memo=f"budget of task {number}")
        task = Task.create(ctx, number, title=title, acceptance=acceptance, budget=amount, details=details,
                           role=role, project=project, parent=parent, through_tools=through_tools)
        box["task"] = task
        return [seq, task, *books.changed()]

    positions = cmds.run_aggregates(decide)
    return {**view(box["task"]), "positions": positions}


# -- taking work -----------------------------------------------------------------------------


def assign(cmds: Commands, ctx: Context, number: str, cid: str, *, how: str = "assigned") -> list[int]:
    """Give an open task to a known worker (the owner's assign, or the scheduler)."""

    def decide():
        _running(cmds)
        task, w = load(cmds, number), _known_worker(cmds, cid)
        task.claim(ctx, w.cid, w.role, how)
        w.take(ctx, task.number, "task")
        return [task, w]

    return _one(cmds, decide)


def _worker_for(cmds: Commands, ctx: Context, cid: str, role: str | None) -> Worker:
    """The worker aggregate of an agent acting itself; an agent not yet reported is taken as idle."""
    cid = check_cid(cid)
    w = worker(cmds, cid)
    if w is None:
        role = known_role(role)
        w = Worker.join(ctx, cid, role, "worker")
        w.available(ctx, role, "worker")
    return w


def claim(cmds: Commands, ctx: Context, number: str, cid: str, role: str | None) -> list[int]:
    """A worker claims an open task itself (its role passed by the caller)."""

    def decide():
        _running(cmds)
        task = load(cmds, number)
        w = _worker_for(cmds, ctx, cid, role)
        task.claim(ctx, w.cid, known_role_or_none(role), "claimed")
        w.take(ctx, task.number, "task")
        return [task, w]

    return _one(cmds, decide)


def bid(cmds: Commands, ctx: Context, number: str, cid: str, role: str | None, price: int) -> list[int]:
    """A worker of the task's role bids a price on the open call."""

    def decide():
        _running(cmds)
        task = load(cmds, number)
        task.bid(ctx, check_cid(cid), known_role_or_none(role), price)
        return [task]

    return _one(cmds, decide)


def award(cmds: Commands, ctx: Context, number: str, cid: str) -> list[int]:
    """The owner awards the open call to one bidder, who takes it as if assigned."""

    def decide():
        _running(cmds)
        task = load(cmds, number)
        w = _worker_for(cmds, ctx, cid, task.role)
        task.claim(ctx, w.cid, task.role, "awarded")
        w.take(ctx, task.number, "task")
        return [task, w]

    return _one(cmds, decide)


# -- doing it ---------------------------------------------------------------------------------------


def report_done(cmds: Commands, ctx: Context, number: str, cid: str, summary: str, files: list[str],
                checks: str) -> list[int]:
    """The worker reports done: what it did, the files it changed, how it checked. It waits for review."""

    def decide():
        _running(cmds)
        task = load(cmds, number)
        task.report_done(ctx, check_cid(cid), summary, files, checks)
        w = worker(cmds, task.worker)
        if w is not None:
            w.release(ctx, task.number)
        return [task, w]

    return _one(cmds, decide)


def _release_all(cmds: Commands, ctx: Context, task: Task, cids: list[str | None]) -> list[Any]:
    out = []
    for cid in cids:
        w = worker(cmds, cid) if cid else None
        if w is not None and w.task == task.number:
            w.release(ctx, task.number)
            out.append(w)
    return out


def give_up(cmds: Commands, ctx: Context, number: str, cid: str, notes: str = "") -> treasury.Outcome:
    """The worker failed: the task ends failed and its escrow returns."""

    def decide():
        task = load(cmds, number)
        holders = [task.worker, task.reviewer]
        task.give_up(ctx, check_cid(cid), notes)
        books = treasury.load_books(cmds, ctx, [t.BUDGET], [task.number])
        t.refund_task(books, task.number, "failed")
        for agg in [task, *_release_all(cmds, ctx, task, holders)]:
            books.add(agg)
        return books, None

    return treasury.run_books(cmds, decide)


def take_review(cmds: Commands, ctx: Context, number: str, reviewer: str, role: str | None, *,
                how: str = "claimed") -> list[int]:
    """A reviewer takes a task reported done (never its own work)."""

    def decide():
        _running(cmds)
        task = load(cmds, number)
        w = _worker_for(cmds, ctx, reviewer, role)
        task.take_review(ctx, w.cid, known_role_or_none(role), how)
        w.take(ctx, task.number, "review")
        return [task, w]

    return _one(cmds, decide)


def assign_review(cmds: Commands, ctx: Context, number: str, reviewer: str, *, how: str = "assigned") -> list[int]:
    """Give a task waiting for review to a known reviewer (the owner, or the scheduler)."""

    def decide():
        _running(cmds)
        task, w = load(cmds, number), _known_worker(cmds, reviewer)
        task.take_review(ctx, w.cid, w.role, how)
        w.take(ctx, task.number, "review")
        return [task, w]

    return _one(cmds, decide)


def review(cmds: Commands, ctx: Context, number: str, reviewer: str, passed: bool, notes: str, *,
           metered_cost: int | None = None) -> treasury.Outcome:
    """The reviewer rules. Pass: done, and the escrow settles (the worker's margin, the rest back).
    Fail: failed, and the escrow returns."""

    def decide():
        _running(cmds)
        task = load(cmds, number)
        task.verdict(ctx, check_cid(reviewer), passed, notes)
        keys = [t.BUDGET] + ([t.wallet_key(task.worker)] if passed else [])
        books = treasury.load_books(cmds, ctx, keys, [task.number])
        if passed:
            t.settle_task(books, treasury.plaza(cmds), task.number, True, worker=task.worker, metered_cost=metered_cost)
        else:
            t.refund_task(books, task.number, "failed")
        for agg in [task, *_release_all(cmds, ctx, task, [reviewer])]:
            books.add(agg)
        return books, None

    return treasury.run_books(cmds, decide)


def withdraw(cmds: Commands, ctx: Context, number: str, *, tier: str | None = None) -> treasury.Outcome:
    """Cancel a task before it finished: by the owner, or by the orchestrator (an agent of tier
    orchestrator). Its escrow returns."""
    if not (ctx.actor == "owner" or (ctx.actor.startswith("agent:") and tier == "orchestrator")):
        raise Refusal("not_allowed", "only the owner or the orchestrator withdraws a task")

    def decide():
        task = load(cmds, number)
        holders = [task.worker, task.reviewer]
        task.withdraw(ctx)
        books = treasury.load_books(cmds, ctx, [t.BUDGET], [task.number])
        t.refund_task(books, task.number, "withdrawn")
        for agg in [task, *_release_all(cmds, ctx, task, holders)]:
            books.add(agg)
        return books, None

    return treasury.run_books(cmds, decide)


# -- the workers (called by the agents runtime) -------------------------------------------------------


def worker_available(cmds: Commands, ctx: Context, cid: str, role: str, tier: str = "worker") -> list[int]:
    """The agent is online and idle: the scheduler may give it work of its role."""

    def decide():
        c = check_cid(cid)
        w = worker(cmds, c)
        if w is None:
            w = Worker.join(ctx, c, known_role(role), tier)
        w.available(ctx, role, tier)
        return [w]

    return _one(cmds, decide)


def worker_busy(cmds: Commands, ctx: Context, cid: str, activity: str = "busy") -> list[int]:
    """The agent is busy with something else (a chat, its own errands): the scheduler skips it."""

    def decide():
        w = _known_worker(cmds, cid)
        w.busy(ctx, activity)
        return [w]

    return _one(cmds, decide)


def worker_offline(cmds: Commands, ctx: Context, cid: str) -> treasury.Outcome:
    """The agent went offline. A task it was working on fails (its escrow returns); a review it
    held goes back to wait for another reviewer."""

    def decide():
        w = _known_worker(cmds, cid)
        holding, work = w.task, w.work
        w.offline(ctx)
        books = t.Books(ctx, {})
        if holding is not None:
            task = load(cmds, holding)
            if not task.ended and work == "task" and task.phase == "working":
                task.worker_offline(ctx)
                books = treasury.load_books(cmds, ctx, [t.BUDGET], [task.number])
                t.refund_task(books, task.number, "failed")
                books.add(task)
            elif not task.ended and work == "review" and task.phase == "reviewing":
                task.release_review(ctx)
                books.add(task)
        books.add(w)
        return books, None

    return treasury.run_books(cmds, decide)


def ended(task: Task) -> bool:
    return task.state in ENDED
