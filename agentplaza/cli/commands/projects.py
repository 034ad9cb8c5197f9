"""agentplaza projects list [--stage S] | show ID | approve ID [--reason R] | send-back ID --reason R |
veto ID [--reason R] | flag ID on|off."""

from __future__ import annotations

from ...wire import PROJECT_STAGES
from ..actions import Action, Area, arg
from ..output import pairs, table

LIST_COLUMNS = ["id", "kind", "title", "stage", "revision", "owner_flag", "vetoed", "updated_at"]
HISTORY_COLUMNS = ["at", "actor", "what", "revision", "title", "text"]


def render(p: dict) -> str:
    head = pairs({
        "project": p["id"], "kind": p["kind"], "title": p["title"], "stage": p["stage"] + (" (vetoed)" if p["vetoed"] else ""),
        "revision": p["revision"], "research": p["research"], "critiques": p["critiques"],
        "flagged for you": p["owner_flag"], "you approved": p["owner_approved"],
        "the Mayor approved": f"revision {p['mayor_approved']}" if p["mayor_approved"] else None,
        "approval": p["approval"], "tasks": ", ".join(p["tasks"] or []) or None, "done": p["done"],
        "repository": p.get("repo"), "specs in git": p.get("specs") if p["kind"] == "code" else None,
        "board thread": p.get("thread"),
    })
    history = [{**h, "text": (h["text"] or "").replace("\n", " ")[:80]} for h in p.get("history", [])]
    return head + "\n\n" + table(history, HISTORY_COLUMNS)


def _decision(name: str, text: str, path: str, reason_required: bool = False) -> Action:
    return Action(name, text, "POST", f"/v1/projects/{{id}}/{path}",
                  args=(arg("id", metavar="ID"),
                        arg("--reason", required=reason_required, help="why (kept with the decision)")),
                  body=lambda a: {"reason": a.reason} if a.reason else {}, render=render)


AREA = Area("projects", "list and show projects, approve a plan, send a project back, or veto it", (
    Action("list", "the projects, oldest first, each with its stage", "GET", "/v1/projects",
           args=(arg("--stage", choices=PROJECT_STAGES),), query=lambda a: {"stage": getattr(a, "stage", None)},
           render=lambda d: table(d["projects"], LIST_COLUMNS), default=True),
    Action("show", "one project: where it stands, and its documents and moves in order", "GET", "/v1/projects/{id}",
           args=(arg("id", metavar="ID"),), render=render),
    _decision("approve", "approve the project (at Approval it moves on; earlier, your approval stands)", "approve"),
    _decision("send-back", "send the plan back to the planner, with a reason", "send-back", reason_required=True),
    _decision("veto", "veto the project: it ends, and a veto is final", "veto"),
    Action("flag", "mark the project for your approval (on), or not (off), before its plan is approved", "POST",
           "/v1/projects/{id}/flag", args=(arg("id", metavar="ID"), arg("on", choices=("on", "off"))),
           body=lambda a: {"on": a.on == "on"}, render=render),
))
