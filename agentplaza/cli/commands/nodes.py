"""agentplaza nodes list | show NAME: the machines that run agents (node n0 is the hub's own)."""

from __future__ import annotations

from ..env import Env
from ..output import pairs, refuse, table

NAME = "nodes"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the machines that run agents")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("list", help="every node, its CID range and its agents")
    sh = s.add_parser("show", help="one node with its machine facts")
    sh.add_argument("name")


def _row(n: dict) -> dict:
    f = n.get("facts") or {}
    return {"name": n["name"], "online": "yes" if n["online"] else "no", "cids": f"{n['cid_first']}-{n['cid_last']}",
            "agents": n["agents"], "backend": f.get("backend", "-"), "accel": f.get("accel", "-"),
            "isolation": f.get("isolation", "-")}


def _show(d: dict) -> str:
    n = d["node"]
    f = n.get("facts") or {}
    egress = n.get("egress") or {}
    return pairs({**_row(n), "cpus": f.get("cpus", "-"), "memory_mib": f.get("memory_mib", "-"),
                  "os": f.get("os", "-"), "kernel": f.get("kernel", "-"),
                  "egress": f"{egress.get('egress', '-')} (ports {', '.join(map(str, egress.get('ports') or []))})"
                  if egress else "-"})


def run(env: Env) -> int:
    a, c = env.args, env.client
    if a.action in (None, "list"):
        return env.show(c.get("/v1/nodes"), lambda d: table([_row(n) for n in d["nodes"]],
                                                             ["name", "online", "cids", "agents", "backend", "accel"]))
    if a.action == "show":
        return env.show(c.get(f"/v1/nodes/{a.name}"), _show)
    return refuse(f"unknown nodes action {a.action}")
