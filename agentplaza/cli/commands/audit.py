"""agentplaza audit verify [--offline]: walk the hash chain of every stored event."""

from __future__ import annotations

from .. import offline
from ..env import Env
from ..output import refuse

NAME = "audit"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="check the event log")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    v = s.add_parser("verify", help="walk the hash chain of every stored event")
    v.add_argument("--offline", action="store_true", help="read the store directly, not through the hub")


def render(v: dict) -> str:
    if v["intact"]:
        return f"intact: {v['count']} events, head {v['head']}"
    return f"BROKEN at position {v['broken_at']}: {v['problem']} ({v['count']} events verify before it)"


def run(env: Env) -> int:
    if env.args.action != "verify":
        return refuse("audit wants an action: verify")
    return offline.through_hub_or_store(env, lambda c: c.get("/v1/audit/verify"), offline.verify, render)
