"""agentplaza approvals list [--pending] | show ID | approve ID [--reason R] | deny ID [--reason R]."""

from __future__ import annotations

from ..env import Env
from ..output import pairs, table

NAME = "approvals"
KINDS = ("call", "payment", "sanction", "agent", "project", "motion", "tool_version")


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the decisions that wait for you: list, show, approve, deny")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    ls = s.add_parser("list", help="the queue, pending first in the order they came")
    ls.add_argument("--pending", action="store_true", help="only those waiting for you")
    ls.add_argument("--status", choices=["pending", "approved", "denied", "all"])
    ls.add_argument("--kind", choices=KINDS)
    ls.add_argument("--agent", metavar="CID")
    ls.add_argument("--limit", type=int, default=100)
    sh = s.add_parser("show", help="one approval: what it decides, in full")
    sh.add_argument("id", metavar="ID")
    for name, text in (("approve", "approve it (a decision is final)"), ("deny", "deny it (a decision is final)")):
        x = s.add_parser(name, help=text)
        x.add_argument("id", metavar="ID")
        x.add_argument("--reason", help="why (kept with the decision)")


def render(a: dict) -> str:
    return pairs({
        "approval": a["id"], "kind": a["kind"], "title": a["title"], "agent": a["agent"], "status": a["status"],
        "requested": f"{a['requested_at']} by {a['requested_by']}",
        "decided": f"{a['decided_at']} by {a['decided_by']}" if a["decided_at"] else None,
        "reason": a["decision_reason"], "used": a["used"] if a["kind"] == "call" else None,
        **{f"  {k}": v for k, v in (a.get("detail") or {}).items()},
    })


def run(env: Env) -> int:
    args, c = env.args, env.client
    a = args.action
    if a in (None, "list"):
        status = getattr(args, "status", None) or ("pending" if getattr(args, "pending", False) else None)
        d = c.get("/v1/approvals", status=status, kind=getattr(args, "kind", None), agent=getattr(args, "agent", None),
                  limit=getattr(args, "limit", 100))
        return env.show(d, lambda d: table(d["approvals"], ["id", "kind", "title", "agent", "status", "requested_at"]))
    if a == "show":
        return env.show(c.get(f"/v1/approvals/{args.id}"), render)
    body = {"reason": args.reason} if args.reason else {}
    return env.show(c.post(f"/v1/approvals/{args.id}/{a}", body), lambda d: render(d["approval"]))
