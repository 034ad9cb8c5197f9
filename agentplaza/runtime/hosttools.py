"""The host tools: what the hub does for an agent's ``plaza_*`` call, one function a tool.

Each is ``fn(session, agent, args) -> result`` (a JSON value for the model), named as the tool's
``handler`` in ``runtime.tools``. By the time one runs, its arguments fit the tool's schema and the
laws allowed the call (``HarnessSession.op_tool``). They act through ``commands`` with the agent's CID
as the actor and the role the hub gave it (never one the guest names); the rules on the values are
the domain's, and a refusal (``Refusal``) is the tool's answer.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from vmm.guest.contract import GIT_PORT, MAX_OUTPUT

from ..commands import agents as ac
from ..commands import approvals, conversations
from ..commands import board as board_commands
from ..commands import council as council_commands
from ..commands import git as git_commands
from ..commands import projects as projects_commands
from ..commands import tasks as tasks_commands
from ..domain.base import Refusal
from ..domain.names import post_number, task_number
from ..projections import board as board_rm
from ..projections import files as files_rm
from ..projections import git as git_rm
from ..projections import work as work_rm
from ..projections.agents import agents_table
from . import forge, societytools, toollib
from .files import files_of
from .library import library_of
from .work import delivery_ref

if TYPE_CHECKING:
    from .session import HarnessSession

#: The most tasks ``plaza_task_list`` returns.
MAX_TASK_LIST = 50
#: The fields of a task ``plaza_task_list`` gives, and those a claim answers with.
TASK_LIST_FIELDS = ("number", "title", "acceptance", "role", "budget", "state", "phase", "worker", "reviewer", "report")
TASK_VIEW_FIELDS = ("title", "acceptance", "details", "budget", "report")
#: The most posts ``plaza_board_read`` gives at once.
MAX_BOARD_READ = 50
#: The fields of a post ``plaza_board_read`` gives.
POST_FIELDS = ("id", "at", "author", "project", "task", "file", "mentions", "replies", "text")
#: The roster's fields as ``plaza_roster`` gives them.
ROSTER_FIELDS = ("cid", "name", "role", "status")


def plaza_status(s: HarnessSession, agent: Any, args: dict) -> dict:
    return {"held": s.rt.held(), "cid": s.cid, "role": agent.role, "name": agent.name}


def plaza_roster(s: HarnessSession, agent: Any, args: dict) -> list:
    return [{k: r[k] for k in ROSTER_FIELDS}
            for r in s.rt.hub.read_models.rows(agents_table, order_by=agents_table.c.cid)]


def plaza_toolbox(s: HarnessSession, agent: Any, args: dict) -> dict:
    return {**s.rt.toolbox(agent), "discoveries": societytools.discoveries(s)}


def plaza_message(s: HarnessSession, agent: Any, args: dict) -> dict:
    """A message in the pair's conversation, told to the recipient's queue in the same commit; a shared
    file it carries must be one the recipient may read."""
    to = args["to"]
    file = carried_file(s, args.get("file"), to)
    out = conversations.send(s.rt.cmds, s.rt.ctx_agent(s.cid), to, args["text"], file).value
    s.rt.work_for(to)
    return out


def plaza_board_read(s: HarnessSession, agent: Any, args: dict) -> dict:
    """One post with its replies (``post``), or what is new on the board since the agent last looked
    (``all``: the newest posts, new or not); the agent's read marker moves past what it was shown."""
    rm = s.rt.hub.read_models
    if args.get("post"):
        return board_rm.post_row(rm, post_number(args["post"]))
    project = args.get("project") or None
    if args.get("all"):
        rows = list(reversed(board_rm.post_rows(rm, project, limit=MAX_BOARD_READ)))
    else:
        after = board_commands.marker(s.rt.cmds, s.cid)
        rows = board_rm.post_rows(rm, project, after=after, limit=MAX_BOARD_READ, newest_first=False)
    shown = [{k: r[k] for k in POST_FIELDS} for r in rows]
    if rows:
        board_commands.seen(s.rt.cmds, s.rt.ctx_agent(s.cid), s.cid, max(r["seq"] for r in rows))
    return {"posts": shown, "paused": board_rm.is_paused(rm, project),
            "more": len(rows) == MAX_BOARD_READ}


def plaza_board_post(s: HarnessSession, agent: Any, args: dict) -> dict:
    """A post, or with ``reply_to`` a reply; its mentions go to the named agents' queues."""
    ctx, text = s.rt.ctx_agent(s.cid), args["text"]
    if args.get("reply_to"):
        if args.get("file"):
            raise Refusal("invalid_file", "a reply carries no file; post it with plaza_board_post and no reply_to")
        out = board_commands.reply(s.rt.cmds, ctx, args["reply_to"], text).value
    else:
        file = carried_file(s, args.get("file"), None)
        out = board_commands.post(s.rt.cmds, ctx, text, args.get("project"), args.get("task"), file).value
    for cid in out["delivered"]:
        s.rt.work_for(cid)
    return out


def plaza_task_list(s: HarnessSession, agent: Any, args: dict) -> list:
    t = work_rm.tasks
    rows = s.rt.hub.read_models.rows(t, t.c.state.notin_(tuple(tasks_commands.ENDED)), order_by=t.c.position,
                                     limit=MAX_TASK_LIST)
    return [{k: r[k] for k in TASK_LIST_FIELDS} for r in rows]


def plaza_task_create(s: HarnessSession, agent: Any, args: dict) -> dict:
    if args.get("project"):  # a task for an approved plan, linked to its project in the same commit
        out = projects_commands.link_task(s.rt.cmds, s.rt.ctx_agent(s.cid), args["project"], args["title"],
                                          args["acceptance"], args.get("budget"), details=args.get("details") or "",
                                          task_role=args.get("role"), role=agent.role)
        return out.value["task"]
    out = tasks_commands.create(s.rt.cmds, s.rt.ctx_agent(s.cid), args["title"], args["acceptance"], args.get("budget"),
                                details=args.get("details") or "", role=args.get("role"), parent=args.get("parent"))
    return out.value


def plaza_task_claim(s: HarnessSession, agent: Any, args: dict) -> dict:
    number, me, ctx = args["task"], str(s.cid), s.rt.ctx_agent(s.cid)
    phase = "reviewing" if args.get("review") else "working"
    s.rt.delivered.add((number, phase, me))
    if args.get("review"):
        tasks_commands.take_review(s.rt.cmds, ctx, number, me, agent.role)
    else:
        tasks_commands.claim(s.rt.cmds, ctx, number, me, agent.role)
    _took_itself(s, number, phase)
    v = tasks_commands.view(tasks_commands.load(s.rt.cmds, number))
    return {"task": number, ("reviewing" if args.get("review") else "claimed"): True,
            **{k: v[k] for k in TASK_VIEW_FIELDS}}


def plaza_task_submit(s: HarnessSession, agent: Any, args: dict) -> dict:
    number, me, ctx, cmds = args["task"], str(s.cid), s.rt.ctx_agent(s.cid), s.rt.cmds
    verdict = args.get("verdict")
    if verdict is not None:
        out = tasks_commands.review(cmds, ctx, number, me, verdict == "pass", str(args.get("notes") or ""))
        return {"task": number, "verdict": verdict, "entries": len(out.value.entries)}
    if args.get("give_up"):
        tasks_commands.give_up(cmds, ctx, number, me, str(args.get("notes") or ""))
        return {"task": number, "gave_up": True}
    files = args.get("files") or []
    if isinstance(files, str):  # "a.txt, b.txt" is taken as the list it names
        files = [f.strip() for f in files.split(",") if f.strip()]
    tasks_commands.report_done(cmds, ctx, number, me, str(args.get("summary") or ""), files, str(args.get("checks") or ""))
    return {"task": number, "reported": True}


def plaza_bid(s: HarnessSession, agent: Any, args: dict) -> dict:
    """A price on an open call for the agent's own role (the owner awards it to one of the bidders)."""
    number = args["task"]
    tasks_commands.bid(s.rt.cmds, s.rt.ctx_agent(s.cid), number, str(s.cid), agent.role, args["price"])
    return {"task": number, "bid": args["price"], "note": "the owner awards the call to one of the bidders"}


def plaza_task_cancel(s: HarnessSession, agent: Any, args: dict) -> dict:
    tasks_commands.withdraw(s.rt.cmds, s.rt.ctx_agent(s.cid), args["task"], tier=agent.tier)
    return {"task": args["task"], "withdrawn": True}


def plaza_agent_propose(s: HarnessSession, agent: Any, args: dict) -> dict:
    """The orchestrator cannot start agents; it proposes them, and the proposal waits in approvals (kind
    ``agent``); approving it starts them. Who may propose is the laws' (S-028 to S-030: the orchestrator,
    only when the owner asked in the owner's own chat: ``owner_asked``, a fact the session adds)."""
    role, count, model, why = args.get("role"), args.get("count", 1), args.get("model"), args.get("why")
    problem = approvals.detail_problem("agent", {"role": role, "count": count, "model": model})
    if problem is not None:
        raise Refusal("invalid_proposal", problem)
    if not isinstance(why, str) or not why.strip():
        raise Refusal("empty_why", "say why the owner should start these agents")
    out = approvals.request(s.rt.cmds, s.rt.ctx_agent(s.cid), "agent",
                            f"{count} new {role} agent{'s' if count > 1 else ''}, proposed by agent {s.cid}: "
                            f"{why.strip()[:200]}", agent=str(s.cid),
                            detail={"role": role, "count": count, "model": model, "why": why.strip()[:2000]})
    return {"approval": out.value, "status": "pending", "note": "nothing starts until the owner approves it in Approvals"}


def _took_itself(s: HarnessSession, number: str, phase: str) -> None:
    """What the agent claimed itself is never delivered to it, even by a hub started after."""
    t = work_rm.tasks
    rows = s.rt.hub.read_models.rows(t, t.c.number == number)
    if rows:
        s.rt._safely(ac.took_itself, s.rt.ctx_agent(s.cid), s.cid, delivery_ref(dict(rows[0], phase=phase)))


# -- the git server (runtime.forge): the laws allowed the call with the hub's facts (``git_facts``) --------

#: The most commits ``plaza_git`` log answers with, and the most characters of a diff's patch it shows.
GIT_LOG_MAX, GIT_PATCH_SHOWN = 30, 12_000
GIT_OPS = ("status", "branches", "log", "files", "diff", "open_pr", "comment", "close")


def git_facts(s: HarnessSession, agent: Any, args: dict) -> dict:
    """What the laws read about a git call, from the plaza's records (``own``: the agent's own pull
    request; ``branch``), never the model's word."""
    try:
        return forge.server_of(s.rt.hub).facts(forge.Caller(f"agent:{s.cid}"), args)
    except Refusal:
        return {}  # no such pull request: the call is decided as it is and the tool then refuses it


def _need(args: dict, *names: str) -> None:
    missing = [n for n in names if not args.get(n)]
    if missing:
        raise Refusal("invalid_request", f"plaza_git {args.get('op')} needs {', '.join(missing)}")


def plaza_git(s: HarnessSession, agent: Any, args: dict) -> Any:
    server, me, op = forge.server_of(s.rt.hub), forge.Caller(f"agent:{s.cid}"), args["op"]
    models = s.rt.hub.read_models
    if op == "status":
        return {"repos": [{k: r[k] for k in ("name", "default_branch", "branches", "open_prs")}
                          for r in git_rm.repo_rows(models)],
                "open_prs": [{k: p[k] for k in git_rm.PR_COLUMNS} for p in git_rm.pr_rows(models, None, "open", 50)],
                "clone": f"http://127.0.0.1:{GIT_PORT}/git/NAME.git"}
    if op == "branches":
        _need(args, "repo")
        return server.store.heads(args["repo"])
    if op == "log":
        _need(args, "repo")
        ref = args.get("branch") or git_commands.repo_of(s.rt.cmds, args["repo"]).default_branch
        return server.store.log(args["repo"], ref, GIT_LOG_MAX)
    if op == "files":
        _need(args, "repo")
        ref = args.get("branch") or git_commands.repo_of(s.rt.cmds, args["repo"]).default_branch
        return server.store.files(args["repo"], ref, args.get("path") or "")
    if op == "diff":
        _need(args, "pr")
        d = server.diff(args["pr"])
        return {**d, "patch": d["patch"][:GIT_PATCH_SHOWN], "truncated": d["truncated"] or len(d["patch"]) > GIT_PATCH_SHOWN}
    if op == "open_pr":
        _need(args, "repo", "source", "title")
        number = server.open_pr(me, args["repo"], args["source"], args.get("target"), args["title"],
                                args.get("body") or "", decided=True).value
        return {"pr": number, "opened": True}
    if op == "comment":
        _need(args, "pr", "text")
        return {"pr": server.comment(me, args["pr"], args["text"], decided=True).value, "commented": True}
    _need(args, "pr")
    return {"pr": server.close(me, args["pr"], decided=True).value, "closed": True}


def plaza_git_review(s: HarnessSession, agent: Any, args: dict) -> dict:
    server = forge.server_of(s.rt.hub)
    number = server.review(forge.Caller(f"agent:{s.cid}"), args["pr"], args["verdict"], args.get("text") or "",
                           decided=True).value
    return {"pr": number, "verdict": args["verdict"]}


def plaza_git_merge(s: HarnessSession, agent: Any, args: dict) -> dict:
    server = forge.server_of(s.rt.hub)
    commit = server.merge(forge.Caller(f"agent:{s.cid}"), args["pr"], args.get("method") or "auto", decided=True).value
    return {"pr": args["pr"], "merged": True, "commit": commit}


# -- the file store (runtime.files), the Library (runtime.library), the tool library (runtime.toollib) --

#: ``plaza_file_read``: the most characters of a text file, the largest binary file given as base64, and
#: the most files listed.
MAX_FILE_READ_CHARS, MAX_FILE_READ_BINARY, MAX_FILE_LIST = MAX_OUTPUT, 64 << 10, 50
#: What ``plaza_file_read`` tells of a file.
FILE_FIELDS = ("number", "filename", "path", "media_type", "size", "sha256", "owner", "public")


def carried_file(s: HarnessSession, file: str | None, to: int | None) -> str | None:
    """A shared file a message (to ``to``) or a board post (``to`` None: every agent) carries, by its
    number: one the sender may read, and that its readers may read (a post's: a public one)."""
    if not file:
        return None
    f = files_of(s.rt.hub).read(file, s.cid)[0]
    if (to is None and not f.public) or (to is not None and not f.may_read(to)):
        who = "every agent (a board post carries only a public file)" if to is None else f"agent {to}"
        raise Refusal("invalid_file", f"shared file {f.number} is not shared with {who}")
    return f.number


def _facts(f: Any) -> dict:
    return {k: getattr(f, k) for k in FILE_FIELDS}


def plaza_file_read(s: HarnessSession, agent: Any, args: dict) -> dict:
    """A shared file the agent may read, by its number; without one, the newest files it may read."""
    store = files_of(s.rt.hub)
    if not args.get("file"):
        rows = files_rm.file_rows(s.rt.hub.read_models, None, None, MAX_FILE_LIST * 4)
        mine = [r for r in rows if r["public"] or r["owner"] == s.cid or s.cid in r["agents"]][:MAX_FILE_LIST]
        return {"files": [{k: r[k] for k in FILE_FIELDS} for r in mine]}
    f, data = store.read(args["file"], s.cid)
    out = _facts(f)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        out["text"] = text[:MAX_FILE_READ_CHARS]
        out["cut"] = len(text) > MAX_FILE_READ_CHARS
    elif len(data) <= MAX_FILE_READ_BINARY:
        out["content_base64"] = base64.b64encode(data).decode()
    else:
        out["note"] = f"a binary file over {MAX_FILE_READ_BINARY // 1024} KiB: not given here"
    return out


def plaza_library_submit(s: HarnessSession, agent: Any, args: dict) -> dict:
    """Hand in a file the agent shared with ``vm.share_file`` (by its number) as a deliverable, credited to
    the agent, linked to its task or project."""
    f, data = files_of(s.rt.hub).read(args["file"], s.cid)
    if f.owner != s.cid:
        raise Refusal("no_item", f"{f.number} is not a file you shared; share yours with vm.share_file first")
    task = task_number(args["task"]) if args.get("task") else None
    out = library_of(s.rt.hub).submit(s.rt.ctx_agent(s.cid), data, f.filename, args["title"],
                                      args.get("description") or "", task, args.get("project"))
    return {"item": out.value, "submitted": True}


def plaza_tool_package(s: HarnessSession, agent: Any, args: dict) -> dict:
    """A program the agent shared, packaged as the next version of a named tool: private to it until the
    owner approves it (an approval of kind tool_version)."""
    return toollib.package(s.rt.hub, s.rt.ctx_agent(s.cid), s.cid, args["name"], args["file"],
                           args["description"]).value


# -- projects, the council and the courts (commands.projects, commands.council) ------------------------

#: What a project tool answers with: where the project stands, not its documents (``get_project``
#: and the owner's screens show those).
PROJECT_FIELDS = ("id", "kind", "title", "stage", "revision", "vetoed", "waits_for_owner", "blocked", "tasks", "done")
MOTION_FIELDS = ("id", "kind", "title", "status", "result", "decider", "moved")


def _project_answer(view: dict) -> dict:
    return {k: view[k] for k in PROJECT_FIELDS}


def project_facts(s: HarnessSession, agent: Any, args: dict) -> dict:
    """What the laws read about a project call (S-019 ``own``: the agent wrote the current revision),
    from the plaza's records, never the model's word."""
    try:
        p = projects_commands.load(s.rt.cmds, args.get("project"))
    except Refusal:
        return {}  # no such project: the call is decided as it is and the tool then refuses it
    return {"own": p.author == f"agent:{s.cid}"}


def plaza_project_open(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = projects_commands.open_project(s.rt.cmds, s.rt.ctx_agent(s.cid), args.get("kind") or "code", args["title"],
                                         args["brief"], role=agent.role)
    return _project_answer(out.value)


def plaza_project_research(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = projects_commands.research(s.rt.cmds, s.rt.ctx_agent(s.cid), args["project"], args.get("title") or "research",
                                     args["text"], role=agent.role)
    return _project_answer(out.value)


def plaza_project_propose(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = projects_commands.propose(s.rt.cmds, s.rt.ctx_agent(s.cid), args["project"], args["proposal"], args["tasks"],
                                    args.get("spec"), role=agent.role)
    return _project_answer(out.value)


def plaza_project_critique(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = projects_commands.critique(s.rt.cmds, s.rt.ctx_agent(s.cid), args["project"], args["text"],
                                     bool(args.get("revise")), role=agent.role)
    return _project_answer(out.value)


def plaza_project_approve(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = projects_commands.approve(s.rt.cmds, s.rt.ctx_agent(s.cid), args["project"], role=agent.role).value
    return {**_project_answer(out), **({"owner_approval": out["asked"]} if out.get("asked") else {})}


def plaza_project_deliver(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = projects_commands.deliver(s.rt.cmds, s.rt.ctx_agent(s.cid), args["project"], args["title"], args["text"],
                                    args.get("item"), role=agent.role)
    return _project_answer(out.value)


def plaza_council_propose(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = council_commands.propose(s.rt.cmds, s.rt.ctx_agent(s.cid), args["kind"], args["title"], args.get("text") or "",
                                   role=agent.role, amount=args.get("amount"),
                                   to=None if args.get("to") is None else str(args["to"]))
    return {k: out.value[k] for k in MOTION_FIELDS}


def plaza_council_vote(s: HarnessSession, agent: Any, args: dict) -> dict:
    out = council_commands.vote(s.rt.cmds, s.rt.ctx_agent(s.cid), args["motion"], args["vote"], args["reason"],
                                role=agent.role)
    return {k: out.value[k] for k in MOTION_FIELDS}


def case_facts(s: HarnessSession, agent: Any, args: dict) -> dict:
    """What the laws read about a ruling, from the plaza's records: S-040 ``own`` (the judge is a party
    to the case: its accused or its prosecutor) and S-041 ``sanction`` (for a ruling of violation, the
    heaviest step the sanctions schedule gives it now: a lockout, demotion, retirement or owner review
    waits for the owner's approval; ``none`` for a dismissal)."""
    try:
        c = council_commands.case_of(s.rt.cmds, args.get("case"))
    except Refusal:
        return {}
    sanction = None
    if args.get("verdict") == "violation":
        sanction = council_commands.ruling_sanction(s.rt.cmds, c["id"], s.rt.cmds.clock())
    return {"own": f"agent:{s.cid}" in (f"agent:{c['accused']}", c["prosecutor"]), "sanction": sanction or "none"}


def plaza_incident_open(s: HarnessSession, agent: Any, args: dict) -> dict:
    agent_cid = args.get("agent")
    return council_commands.open_incident(s.rt.cmds, s.rt.ctx_agent(s.cid), args["title"], args["text"],
                                          None if agent_cid is None else str(agent_cid), role=agent.role).value


def plaza_case_file(s: HarnessSession, agent: Any, args: dict) -> dict:
    return council_commands.file_case(s.rt.cmds, s.rt.ctx_agent(s.cid), str(args["accused"]), args["law"],
                                      args["severity"], args["charge"], args.get("incident"), role=agent.role).value


def plaza_case_defend(s: HarnessSession, agent: Any, args: dict) -> dict:
    return council_commands.defend(s.rt.cmds, s.rt.ctx_agent(s.cid), args["case"], args["text"], role=agent.role).value


def plaza_case_rule(s: HarnessSession, agent: Any, args: dict) -> dict:
    return council_commands.rule(s.rt.cmds, s.rt.ctx_agent(s.cid), args["case"], args["verdict"], args["text"],
                                 role=agent.role).value
