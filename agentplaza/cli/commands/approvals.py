"""agentplaza approvals list [--pending] | show ID | approve ID [--reason R] | deny ID [--reason R]."""

from __future__ import annotations

from ...wire import APPROVAL_KINDS, APPROVAL_STATUSES
from ..actions import Action, Area, arg
from ..output import pairs, table

LIST_COLUMNS = ["id", "kind", "title", "agent", "status", "requested_at"]


def render(a: dict) -> str:
    return pairs({
        "approval": a["id"], "kind": a["kind"], "title": a["title"], "agent": a["agent"], "status": a["status"],
        "requested": f"{a['requested_at']} by {a['requested_by']}",
        "decided": f"{a['decided_at']} by {a['decided_by']}" if a["decided_at"] else None,
        "reason": a["decision_reason"], "used": a["used"] if a["kind"] == "call" else None,
        **{f"  {k}": v for k, v in (a.get("detail") or {}).items()},
    })


def list_query(a) -> dict:
    """The queue's filters; ``approvals`` alone lists everything (its flags are not parsed then)."""
    status = getattr(a, "status", None) or ("pending" if getattr(a, "pending", False) else None)
    return {"status": status, "kind": getattr(a, "kind", None), "agent": getattr(a, "agent", None),
            "limit": getattr(a, "limit", 100)}


def decision(name: str, text: str) -> Action:
    return Action(name, text, "POST", f"/v1/approvals/{{id}}/{name}",
                  args=(arg("id", metavar="ID"), arg("--reason", help="why (kept with the decision)")),
                  body=lambda a: {"reason": a.reason} if a.reason else {}, render=lambda d: render(d["approval"]))


AREA = Area("approvals", "the decisions that wait for you: list, show, approve, deny", (
    Action("list", "the queue, pending first in the order they came", "GET", "/v1/approvals",
           args=(arg("--pending", action="store_true", help="only those waiting for you"),
                 arg("--status", choices=[*APPROVAL_STATUSES, "all"]),
                 arg("--kind", choices=APPROVAL_KINDS),
                 arg("--agent", metavar="CID"),
                 arg("--limit", type=int, default=100)),
           query=list_query, render=lambda d: table(d["approvals"], LIST_COLUMNS), default=True),
    Action("show", "one approval: what it decides, in full", "GET", "/v1/approvals/{id}",
           args=(arg("id", metavar="ID"),), render=render),
    decision("approve", "approve it (a decision is final)"),
    decision("deny", "deny it (a decision is final)"),
))
