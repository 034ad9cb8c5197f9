"""agentplaza nodes list | show NAME: the machines that run agents (node n0 is the hub's own)."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import pairs, table


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


NODE_COLUMNS = ["name", "online", "cids", "agents", "backend", "accel"]

AREA = Area("nodes", "the machines that run agents", (
    Action("list", "every node, its CID range and its agents", "GET", "/v1/nodes",
           render=lambda d: table([_row(n) for n in d["nodes"]], NODE_COLUMNS), default=True),
    Action("show", "one node with its machine facts", "GET", "/v1/nodes/{name}", args=(arg("name"),), render=_show),
))
