"""/v1/agents: spawn, the roster, the agent page, tell, the lifecycle, logs; /v1/society/roles; /v1/nodes."""

from __future__ import annotations

import anyio
import sqlalchemy as sa
from starlette.requests import Request
from starlette.routing import Route

from ...commands import agents as agent_commands
from ...domain.agents import (
    CID_RANGE_SIZE,
    LOCAL_CID_FIRST,
    LOCAL_NODE,
    roles,
    transcript_id,
)
from ...domain.models import resolve
from ...projections.agents import agents_table, transcript_table
from ..errors import ApiError, Body, read_body
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, Api
from .conduct import conduct_view

#: Transcript entries the agent page shows.
PAGE_TRANSCRIPT = 50
#: Sanctions (the conduct log's latest) the agent page shows.
PAGE_SANCTIONS = 20
ROSTER_COLUMNS = ("cid", "name", "role", "status", "run", "model", "permission_mode", "node", "generation", "queue",
                  "working_on", "entries", "forked_from", "fork_checkpoint", "created_at", "changed_at")


class SpawnBody(Body):
    role: str
    count: int = 1
    model: str | None = None


class PatchBody(Body):
    name: str | None = None
    model: str | None = None
    permission_mode: str | None = None


class TellBody(Body):
    text: str


class ActionBody(Body):
    reason: str | None = None


class CheckpointBody(Body):
    name: str | None = None
    label: str | None = None


class RollbackBody(Body):
    name: str


class ForkBody(Body):
    n: int = 1
    checkpoint: str | None = None


def policy_of(hub: Hub) -> dict | None:
    row = hub.read_models.states["models"].rows.get("rm_model_policy", "policy")
    return row["policy"] if row else None


def agent_view(row: dict, policy: dict | None = None) -> dict:
    """``model`` is the agent's own (or None); ``resolved_model`` the one it thinks with, and
    ``model_source`` where that comes from: agent (set for it), role (its role's) or default."""
    view = {k: row[k] for k in ROSTER_COLUMNS}
    if policy is not None:
        r = resolve(policy, row["role"], row["model"])
        view["resolved_model"], view["model_source"] = r.model, r.source
    else:
        view["resolved_model"], view["model_source"] = row["model"], "agent" if row["model"] else "default"
    return view


def roster(hub: Hub, role: str | None = None) -> list[dict]:
    where = [agents_table.c.role == role] if role else []
    policy = policy_of(hub)
    return [agent_view(r, policy) for r in hub.read_models.rows(agents_table, *where, order_by=agents_table.c.cid)]


def agent_row(hub: Hub, cid: int) -> dict:
    rows = hub.read_models.rows(agents_table, agents_table.c.cid == cid)
    if not rows:
        raise ApiError("unknown_agent", f"no agent with cid {cid}")
    return rows[0]


def transcript(hub: Hub, cid: int, after: int = 0, limit: int = PAGE_TRANSCRIPT, tail: bool = False) -> list[dict]:
    row = agent_row(hub, cid)
    import uuid

    tid = transcript_id(uuid.UUID(hex=row["agent_id"])).hex
    t = transcript_table
    if tail:
        rows = hub.read_models.rows(t, t.c.transcript_id == tid, order_by=sa.desc(t.c.seq), limit=limit)
        rows.reverse()
    else:
        rows = hub.read_models.rows(t, t.c.transcript_id == tid, t.c.seq > after, order_by=t.c.seq, limit=limit)
    return [{k: r[k] for k in ("seq", "at", "actor", "kind", "tool", "text", "detail")} for r in rows]


def agent_page(hub: Hub, cid: int) -> dict:
    """The agent page: the profile, the transcript's last entries, and its conduct (the suspensions in
    force, each liftable at /v1/conduct/{cid}/suspensions/{id}/lift, and the sanctions it received)."""
    row = agent_row(hub, cid)
    return {"agent": agent_view(row, policy_of(hub)), "transcript": transcript(hub, cid, tail=True),
            "conduct": conduct_view(hub, str(cid), PAGE_SANCTIONS)}


def nodes(hub: Hub) -> list[dict]:
    """Node n0: its CID range and agents from the records, its facts live from its daemon."""
    rt = hub.runtime
    count = len(hub.read_models.rows(agents_table, agents_table.c.node == LOCAL_NODE))
    return [{"name": LOCAL_NODE, "cid_first": LOCAL_CID_FIRST, "cid_last": LOCAL_CID_FIRST + CID_RANGE_SIZE - 1,
             "agents": count, "online": bool(rt is not None and rt.link is not None and rt.link.up),
             "facts": dict(rt.facts) if rt is not None else {},
             "egress": rt.egress.policy.view() if rt is not None else None}]


def overview_counts(hub: Hub) -> dict:
    """The overview's agents line: how many, by status."""
    by: dict[str, int] = {}
    for r in hub.read_models.rows(agents_table):
        by[r["status"]] = by.get(r["status"], 0) + 1
    return {"total": sum(by.values()), "by_status": dict(sorted(by.items()))}


def routes(api: Api) -> list:
    hub = api.hub

    def cid_of(request: Request) -> int:
        raw = request.path_params["cid"]
        if not raw.isdigit() or len(raw) > 9:
            raise ApiError("invalid_request", "a cid is a number")
        return int(raw)

    def kick() -> None:
        if hub.runtime is not None:
            hub.runtime.kick()

    async def create(request: Request) -> dict:
        body = await read_body(request, SpawnBody)
        ctx = api.context(request, f"spawn {body.count} {body.role}")
        cids = await api.command(lambda: agent_commands.spawn(hub.commands, ctx, body.role, body.count, body.model))
        kick()
        return {"agents": [agent_view(agent_row(hub, c), policy_of(hub)) for c in cids]}

    async def list_(request: Request) -> dict:
        return {"agents": await api.query(roster, hub, request.query_params.get("role") or None)}

    async def show(request: Request) -> dict:
        return await api.query(agent_page, hub, cid_of(request))

    async def patch(request: Request) -> dict:
        cid = cid_of(request)
        body = await read_body(request, PatchBody)
        changes = body.model_dump(exclude_unset=True)
        if not changes:
            raise ApiError("invalid_request", "nothing to change: send name, model or permission_mode")
        if "name" in changes and changes["name"] is None:
            raise ApiError("invalid_request", "name: a name cannot be cleared")
        if "permission_mode" in changes and changes["permission_mode"] is None:
            raise ApiError("invalid_request", "permission_mode: one of autonomous, ask, read-only")
        ctx = api.context(request)
        await api.command(lambda: agent_commands.update(hub.commands, ctx, cid, changes))
        return await api.query(agent_page, hub, cid)

    async def tell(request: Request) -> dict:
        cid = cid_of(request)
        body = await read_body(request, TellBody)
        ctx = api.context(request)
        item = await api.command(lambda: agent_commands.tell(hub.commands, ctx, cid, body.text))
        if hub.runtime is not None:
            hub.runtime.work_for(cid)
        return {"item": item, "agent": agent_view(await api.query(agent_row, hub, cid), policy_of(hub))}

    def action(name: str):
        command = getattr(agent_commands, name)

        async def act(request: Request) -> dict:
            cid = cid_of(request)
            body = await read_body(request, ActionBody)
            ctx = api.context(request, body.reason)
            await api.command(lambda: command(hub.commands, ctx, cid))
            kick()
            return {"agent": agent_view(await api.query(agent_row, hub, cid), policy_of(hub))}

        act.__name__ = name
        return act

    def node_runtime():
        if hub.runtime is None or hub.runtime.link is None:
            raise ApiError("no_node", "this hub runs without a node; it has no warm templates")
        return hub.runtime

    async def list_templates(request: Request) -> dict:
        rt = node_runtime()
        return await anyio.to_thread.run_sync(rt.templates)

    async def remove_template(request: Request) -> dict:
        rt = node_runtime()
        key = request.path_params["key"]
        await anyio.to_thread.run_sync(lambda: rt.template_rm(key))
        return {"removed": key}

    async def cancel(request: Request) -> dict:
        """Cancel work: the item the agent runs now ends cancelled; its harness stops it at its next step."""
        cid = cid_of(request)
        body = await read_body(request, ActionBody)
        if hub.runtime is None:
            raise ApiError("no_node", "this hub runs without a node; no agent runs work")
        item = await anyio.to_thread.run_sync(lambda: hub.runtime.cancel_work(cid, body.reason))
        hub.read_models.catch_up()
        return {"cancelled": item, "agent": agent_view(agent_row(hub, cid), policy_of(hub))}

    async def delete(request: Request) -> dict:
        cid = cid_of(request)
        ctx = api.context(request)
        await api.query(agent_row, hub, cid)
        await api.command(lambda: agent_commands.delete(hub.commands, ctx, cid))
        kick()
        return {"deleted": cid}

    async def logs(request: Request) -> dict:
        cid = cid_of(request)
        after = api.int_param(request, "after", 0, 0)
        limit = api.int_param(request, "limit", 200, 1, MAX_LIST_LIMIT)
        return {"cid": cid, "transcript": await api.query(transcript, hub, cid, after, limit)}

    async def society_roles(request: Request) -> dict:
        return {"roles": roles()}

    async def show_node(request: Request) -> dict:
        name = request.path_params["name"]
        found = [n for n in await api.query(nodes, hub) if n["name"] == name]
        if not found:
            raise ApiError("unknown_node", f"no node {name!r}; this hub has node {LOCAL_NODE} (see nodes list)")
        return {"node": found[0]}

    async def list_nodes(request: Request) -> dict:
        return {"nodes": await api.query(nodes, hub)}

    async def on_machine(cid: int, op: str, **meta) -> dict:
        if hub.runtime is None:
            raise ApiError("no_node", "this hub runs without a node; agents have no machines")
        return await anyio.to_thread.run_sync(lambda: hub.runtime.checkpoint_op(cid, op, **meta))

    async def checkpoint(request: Request) -> dict:
        body = await read_body(request, CheckpointBody)
        return await on_machine(cid_of(request), "checkpoint", name=body.name, label=body.label)

    async def checkpoints(request: Request) -> dict:
        return await on_machine(cid_of(request), "checkpoints")

    async def rollback(request: Request) -> dict:
        body = await read_body(request, RollbackBody)
        return await on_machine(cid_of(request), "rollback", name=body.name)

    async def checkpoint_delete(request: Request) -> dict:
        return await on_machine(cid_of(request), "checkpoint_delete", name=request.path_params["name"])

    async def fork(request: Request) -> dict:
        cid = cid_of(request)
        body = await read_body(request, ForkBody)
        if hub.runtime is None:
            raise ApiError("no_node", "this hub runs without a node; agents have no machines to fork")
        ctx = api.context(request, f"fork agent {cid}")
        done = await anyio.to_thread.run_sync(lambda: hub.runtime.fork(cid, body.n, body.checkpoint, ctx))
        hub.read_models.catch_up()
        return {"checkpoint": done["checkpoint"], "source": cid,
                "forks": [agent_view(agent_row(hub, c), policy_of(hub)) for c in done["forks"]]}

    return [
        Route("/v1/agents/{cid}/fork", api.endpoint(fork), methods=["POST"]),
        Route("/v1/agents/{cid}/cancel", api.endpoint(cancel), methods=["POST"]),
        Route("/v1/agents/{cid}/checkpoint", api.endpoint(checkpoint), methods=["POST"]),
        Route("/v1/agents/{cid}/checkpoints", api.endpoint(checkpoints), methods=["GET"]),
        Route("/v1/agents/{cid}/rollback", api.endpoint(rollback), methods=["POST"]),
        Route("/v1/agents/{cid}/checkpoints/{name}", api.endpoint(checkpoint_delete), methods=["DELETE"]),
        Route("/v1/agents", api.endpoint(create), methods=["POST"]),
        Route("/v1/agents", api.endpoint(list_), methods=["GET"]),
        Route("/v1/agents/{cid}", api.endpoint(show), methods=["GET"]),
        Route("/v1/agents/{cid}", api.endpoint(patch), methods=["PATCH"]),
        Route("/v1/agents/{cid}", api.endpoint(delete), methods=["DELETE"]),
        Route("/v1/agents/{cid}/tell", api.endpoint(tell), methods=["POST"]),
        *[Route(f"/v1/agents/{{cid}}/{n}", api.endpoint(action(n)), methods=["POST"])
          for n in ("stop", "restart", "wipe", "retire", "sleep", "wake")],
        Route("/v1/agents/{cid}/logs", api.endpoint(logs)),
        Route("/v1/society/roles", api.endpoint(society_roles)),
        Route("/v1/nodes", api.endpoint(list_nodes)),
        Route("/v1/nodes/{name}", api.endpoint(show_node)),
        Route("/v1/templates", api.endpoint(list_templates)),
        Route("/v1/templates/{key}", api.endpoint(remove_template), methods=["DELETE"]),
    ]
