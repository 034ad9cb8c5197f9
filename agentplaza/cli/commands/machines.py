"""agentplaza machines list | show ID-OR-NAME | kill ID-OR-NAME CID: the machines that run agents, their state,
load and runs (the guide: "The hub's own machine is always n0")."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import pairs, table

COLUMNS = ["id", "name", "state", "cids", "agents", "running", "memory_used_pct"]


def _row(m: dict) -> dict:
    return {"id": m["id"], "name": m["name"], "state": m["state"], "cids": m["cids"], "agents": m["load"]["agents"],
            "running": m["load"]["running"], "memory_used_pct": m["load"]["memory_used_pct"]}


def _show(d: dict) -> str:
    m = d["machine"]
    f = m.get("facts") or {}
    head = pairs({**_row(m), "hostname": f.get("hostname", "-"), "cpus": f.get("cpus", "-"),
                  "memory_mib": f.get("memory_mib", "-"), "os": f.get("os", "-"), "backend": f.get("backend", "-")})
    runs = table(m["runs"], ["cid", "name", "role", "run", "status"]) if m["runs"] else "no runs"
    return head + "\n\n" + runs


AREA = Area("machines", "the machines the plaza runs agents on", (
    Action("list", "every machine's state, load and runs", "GET", "/v1/machines",
           render=lambda d: table([_row(m) for m in d["machines"]], COLUMNS), default=True),
    Action("show", "one machine, by id (n0, n1 ...) or by name", "GET", "/v1/machines/{key}",
           args=(arg("key", metavar="ID-OR-NAME"),), render=_show),
    Action("kill", "kill a run with its VM", "POST", "/v1/machines/{key}/runs/{cid}/kill",
           args=(arg("key", metavar="ID-OR-NAME"), arg("cid", type=int)),
           confirm=lambda a: f"Kill agent {a.cid}'s run on machine {a.key}? Its VM stops now.",
           render=lambda d: f"killed the run of agent {d['killed']} on {d['machine']}"),
))
