"""agentplaza society roles: the 17 built-in roles."""

from __future__ import annotations

from ..env import Env
from ..output import refuse, table

NAME = "society"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the society: roles")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("roles", help="every role an agent can be started with")


def run(env: Env) -> int:
    if env.args.action != "roles":
        return refuse("society wants an action: roles")
    return env.show(env.client.get("/v1/society/roles"), lambda d: table(d["roles"], ["role", "tier", "group", "what"]))
