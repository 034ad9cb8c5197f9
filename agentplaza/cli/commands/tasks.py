"""agentplaza tasks create | list | show | timeline | assign | withdraw | bids | award | workers | schedule."""

from __future__ import annotations

from ..env import Env
from ..output import pairs, table

NAME = "tasks"
STATES = ("open", "claimed", "done", "failed", "withdrawn")
LANES = {"open": "Open", "claimed": "In progress", "done": "Done", "failed": "Failed", "withdrawn": "Withdrawn"}


def register(sub) -> None:
    p = sub.add_parser(NAME, help="tasks: create, list, show, timeline, assign, withdraw, bids and awards")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    c = s.add_parser("create", help="create a task; its budget moves into escrow")
    c.add_argument("title", metavar="TITLE")
    c.add_argument("--acceptance", required=True, help="what counts as done")
    c.add_argument("--role", help="the role of the worker (a task with a role is an open call for bids)")
    c.add_argument("--budget", type=int, help="credits moved into the task's escrow (default 2,000)")
    c.add_argument("--details", default="", help="the details of the work")
    c.add_argument("--project", help="the project it belongs to")
    ls = s.add_parser("list", help="the tasks, newest first")
    ls.add_argument("--state", choices=STATES)
    ls.add_argument("--role")
    ls.add_argument("--worker", metavar="CID")
    ls.add_argument("--limit", type=int, default=100)
    for name, text in (("show", "one task: its goal, acceptance, budget, worker, review, bids"),
                       ("timeline", "every transition of a task, with who and why"),
                       ("bids", "the bids on an open call")):
        x = s.add_parser(name, help=text)
        x.add_argument("id", metavar="ID")
    a = s.add_parser("assign", help="give an open task to a worker")
    a.add_argument("id", metavar="ID")
    a.add_argument("worker", metavar="CID")
    w = s.add_parser("withdraw", help="cancel a task before it finished; its escrow returns")
    w.add_argument("id", metavar="ID")
    w.add_argument("--reason")
    aw = s.add_parser("award", help="award an open call to one of its bidders")
    aw.add_argument("id", metavar="ID")
    aw.add_argument("worker", metavar="CID")
    s.add_parser("workers", help="the workers the scheduler sees: role, idle, busy or offline")
    s.add_parser("schedule", help="run a scheduler pass now")


def render_task(t: dict) -> str:
    out = pairs({
        "task": t["id"], "title": t["title"], "state": f"{t['state']} ({LANES[t['state']]})",
        "phase": t["phase"], "role": t["role"], "budget": t["budget"], "project": t["project"],
        "worker": t["worker"], "reviewer": t["reviewer"], "acceptance": t["acceptance"],
        "details": t["details"] or None, "notes": t["notes"], "created": f"{t['created_at']} by {t['created_by']}",
    })
    if t.get("report"):
        r = t["report"]
        out += "\n\n" + pairs({"done": r["summary"], "files": ", ".join(r["files"]) or None, "checked": r["checks"]})
    if t.get("bids"):
        out += "\n\n" + table(t["bids"], ["worker", "price", "at"])
    return out


def run(env: Env) -> int:
    args, c = env.args, env.client
    a = args.action
    if a == "create":
        body = {"title": args.title, "acceptance": args.acceptance, "details": args.details}
        for k in ("role", "budget", "project"):
            if getattr(args, k) is not None:
                body[k] = getattr(args, k)
        return env.show(c.post("/v1/tasks", body), render_task)
    if a in (None, "list"):
        d = c.get("/v1/tasks", state=getattr(args, "state", None), role=getattr(args, "role", None),
                  worker=getattr(args, "worker", None), limit=getattr(args, "limit", 100))
        return env.show(d, lambda d: table(d["tasks"], ["id", "title", "state", "phase", "role", "budget",
                                                       "worker", "reviewer", "created_at"]))
    if a == "show":
        return env.show(c.get(f"/v1/tasks/{args.id}"), render_task)
    if a == "timeline":
        return env.show(c.get(f"/v1/tasks/{args.id}/timeline"),
                        lambda d: table(d["timeline"], ["position", "at", "event", "state", "actor", "reason", "detail"]))
    if a == "bids":
        return env.show(c.get(f"/v1/tasks/{args.id}/bids"), lambda d: table(d["bids"], ["worker", "price", "at"]))
    if a == "assign":
        return env.show(c.post(f"/v1/tasks/{args.id}/assign", {"worker": args.worker}), render_task)
    if a == "award":
        return env.show(c.post(f"/v1/tasks/{args.id}/award", {"worker": args.worker}), render_task)
    if a == "withdraw":
        return env.show(c.post(f"/v1/tasks/{args.id}/withdraw", {"reason": args.reason} if args.reason else {}), render_task)
    if a == "workers":
        return env.show(c.get("/v1/tasks/workers"), lambda d: table(
            d["workers"], ["cid", "role", "tier", "status", "task", "work", "taken", "since"]))
    return env.show(c.post("/v1/tasks/schedule"), lambda d: "the plaza is held: the scheduler does nothing" if d["held"]
                    else table(d["assigned"], ["work", "task", "worker"]))
