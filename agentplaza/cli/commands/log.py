"""agentplaza log unreadable | void POSITION --reason R [--yes]: events the store cannot read back."""

from __future__ import annotations

from ..env import Env
from ..output import refuse, table
from .plaza import confirm

NAME = "log"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="events in the log that cannot be read back, and voiding one")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("unreadable", help="every stored event that cannot be read back, and whether it is voided")
    void = s.add_parser("void", help="record that an unreadable event is seen and the plaza goes on without it")
    void.add_argument("position", type=int, help="the position the hub named")
    void.add_argument("--reason", required=True, help="why (the log's only account of the gap)")
    void.add_argument("--yes", action="store_true", help="do not ask to confirm")


def render_list(d: dict) -> str:
    rows = d["unreadable"]
    return table(rows) if rows else "every stored event reads back"


def render_voided(d: dict) -> str:
    v = d["voided"]
    return f"voided position {v['position']} at position {v.get('voided_at')}"


def run(env: Env) -> int:
    args, c = env.args, env.client
    if args.action in (None, "unreadable"):
        return env.show(c.get("/v1/log/unreadable"), render_list)
    if not args.yes and not confirm(f"Void the unreadable event at position {args.position}? The log keeps it."):
        return refuse("log void not confirmed; pass --yes to skip the question", "not_confirmed")
    return env.show(c.post("/v1/log/void", {"position": args.position, "reason": args.reason}), render_voided)
