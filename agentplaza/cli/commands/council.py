"""agentplaza council list [--status S] | show ID | decide ID approve|reject [--reason R]."""

from __future__ import annotations

from ...wire import MOTION_STATUSES, OWNER_DECISIONS
from ..actions import Action, Area, arg
from ..output import pairs, table

LIST_COLUMNS = ["id", "kind", "title", "seat", "amount", "status", "result", "at"]
VOTE_COLUMNS = ["seat", "vote", "by", "why"]


def render(m: dict) -> str:
    owner = m.get("owner")
    head = pairs({
        "motion": m["id"], "kind": m["kind"], "title": m["title"], "text": m["text"] or None,
        "proposed by": m["seat"], "amount": m["amount"], "to": m["to"], "status": m["status"], "count": m["result"],
        "your decision": (("approved" if owner["approve"] else "rejected") + (f": {owner['note']}" if owner["note"] else ""))
        if owner else None,
        "moved": (m.get("moved") or {}).get("note"),
    })
    votes = [{"seat": s, **v} for s, v in sorted((m.get("votes") or {}).items())]
    return head + "\n\n" + table(votes, VOTE_COLUMNS)


AREA = Area("council", "list and show motions, and decide one the count gives to you", (
    Action("list", "the motions, oldest first", "GET", "/v1/council/motions",
           args=(arg("--status", choices=MOTION_STATUSES),), query=lambda a: {"status": getattr(a, "status", None)},
           render=lambda d: table(d["motions"], LIST_COLUMNS), default=True),
    Action("show", "one motion with the seats' votes", "GET", "/v1/council/motions/{id}",
           args=(arg("id", metavar="ID"),), render=render),
    Action("decide", "decide a tie or a carried motion that needs you: approve or reject (final)", "POST",
           "/v1/council/motions/{id}/decide",
           args=(arg("id", metavar="ID"), arg("decision", choices=OWNER_DECISIONS),
                 arg("--reason", help="your note (kept with the decision)")),
           body=lambda a: {"decision": a.decision, **({"reason": a.reason} if a.reason else {})}, render=render),
))
