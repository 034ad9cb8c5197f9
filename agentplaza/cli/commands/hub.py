"""agentplaza hub status: which hub this command talks to."""

from __future__ import annotations

from ..env import Env
from ..output import pairs, refuse

NAME = "hub"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the hub this command talks to")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("status", help="the hub's version, address, store and position")


def run(env: Env) -> int:
    if env.args.action != "status":
        return refuse("hub wants an action: status")
    return env.show(env.client.get("/v1/hub"), lambda d: pairs({
        "address": d["address"], "version": d["version"],
        "store": f"{d['store']['backend']} {d['store']['where']}",
        "position": d["position"], "read models at": d["projections_at"], "started": d["started_at"],
    }))
