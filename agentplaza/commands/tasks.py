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
from ..domain.hiring import Hire, hire_id, pay_bonus
from ..domain.names import TASK_PREFIX, check_cid, known_role, known_role_or_none, task_number
from ..domain.plaza import require_running
from ..domain.tasks import ENDED, Sequence, Task, Worker, task_id, worker_id
from . import society, treasury
from .unit import Commands, Done, Unit


def load(cmds: Commands, number: str) -> Task:
    return load_in(Unit(cmds.store), number)


def load_in(unit: Unit, number: str) -> Task:
    found = unit.get(task_id(task_number(number)))
    if not isinstance(found, Task):
        raise Refusal("no_task", f"no task {number!r}")
    return found


def worker(cmds: Commands, cid: str) -> Worker | None:
    return cmds.store.get(worker_id(cid))


def _worker(unit: Unit, cid: str) -> Worker | None:
    return unit.get(worker_id(cid))


def _known_worker(unit: Unit, cid: str) -> Worker:
    w = _worker(unit, check_cid(cid))
    if w is None:
        raise Refusal("no_worker", f"agent {cid} is not known to the scheduler; the agents runtime reports it available first")
    return w


def _running(unit: Unit) -> None:
    require_running(unit.get)


def view(task: Task) -> dict:
    return {"id": task.number, "title": task.title, "details": task.details, "acceptance": task.acceptance,
            "role": task.role, "budget": task.budget, "project": task.project, "parent": task.parent,
            "state": task.state, "phase": task.phase, "worker": task.worker, "reviewer": task.reviewer,
            "report": task.report, "notes": task.notes, "bids": dict(task.bids)}


# -- creating ------------------------------------------------------------------------------


def create(cmds: Commands, ctx: Context, title: str, acceptance: str, budget: int | None = None, *,
           details: str = "", role: str | None = None, project: str | None = None,
           parent: str | None = None) -> Done[dict]:
    """Create a task and move its budget into its escrow, in one commit.

    A task an agent creates (the orchestrator or a worker, through its tools) defaults to 2,000
    credits and one below 200 is refused; the owner's default is the same 2,000.  If the plaza
    budget cannot cover it, nothing is created.
    """
    if parent is not None:
        parent = load(cmds, parent).number
    return cmds.run(lambda unit: view(create_in(unit, ctx, title, acceptance, budget, details=details, role=role,
                                                project=project, parent=parent)))


def create_in(unit: Unit, ctx: Context, title: str, acceptance: str, budget: int | None = None, *,
              details: str = "", role: str | None = None, project: str | None = None,
              parent: str | None = None) -> Task:
    """``create``'s decision in the caller's unit (a hire makes its task so): the task, funded."""
    through_tools = ctx.actor.startswith("agent:")
    amount = t.DEFAULT_TOOL_TASK_BUDGET if budget is None else budget
    seq = unit.get(Sequence.id_for(TASK_PREFIX)) or Sequence.open(ctx, TASK_PREFIX)
    number = seq.issue(ctx)
    books = treasury.books(unit, ctx, [t.BUDGET], [parent])
    t.fund_task_escrow(books, number, amount, parent=parent, through_tools=through_tools,
                       memo=f"budget of task {number}")
    task = Task.create(ctx, number, title=title, acceptance=acceptance, budget=amount, details=details,
                       role=role, project=project, parent=parent, through_tools=through_tools)
    unit.add(seq, task, *books.changed())
    return task


# -- taking work -----------------------------------------------------------------------------


def assign(cmds: Commands, ctx: Context, number: str, cid: str, *, how: str = "assigned") -> Done[None]:
    """Give an open task to a known worker (the owner's assign, or the scheduler)."""

    def decide(unit: Unit):
        _running(unit)
        task, w = load_in(unit, number), _known_worker(unit, cid)
        task.claim(ctx, w.cid, w.role, how)
        w.take(ctx, task.number, "task")
        unit.add(task, w)

    return cmds.run(decide)


def _worker_for(unit: Unit, ctx: Context, cid: str, role: str | None) -> Worker:
    """The worker aggregate of an agent acting itself; an agent not yet reported is taken as idle."""
    cid = check_cid(cid)
    w = _worker(unit, cid)
    if w is None:
        role = known_role(role)
        w = Worker.join(ctx, cid, role, "worker")
        w.available(ctx, role, "worker")
    return w


def claim(cmds: Commands, ctx: Context, number: str, cid: str, role: str | None) -> Done[None]:
    """A worker claims an open task itself (its role passed by the caller)."""

    def decide(unit: Unit):
        _running(unit)
        task = load_in(unit, number)
        w = _worker_for(unit, ctx, cid, role)
        task.claim(ctx, w.cid, known_role_or_none(role), "claimed")
        w.take(ctx, task.number, "task")
        unit.add(task, w)

    return cmds.run(decide)


def bid(cmds: Commands, ctx: Context, number: str, cid: str, role: str | None, price: int) -> Done[None]:
    """A worker of the task's role bids a price on the open call."""

    def decide(unit: Unit):
        _running(unit)
        task = load_in(unit, number)
        task.bid(ctx, check_cid(cid), known_role_or_none(role), price)
        unit.add(task)

    return cmds.run(decide)


def award(cmds: Commands, ctx: Context, number: str, cid: str) -> Done[None]:
    """The owner awards the open call to one bidder, who takes it as if assigned."""

    def decide(unit: Unit):
        _running(unit)
        task = load_in(unit, number)
        w = _worker_for(unit, ctx, cid, task.role)
        task.claim(ctx, w.cid, task.role, "awarded")
        w.take(ctx, task.number, "task")
        unit.add(task, w)

    return cmds.run(decide)


# -- doing it ---------------------------------------------------------------------------------------


def report_done(cmds: Commands, ctx: Context, number: str, cid: str, summary: str, files: list[str],
                checks: str) -> Done[None]:
    """The worker reports done: what it did, the files it changed, how it checked. It waits for review."""

    def decide(unit: Unit):
        _running(unit)
        task = load_in(unit, number)
        task.report_done(ctx, check_cid(cid), summary, files, checks)
        w = _worker(unit, task.worker)
        if w is not None:
            w.release(ctx, task.number)
        unit.add(task, w)

    return cmds.run(decide)


def _release_all(unit: Unit, ctx: Context, task: Task, cids: list[str | None]) -> list[Any]:
    out = []
    for cid in cids:
        w = _worker(unit, cid) if cid else None
        if w is not None and w.task == task.number:
            w.release(ctx, task.number)
            out.append(w)
    return out


def give_up(cmds: Commands, ctx: Context, number: str, cid: str, notes: str = "") -> Done[treasury.Outcome]:
    """The worker failed: the task ends failed and its escrow returns."""

    def decide(unit: Unit):
        task = load_in(unit, number)
        holders = [task.worker, task.reviewer]
        task.give_up(ctx, check_cid(cid), notes)
        books = treasury.books(unit, ctx, [t.BUDGET], [task.number])
        t.refund_task(books, task.number, "failed")
        unit.add(task, *_release_all(unit, ctx, task, holders))
        return treasury.booked(unit, books)

    return cmds.run(decide)


def take_review(cmds: Commands, ctx: Context, number: str, reviewer: str, role: str | None, *,
                how: str = "claimed") -> Done[None]:
    """A reviewer takes a task reported done (never its own work)."""

    def decide(unit: Unit):
        _running(unit)
        task = load_in(unit, number)
        w = _worker_for(unit, ctx, reviewer, role)
        task.take_review(ctx, w.cid, known_role_or_none(role), how)
        w.take(ctx, task.number, "review")
        unit.add(task, w)

    return cmds.run(decide)


def assign_review(cmds: Commands, ctx: Context, number: str, reviewer: str, *, how: str = "assigned") -> Done[None]:
    """Give a task waiting for review to a known reviewer (the owner, or the scheduler)."""

    def decide(unit: Unit):
        _running(unit)
        task, w = load_in(unit, number), _known_worker(unit, reviewer)
        task.take_review(ctx, w.cid, w.role, how)
        w.take(ctx, task.number, "review")
        unit.add(task, w)

    return cmds.run(decide)


def review(cmds: Commands, ctx: Context, number: str, reviewer: str, passed: bool, notes: str, *,
           metered_cost: int | None = None) -> Done[treasury.Outcome]:
    """The reviewer rules. Pass: done, and the escrow settles (the worker's margin, the rest back).
    Fail: failed, and the escrow returns."""

    def decide(unit: Unit):
        _running(unit)
        task = load_in(unit, number)
        task.verdict(ctx, check_cid(reviewer), passed, notes)
        society.worked_in(unit, ctx, task.number, task.worker, check_cid(reviewer), passed)
        hire = unit.get(hire_id(task.number)) if passed else None
        keys = [t.BUDGET] + ([t.wallet_key(task.worker)] if passed else [])
        keys += [t.wallet_key(hire.hirer)] if isinstance(hire, Hire) else []
        books = treasury.books(unit, ctx, keys, [task.number])
        if passed:
            t.settle_task(books, treasury.plaza_in(unit), task.number, True, worker=task.worker, metered_cost=metered_cost)
            if isinstance(hire, Hire):  # a hired task's bonus: "paid only if the work passes"
                pay_bonus(books, treasury.plaza_in(unit), hire)
        else:
            t.refund_task(books, task.number, "failed")
        unit.add(task, *_release_all(unit, ctx, task, [reviewer]))
        if passed and task.project:
            from . import projects  # a project's linked task passed: the project may move on, same commit

            projects.task_done_in(unit, ctx, task.project, task.number)
        return treasury.booked(unit, books)

    return cmds.run(decide)


def withdraw(cmds: Commands, ctx: Context, number: str, *, tier: str | None = None) -> Done[treasury.Outcome]:
    """Cancel a task before it finished: by the owner, or by the orchestrator (an agent of tier
    orchestrator). Its escrow returns."""
    if not (ctx.actor == "owner" or (ctx.actor.startswith("agent:") and tier == "orchestrator")):
        raise Refusal("not_allowed", "only the owner or the orchestrator withdraws a task")

    def decide(unit: Unit):
        task = load_in(unit, number)
        holders = [task.worker, task.reviewer]
        task.withdraw(ctx)
        books = treasury.books(unit, ctx, [t.BUDGET], [task.number])
        t.refund_task(books, task.number, "withdrawn")
        unit.add(task, *_release_all(unit, ctx, task, holders))
        return treasury.booked(unit, books)

    return cmds.run(decide)


# -- the workers (called by the agents runtime) -------------------------------------------------------


def worker_available(cmds: Commands, ctx: Context, cid: str, role: str, tier: str = "worker") -> Done[None]:
    """The agent is online and idle: the scheduler may give it work of its role."""

    def decide(unit: Unit):
        c = check_cid(cid)
        w = _worker(unit, c)
        if w is None:
            w = Worker.join(ctx, c, known_role(role), tier)
        w.available(ctx, role, tier)
        unit.add(w)

    return cmds.run(decide)


def worker_busy(cmds: Commands, ctx: Context, cid: str, activity: str = "busy") -> Done[None]:
    """The agent is busy with something else (a chat, its own errands): the scheduler skips it."""

    def decide(unit: Unit):
        w = _known_worker(unit, cid)
        w.busy(ctx, activity)
        unit.add(w)

    return cmds.run(decide)


def worker_offline(cmds: Commands, ctx: Context, cid: str) -> Done[treasury.Outcome]:
    """The agent went offline. A task it was working on fails (its escrow returns); a review it
    held goes back to wait for another reviewer."""

    def decide(unit: Unit):
        w = _known_worker(unit, cid)
        holding, work = w.task, w.work
        w.offline(ctx)
        books = t.Books(ctx, {})
        if holding is not None:
            task = load_in(unit, holding)
            if not task.ended and work == "task" and task.phase == "working":
                task.worker_offline(ctx)
                books = treasury.books(unit, ctx, [t.BUDGET], [task.number])
                t.refund_task(books, task.number, "failed")
                books.add(task)
            elif not task.ended and work == "review" and task.phase == "reviewing":
                task.release_review(ctx)
                books.add(task)
        unit.add(w)
        return treasury.booked(unit, books)

    return cmds.run(decide)


def ended(task: Task) -> bool:
    return task.state in ENDED
