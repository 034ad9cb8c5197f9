"""agentplaza plaza state | stop --reason R [--yes] | resume | history."""

from __future__ import annotations

import sys

from ..env import Env
from ..output import pairs, refuse, table

NAME = "plaza"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the plaza's state, STOP ALL and resume")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("state", help="held or running, since when, by whom, why")
    stop = s.add_parser("stop", help="STOP ALL: hold the whole plaza")
    stop.add_argument("--reason", required=True, help="why you hold it (shown in the banner)")
    stop.add_argument("--yes", action="store_true", help="do not ask to confirm")
    resume = s.add_parser("resume", help="release the hold")
    resume.add_argument("--reason", help="why you resume")
    hist = s.add_parser("history", help="every stop and resume, newest first")
    hist.add_argument("--limit", type=int, default=20)


def render(s: dict) -> str:
    return pairs({"state": s["state"], "since": s["since"], "by": s["by"], "reason": s["reason"]})


def confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def run(env: Env) -> int:
    args, c = env.args, env.client
    if args.action in (None, "state"):
        return env.show(c.get("/v1/plaza"), render)
    if args.action == "stop":
        if not args.yes and not confirm("STOP ALL holds the whole plaza. Continue?"):
            return refuse("plaza stop not confirmed; pass --yes to skip the question", "not_confirmed")
        return env.show(c.post("/v1/plaza/stop", {"reason": args.reason}), render)
    if args.action == "resume":
        return env.show(c.post("/v1/plaza/resume", {"reason": args.reason} if args.reason else {}), render)
    return env.show(c.get("/v1/plaza/history", limit=args.limit), lambda d: table(d["history"]))
