"""agentplaza plaza state | stop [--reason R] [--yes] | resume | history."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import pairs, table


def render(s: dict) -> str:
    return pairs({"state": s["state"], "since": s["since"], "by": s["by"], "reason": s["reason"]})


AREA = Area("plaza", "the plaza's state, STOP ALL and resume", (
    Action("state", "held or running, since when, by whom, why", "GET", "/v1/plaza", render=render, default=True),
    Action("stop", "STOP ALL: hold the whole plaza", "POST", "/v1/plaza/stop",
           args=(arg("--reason", help="why you hold it (shown in the banner; the hold records none without it)"),),
           body=lambda a: {"reason": a.reason} if a.reason is not None else {},
           confirm=lambda a: "STOP ALL holds the whole plaza. Continue?", render=render),
    Action("resume", "release the hold", "POST", "/v1/plaza/resume",
           args=(arg("--reason", help="why you resume"),),
           body=lambda a: {"reason": a.reason} if a.reason else {}, render=render),
    Action("history", "every stop and resume, newest first", "GET", "/v1/plaza/history",
           args=(arg("--limit", type=int, default=20),),
           query=lambda a: {"limit": a.limit}, render=lambda d: table(d["history"])),
))
