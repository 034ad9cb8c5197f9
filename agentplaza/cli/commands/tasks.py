"""agentplaza tasks create | list | show | timeline | assign | withdraw | bids | award | workers | schedule."""

from __future__ import annotations

from ...wire import TASK_STATES
from ..actions import Action, Area, arg
from ..output import pairs, table

#: How the board names each state (its lane).
LANES = {"open": "Open", "claimed": "In progress", "done": "Done", "failed": "Failed", "withdrawn": "Withdrawn"}
LIST_COLUMNS = ["id", "title", "state", "phase", "role", "budget", "worker", "reviewer", "created_at"]
TIMELINE_COLUMNS = ["position", "at", "event", "state", "actor", "reason", "detail"]
BID_COLUMNS = ["worker", "price", "at"]
WORKER_COLUMNS = ["cid", "role", "tier", "status", "task", "work", "taken", "since"]
ID = arg("id", metavar="ID")


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
        out += "\n\n" + table(t["bids"], BID_COLUMNS)
    return out


def create_body(a) -> dict:
    body = {"title": a.title, "acceptance": a.acceptance, "details": a.details}
    return body | {k: getattr(a, k) for k in ("role", "budget", "project") if getattr(a, k) is not None}


def list_query(a) -> dict:
    """The list's filters; ``tasks`` alone lists them all (its flags are not parsed then)."""
    return {"state": getattr(a, "state", None), "role": getattr(a, "role", None),
            "worker": getattr(a, "worker", None), "limit": getattr(a, "limit", 100)}


def render_schedule(d: dict) -> str:
    return "the plaza is held: the scheduler does nothing" if d["held"] else table(d["assigned"], ["work", "task", "worker"])


AREA = Area("tasks", "tasks: create, list, show, timeline, assign, withdraw, bids and awards", (
    Action("create", "create a task; its budget moves into escrow", "POST", "/v1/tasks",
           args=(arg("title", metavar="TITLE"),
                 arg("--acceptance", required=True, help="what counts as done"),
                 arg("--role", help="the role of the worker (a task with a role is an open call for bids)"),
                 arg("--budget", type=int, help="credits moved into the task's escrow (default 2,000)"),
                 arg("--details", default="", help="the details of the work"),
                 arg("--project", help="the project it belongs to")),
           body=create_body, render=render_task),
    Action("list", "the tasks, newest first", "GET", "/v1/tasks",
           args=(arg("--state", choices=TASK_STATES), arg("--role"), arg("--worker", metavar="CID"),
                 arg("--limit", type=int, default=100)),
           query=list_query, render=lambda d: table(d["tasks"], LIST_COLUMNS), default=True),
    Action("show", "one task: its goal, acceptance, budget, worker, review, bids", "GET", "/v1/tasks/{id}",
           args=(ID,), render=render_task),
    Action("timeline", "every transition of a task, with who and why", "GET", "/v1/tasks/{id}/timeline",
           args=(ID,), render=lambda d: table(d["timeline"], TIMELINE_COLUMNS)),
    Action("bids", "the bids on an open call", "GET", "/v1/tasks/{id}/bids",
           args=(ID,), render=lambda d: table(d["bids"], BID_COLUMNS)),
    Action("assign", "give an open task to a worker", "POST", "/v1/tasks/{id}/assign",
           args=(ID, arg("worker", metavar="CID")), body=lambda a: {"worker": a.worker}, render=render_task),
    Action("withdraw", "cancel a task before it finished; its escrow returns", "POST", "/v1/tasks/{id}/withdraw",
           args=(ID, arg("--reason")), body=lambda a: {"reason": a.reason} if a.reason else {}, render=render_task),
    Action("award", "award an open call to one of its bidders", "POST", "/v1/tasks/{id}/award",
           args=(ID, arg("worker", metavar="CID")), body=lambda a: {"worker": a.worker}, render=render_task),
    Action("workers", "the workers the scheduler sees: role, idle, busy or offline", "GET", "/v1/tasks/workers",
           render=lambda d: table(d["workers"], WORKER_COLUMNS)),
    Action("schedule", "run a scheduler pass now", "POST", "/v1/tasks/schedule", render=render_schedule),
))
