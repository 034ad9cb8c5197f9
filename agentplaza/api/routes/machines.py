"""The Machines list: every machine the plaza runs agents on, its state, load and runs (``/v1/machines``).

The guide, "Machines, nodes and the floor": "agentplaza machines show n0 shows one machine by id or by
name, and agentplaza machines list shows every machine's state, load and runs. The hub's own machine is
always n0."  A machine's id is its node's (n0, n1 ...); its name is the label it joined with or its host
name.  ``kill`` ends one run: the agent's VM is stopped at once on its machine and the agent is recorded
stopped (starting it again is the owner's).
"""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.routing import Route

from ...commands import agents as agent_commands
from ...domain.agents import LOCAL_NODE
from ...domain.base import Refusal
from ...projections.agents import agents_table
from ..errors import ApiError, Body, read_body
from ..kit import api_of, endpoint
from .agents import cid_of, kick, nodes

#: A machine is "offline", "revoked", "draining" or "online" (the first that holds, in that order).
STATES = ("revoked", "offline", "draining", "online")


class KillBody(Body):
    reason: str | None = None


def state_of(n: dict) -> str:
    if n.get("revoked"):
        return "revoked"
    if not n.get("online"):
        return "offline"
    return "draining" if n.get("draining") else "online"


def machines(hub) -> list[dict]:
    rows = hub.read_models.rows(agents_table)
    out = []
    for n in nodes(hub):
        f = n.get("facts") or {}
        runs = [{"cid": r["cid"], "name": r["name"], "role": r["role"], "run": r["run"], "status": r["status"]}
                for r in rows if r["node"] == n["name"]]
        mem, free = f.get("memory_mib"), f.get("memory_free_mib")
        out.append({"id": n["name"], "name": n.get("label") or f.get("hostname") or n["name"], "state": state_of(n),
                    "hub": n["name"] == LOCAL_NODE, "cids": f"{n['cid_first']}-{n['cid_last']}",
                    "load": {"agents": n["agents"], "running": sum(1 for r in runs if r["run"] == "running"),
                             "memory_used_pct": round(100 * (mem - free) / mem) if mem and free is not None else None},
                    "facts": f, "runs": runs})
    return out


def find(hub, key: str) -> dict:
    found = [m for m in machines(hub) if key in (m["id"], m["name"])]
    if not found:
        raise ApiError("unknown_node", f"no machine {key!r} (by id or name; the hub's own is n0; see machines list)")
    return found[0]


@endpoint
async def list_machines(request: Request) -> dict:
    api = api_of(request)
    return {"machines": await api.query(machines, api.hub)}


@endpoint
async def show_machine(request: Request) -> dict:
    api = api_of(request)
    return {"machine": await api.query(find, api.hub, request.path_params["key"])}


@endpoint
async def kill(request: Request) -> dict:
    """End one run on a machine: its VM stopped now, the agent recorded stopped."""
    api = api_of(request)
    hub = api.hub
    m = await api.query(find, hub, request.path_params["key"])
    cid = cid_of(request)
    body = await read_body(request, KillBody)
    if not any(r["cid"] == cid for r in m["runs"]):
        raise ApiError("unknown_agent", f"machine {m['id']} runs no agent {cid}")
    if hub.runtime is None:
        raise ApiError("no_node", "this hub runs without a node; no machine runs")
    ctx = api.context(request, body.reason or f"killed on machine {m['id']}")
    try:
        await api.command(lambda: agent_commands.stop(hub.commands, ctx, cid))
    except Refusal as r:
        if r.code != "agent_stopped":
            raise
    await anyio.to_thread.run_sync(hub.runtime.kill, cid)
    kick(hub)
    return {"killed": cid, "machine": m["id"]}


ROUTES = [
    Route("/v1/machines", list_machines),
    Route("/v1/machines/{key}", show_machine),
    Route("/v1/machines/{key}/runs/{cid}/kill", kill, methods=["POST"]),
]
