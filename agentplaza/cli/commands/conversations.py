"""agentplaza conversations list [--party owner|CID] | show ID: the threads between agents (``3~5``) and
the owner's with each agent (``owner~3``)."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import table

LIST_COLUMNS = ["id", "messages", "last_at", "last_text"]


def render_show(d: dict) -> str:
    lines = [f"conversation {d['id']}: {d['messages']} message(s)"]
    for m in d["thread"]:
        carried = f" [file {m['file']}]" if m.get("file") else ""
        lines += ["", f"-- {m['sender']} to {m['to']}, {m['at']}{carried}", m["text"].rstrip()]
    return "\n".join(lines)


AREA = Area("conversations", "the threads between agents, and the owner's with each agent", (
    Action("list", "the threads, the latest first", "GET", "/v1/conversations",
           args=(arg("--party", help="only the threads of owner or of this CID"), arg("--limit", type=int, default=100)),
           query=lambda a: {k: v for k, v in (("party", a.party), ("limit", a.limit)) if v is not None},
           render=lambda d: table(d["conversations"], LIST_COLUMNS), default=True),
    Action("show", "one thread, its messages in order", "GET", "/v1/conversations/{id}",
           args=(arg("id", help="the thread, like 3~5 or owner~3"),), render=render_show),
))
