"""The projects' commands: open, research, propose, critique, approve (the Mayor's or the owner's),
send back, flag, veto, link a task, the linked task done, deliver (``domain.projects`` holds the rules).

``role`` is the acting agent's role as the hub's records give it (None for the owner). The owner's
approval of a project flagged for the owner is also an approval of kind ``project`` in the queue:
the Mayor's approval of a flagged plan asks for it, and deciding it either way (here, or in
``approvals``) is one commit with the project's move. A task is linked by creating it for the
project (``link_task``): the task, its escrow and the link are one commit, refused before the plan
is approved. A linked task that passes moves the project on in the review's own commit
(``commands.tasks.review`` calls ``task_done_in``).
"""

from __future__ import annotations

from ..domain.approvals import Approval
from ..domain.base import Context, Refusal
from ..domain.library import Item, item_id, item_number
from ..domain.names import PROJECT_PREFIX, project_number, short_number
from ..domain.plaza import require_running
from ..domain.projects import Handed, Project, project_id, thread_line
from ..domain.tasks import Sequence
from . import approvals
from . import board as board_commands
from . import tasks as tasks_commands
from .unit import Commands, Done, Unit


def project_ref(number: str) -> str:
    return f"project:{number}"


def load_in(unit: Unit, number: str) -> Project:
    found = unit.get(project_id(project_number(number)))
    if not isinstance(found, Project):
        raise Refusal("no_project", f"no project {number!r}")
    return found


def load(cmds: Commands, number: str) -> Project:
    return load_in(Unit(cmds.store), number)


def view(p: Project) -> dict:
    return {"id": p.number, "kind": p.kind, "title": p.title, "brief": p.brief, "stage": p.stage,
            "vetoed": p.vetoed, "owner_flag": p.owner_flag, "owner_approved": p.owner_approved,
            "mayor_approved": p.mayor_approved, "approval": p.approval, "waits_for_owner": p.waits_for_owner,
            "revision": p.revision, "research": list(p.research), "revisions": list(p.revisions),
            "critiques": list(p.critiques), "sent_back": p.sent_back, "tasks": list(p.tasks),
            "done": list(p.done), "deliverable": p.deliverable, "thread": p.thread, "repo": p.repo,
            "specs": {str(k): v for k, v in sorted(p.specs.items())},
            "blocked": p.critique_problem() if p.revisions and p.stage in ("critique", "proposal") else None}


def on_the_board(unit: Unit, ctx: Context, p: Project, since: int) -> None:
    """The project's thread on the board, in the unit that changed the project: its opening is the
    thread's post, each later move and document (``p``'s events from ``since``) a reply to it, by the
    one who made it. Nobody is mentioned (the thread is a record; an owner's ``@all`` on the project's
    board then reaches everyone who took part). A thread the full board dropped starts again."""
    lines = [line for e in p.pending_events[since:] if (line := thread_line(p, e)) is not None]
    if not lines:
        return
    b = board_commands.board_in(unit, ctx)
    for line in lines:
        if p.thread is None or not b.holds(p.thread):
            head = line if p.thread is None else f"Project {p.number} (its thread, continued): {p.title}\n\n{line}"
            p.threaded(ctx, b.post(ctx, head, p.number, None, []))
        else:
            b.reply(ctx, p.thread, line, [])
    unit.add(b, p)


def _changed(cmds: Commands, ctx: Context, number: str, act) -> Done[dict]:
    """Run ``act(project, unit)`` on one project in a unit (and tell its board thread); the project's view."""
    def decide(unit: Unit) -> dict:
        require_running(unit.get)
        p = load_in(unit, number)
        since = len(p.pending_events)
        extra = act(p, unit) or {}
        on_the_board(unit, ctx, p, since)
        unit.add(p)
        return {**view(p), **extra}

    return cmds.run(decide)


def open_project(cmds: Commands, ctx: Context, kind: str, title: str, brief: str, *, role: str | None,
                 owner_flag: bool = False) -> Done[dict]:
    """The orchestrator opens a project from the owner's goal, with its brief (stage Brief)."""
    def decide(unit: Unit) -> dict:
        require_running(unit.get)
        seq = unit.get(Sequence.id_for(PROJECT_PREFIX)) or Sequence.open(ctx, PROJECT_PREFIX)
        p = Project.open(ctx, seq.issue(ctx), kind, title, brief, role=role, owner_flag=owner_flag)
        unit.add(seq, p)
        on_the_board(unit, ctx, p, 0)
        return view(p)

    return cmds.run(decide)


def research(cmds: Commands, ctx: Context, number: str, title: str, text: str, *, role: str | None) -> Done[dict]:
    return _changed(cmds, ctx, number, lambda p, u: p.attach_research(ctx, title, text, role=role))


def propose(cmds: Commands, ctx: Context, number: str, proposal: str, tasks_doc: str, spec: str | None, *,
            role: str | None) -> Done[dict]:
    return _changed(cmds, ctx, number, lambda p, u: {"proposed": p.propose(ctx, proposal, tasks_doc, spec, role=role)})


def critique(cmds: Commands, ctx: Context, number: str, text: str, revise: bool, *, role: str | None) -> Done[dict]:
    return _changed(cmds, ctx, number, lambda p, u: p.critique(ctx, text, revise, role=role))


def approve(cmds: Commands, ctx: Context, number: str, *, role: str | None = None) -> Done[dict]:
    """The Mayor's approval of the plan (an agent), or the owner's approval at any stage (the owner).
    A flagged plan the Mayor approved waits: an approval of kind ``project`` asks the owner."""
    def act(p: Project, unit: Unit) -> dict:
        if ctx.actor == "owner":
            p.owner_approve(ctx)
            _decide_pending(unit, ctx, p, True)
            return {}
        if p.mayor_approve(ctx, role=role):
            return {}
        number_ = approvals.Maker(unit, ctx).make(
            "project", f"Project {p.number} ({p.title}): the Mayor approved revision {p.revision}; it waits for you",
            agent=ctx.actor.split(":", 1)[1] if ctx.actor.startswith("agent:") else None,
            ref=project_ref(p.number), detail={"project": p.number, "revision": p.revision})
        p.asked_owner(ctx, number_)
        return {"asked": number_}

    return _changed(cmds, ctx, number, act)


def send_back(cmds: Commands, ctx: Context, number: str) -> Done[dict]:
    """The owner sends the plan back to the planner, with a reason (the context's)."""
    if not (ctx.reason or "").strip():
        raise Refusal("reason_required", "say why the project goes back (--reason)")
    return _changed(cmds, ctx, number, lambda p, u: p.send_back(ctx))


def flag(cmds: Commands, ctx: Context, number: str, on: bool) -> Done[dict]:
    return _changed(cmds, ctx, number, lambda p, u: p.flag(ctx, on))


def veto(cmds: Commands, ctx: Context, number: str) -> Done[dict]:
    """The owner's veto, at any stage before Delivered: final; a pending project approval is denied."""
    def act(p: Project, unit: Unit) -> None:
        p.veto(ctx)
        _decide_pending(unit, ctx, p, False)

    return _changed(cmds, ctx, number, act)


def _decide_pending(unit: Unit, ctx: Context, p: Project, approve: bool) -> None:
    if p.approval is None:
        return
    a = approvals.load_in(unit, p.approval)
    if a.status == "pending":
        (a.approve if approve else a.deny)(ctx)
        unit.add(a)


def decided_in(unit: Unit, ctx: Context, a: Approval, approve: bool) -> None:
    """An approval of kind ``project`` decided in the queue: approving is the owner's approval of the
    project, denying its veto (``approvals.decide_in`` records the approval's own decision)."""
    number = a.detail.get("project")
    p = unit.get(project_id(number)) if isinstance(number, str) and short_number(PROJECT_PREFIX, number) else None
    if not isinstance(p, Project) or p.ended:
        return
    since = len(p.pending_events)
    if approve and not p.owner_approved:
        p.owner_approve(ctx)
    elif not approve:
        p.veto(ctx)
    on_the_board(unit, ctx, p, since)
    unit.add(p)


def link_task(cmds: Commands, ctx: Context, number: str, title: str, acceptance: str, budget: int | None = None, *,
              details: str = "", task_role: str | None = None, role: str | None = None) -> Done[dict]:
    """A task for the approved plan, linked to the project: the task, its escrow and the link in one
    commit; refused (nothing made) before the plan is approved."""
    def decide(unit: Unit) -> dict:
        require_running(unit.get)
        p = load_in(unit, number)
        task = tasks_commands.create_in(unit, ctx, title, acceptance, budget, details=details, role=task_role,
                                        project=p.number)
        since = len(p.pending_events)
        p.link_task(ctx, task.number, role=role)
        on_the_board(unit, ctx, p, since)
        unit.add(p)
        return {"project": p.number, "task": tasks_commands.view(task)}

    return cmds.run(decide)


def task_done_in(unit: Unit, ctx: Context, project: str, task: str) -> None:
    """A task linked to ``project`` passed, in the review's unit (a task naming no project of ours: nothing)."""
    if short_number(PROJECT_PREFIX, project) != project:
        return
    p = unit.get(project_id(project))
    if isinstance(p, Project):
        since = len(p.pending_events)
        p.task_done(ctx, task)
        on_the_board(unit, ctx, p, since)
        unit.add(p)


def handed_in(unit: Unit, number: str | None) -> Handed | None:
    """The Library item ``number`` as the Library holds it (None: no such item, or no number given)."""
    if not number:
        return None
    try:
        found = unit.get(item_id(item_number(number)))
    except Refusal:
        return None
    if not isinstance(found, Item):
        return None
    return Handed(found.number, found.project, found.task, found.deleted)


def deliver(cmds: Commands, ctx: Context, number: str, title: str, text: str, item: str | None = None, *,
            role: str | None = None) -> Done[dict]:
    """The deliverable at Review: refused unless ``item`` is a Library item of this project or of one
    of its linked tasks."""
    return _changed(cmds, ctx, number, lambda p, u: p.deliver(ctx, title, text, handed_in(u, item), role=role,
                                                         asked=item))


def repo_opened(cmds: Commands, ctx: Context, number: str, repo: str) -> Done[dict]:
    """The hub made the project's repository on the plaza's git server (``runtime.projectrepo``)."""
    return _changed(cmds, ctx, number, lambda p, u: p.repo_opened(ctx, repo))


def spec_committed(cmds: Commands, ctx: Context, number: str, revision: int, path: str, commit: str) -> Done[dict]:
    """The hub kept a code project's revision in its repository as an OpenSpec change (``runtime.projectrepo``)."""
    return _changed(cmds, ctx, number, lambda p, u: p.spec_committed(ctx, revision, path, commit))
