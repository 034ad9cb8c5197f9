"""agentplaza templates list | rm KEY [--yes]: the hub machine's warm templates (node n0)."""

from __future__ import annotations

from ..env import Env
from ..output import refuse, table
from .plaza import confirm

NAME = "templates"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the hub machine's warm templates: new agents restore one instead of booting")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("list", help="the warm templates")
    rm = s.add_parser("rm", help="remove a template (agents already restored from it keep running)")
    rm.add_argument("key")
    rm.add_argument("--yes", action="store_true", help="do not ask to confirm")


def run(env: Env) -> int:
    a, c = env.args, env.client
    if a.action in (None, "list"):
        return env.show(c.get("/v1/templates"),
                        lambda d: table(d["templates"], ["key", "vcpus", "memory_mib", "bytes", "created_at"])
                        if d["templates"] else "(no warm templates)")
    if a.action == "rm":
        if not a.yes and not confirm(f"Remove template {a.key}? The next agent of its shape boots cold."):
            return refuse("templates rm not confirmed; pass --yes to skip the question", "not_confirmed")
        return env.show(c.request("DELETE", f"/v1/templates/{a.key}"), lambda d: f"template {d['removed']} removed")
    return refuse(f"unknown templates action {a.action}")
