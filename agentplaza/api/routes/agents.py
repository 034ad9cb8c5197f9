"""/v1/agents: spawn, the roster, the agent page, tell, the lifecycle, logs; /v1/society/roles; /v1/nodes."""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.routing import Route

from ...commands import agents as agent_commands
from ...domain.agents import CID_RANGE_SIZE, LOCAL_CID_FIRST, LOCAL_NODE, roles
from ...projections import agents as rm
from ...projections.nodes import joined as joined_nodes
from ..errors import ApiError, Body, read_body
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, Api, api_of, endpoint

#: The lifecycle actions, each POST /v1/agents/{cid}/<name> and the command of that name.
LIFECYCLE = ("stop", "restart", "wipe", "retire", "sleep", "wake")


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


class MoveBody(Body):
    node: str


class ForkBody(Body):
    n: int = 1
    checkpoint: str | None = None


def nodes(hub: Hub) -> list[dict]:
    """Node n0: its CID range and agents from the records, its facts live from its daemon."""
    rt = hub.runtime
    count = rm.agents_on(hub.read_models, LOCAL_NODE)
    return [{"name": LOCAL_NODE, "cid_first": LOCAL_CID_FIRST, "cid_last": LOCAL_CID_FIRST + CID_RANGE_SIZE - 1,
             "agents": count, "online": bool(rt is not None and rt.link is not None and rt.link.up),
             "facts": dict(rt.facts) if rt is not None else {},
             "egress": rt.egress.policy.view() if rt is not None else None},
            *({"name": j["name"], "label": j["label"], "cid_first": j["cid_first"], "cid_last": j["cid_last"],
               "agents": rm.agents_on(hub.read_models, j["name"]),
               # live, never events: connected now and heard from within 60 s (runtime.joined)
               "online": bool(rt is not None and rt.online(j["name"])),
               "last_heard": rt.joined.last_heard(j["name"]) if rt is not None else None,
               "draining": bool(j.get("draining")), "revoked": j.get("revoked_at") is not None,
               "revoked_at": j.get("revoked_at"),
               "joined_at": j["joined_at"], "facts": rt.node_facts(j["name"]) if rt is not None else {},
               "egress": None} for j in joined_nodes(hub.read_models))]


def cid_of(request: Request) -> int:
    raw = request.path_params["cid"]
    if not raw.isdigit() or len(raw) > 9:
        raise ApiError("invalid_request", "a cid is a number")
    return int(raw)


def kick(hub: Hub) -> None:
    if hub.runtime is not None:
        hub.runtime.kick()


def page_of(api: Api, cid: int) -> dict:
    """The agent page as it stands now (the hub's clock)."""
    return rm.agent_page(api.hub.read_models, api.hub.commands.clock().isoformat(), cid)


async def refuse_unbootable(hub) -> None:
    """An agent is not made on a node that cannot boot its microVM: the owner hears why at once, not
    from an agent that never starts. A hub run with no node (``--node off``) makes agents for a later one."""
    rt = hub.runtime
    if rt is None or rt.link is None:
        return
    found = await anyio.to_thread.run_sync(rt.boot_blockers)
    if found:
        raise ApiError("node_cannot_boot", "this machine cannot boot an agent's microVM: " + "; ".join(found)
                       + " (bash scripts/install.sh installs what is missing; agentplaza doctor checks)")


@endpoint
async def create(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    body = await read_body(request, SpawnBody)
    # Placement (domain.placement): the eligible joined node with the highest score, else n0.
    where = LOCAL_NODE if hub.runtime is None else await anyio.to_thread.run_sync(hub.runtime.place, body.role, body.count)
    if where == LOCAL_NODE:
        await refuse_unbootable(hub)  # n0: its noded says whether it fits
    ctx = api.context(request, f"spawn {body.count} {body.role}")
    cids = await api.command(lambda: agent_commands.spawn(hub.commands, ctx, body.role, body.count, body.model, where))
    kick(hub)
    return {"agents": [rm.agent_of(hub.read_models, c) for c in cids]}


@endpoint
async def list_(request: Request) -> dict:
    api = api_of(request)
    return {"agents": await api.query(rm.roster, api.hub.read_models, request.query_params.get("role") or None)}


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    return await api.query(page_of, api, cid_of(request))


@endpoint
async def patch(request: Request) -> dict:
    api = api_of(request)
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
    await api.command(lambda: agent_commands.update(api.hub.commands, ctx, cid, changes))
    return await api.query(page_of, api, cid)


@endpoint
async def tell(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    cid = cid_of(request)
    body = await read_body(request, TellBody)
    ctx = api.context(request)
    item = await api.command(lambda: agent_commands.tell(hub.commands, ctx, cid, body.text))
    if hub.runtime is not None:
        hub.runtime.work_for(cid)
    return {"item": item, "agent": await api.query(rm.agent_of, hub.read_models, cid)}


def action(name: str):
    """The route of one lifecycle action: its command, then the agent as it is now."""
    command = getattr(agent_commands, name)

    async def act(request: Request) -> dict:
        api = api_of(request)
        cid = cid_of(request)
        body = await read_body(request, ActionBody)
        ctx = api.context(request, body.reason)
        await api.command(lambda: command(api.hub.commands, ctx, cid))
        kick(api.hub)
        return {"agent": await api.query(rm.agent_of, api.hub.read_models, cid)}

    act.__name__ = name
    return endpoint(act)


def node_runtime(hub: Hub):
    if hub.runtime is None or hub.runtime.link is None:
        raise ApiError("no_node", "this hub runs without a node; it has no warm templates")
    return hub.runtime


@endpoint
async def list_templates(request: Request) -> dict:
    rt = node_runtime(api_of(request).hub)
    return await anyio.to_thread.run_sync(rt.templates)


@endpoint
async def remove_template(request: Request) -> dict:
    rt = node_runtime(api_of(request).hub)
    key = request.path_params["key"]
    await anyio.to_thread.run_sync(lambda: rt.template_rm(key))
    return {"removed": key}


@endpoint
async def cancel(request: Request) -> dict:
    """Cancel work: the item the agent runs now ends cancelled; its harness stops it at its next step."""
    hub = api_of(request).hub
    cid = cid_of(request)
    body = await read_body(request, ActionBody)
    if hub.runtime is None:
        raise ApiError("no_node", "this hub runs without a node; no agent runs work")
    item = await anyio.to_thread.run_sync(lambda: hub.runtime.cancel_work(cid, body.reason))
    hub.read_models.catch_up()
    return {"cancelled": item, "agent": rm.agent_of(hub.read_models, cid)}


@endpoint
async def delete(request: Request) -> dict:
    api = api_of(request)
    cid = cid_of(request)
    ctx = api.context(request)
    await api.query(rm.agent_row, api.hub.read_models, cid)
    await api.command(lambda: agent_commands.delete(api.hub.commands, ctx, cid))
    kick(api.hub)
    return {"deleted": cid}


#: ``tail`` on /v1/agents/{cid}/logs: the transcript's last ``limit`` entries (oldest first) instead of the
#: first ones after ``after``.
TAIL_VALUES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


@endpoint
async def logs(request: Request) -> dict:
    api = api_of(request)
    cid = cid_of(request)
    after = api.int_param(request, "after", 0, 0)
    limit = api.int_param(request, "limit", 200, 1, MAX_LIST_LIMIT)
    given = request.query_params.get("tail")
    if given is not None and given.lower() not in TAIL_VALUES:
        raise ApiError("invalid_request", "tail is one of 1, true, yes, 0, false, no")
    tail = TAIL_VALUES.get((given or "0").lower(), False)
    if tail and after:
        raise ApiError("invalid_request", "tail reads the last entries; it does not take after")
    return {"cid": cid, "transcript": await api.query(rm.transcript, api.hub.read_models, cid, after, limit, tail)}


@endpoint
async def society_roles(request: Request) -> dict:
    return {"roles": roles()}


@endpoint
async def show_node(request: Request) -> dict:
    api = api_of(request)
    name = request.path_params["name"]
    found = [n for n in await api.query(nodes, api.hub) if n["name"] == name]
    if not found:
        raise ApiError("unknown_node", f"no node {name!r}; this hub has node {LOCAL_NODE} (see nodes list)")
    return {"node": found[0]}


@endpoint
async def list_nodes(request: Request) -> dict:
    api = api_of(request)
    return {"nodes": await api.query(nodes, api.hub)}


async def on_machine(hub: Hub, cid: int, op: str, **meta) -> dict:
    if hub.runtime is None:
        raise ApiError("no_node", "this hub runs without a node; agents have no machines")
    return await anyio.to_thread.run_sync(lambda: hub.runtime.checkpoint_op(cid, op, **meta))


@endpoint
async def checkpoint(request: Request) -> dict:
    body = await read_body(request, CheckpointBody)
    return await on_machine(api_of(request).hub, cid_of(request), "checkpoint", name=body.name, label=body.label)


@endpoint
async def checkpoints(request: Request) -> dict:
    return await on_machine(api_of(request).hub, cid_of(request), "checkpoints")


@endpoint
async def rollback(request: Request) -> dict:
    body = await read_body(request, RollbackBody)
    return await on_machine(api_of(request).hub, cid_of(request), "rollback", name=body.name)


@endpoint
async def checkpoint_delete(request: Request) -> dict:
    return await on_machine(api_of(request).hub, cid_of(request), "checkpoint_delete",
                            name=request.path_params["name"])


@endpoint
async def fork(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    cid = cid_of(request)
    body = await read_body(request, ForkBody)
    if hub.runtime is None:
        raise ApiError("no_node", "this hub runs without a node; agents have no machines to fork")
    ctx = api.context(request, f"fork agent {cid}")
    done = await anyio.to_thread.run_sync(lambda: hub.runtime.fork(cid, body.n, body.checkpoint, ctx))
    hub.read_models.catch_up()
    return {"checkpoint": done["checkpoint"], "source": cid,
            "forks": [rm.agent_of(hub.read_models, c) for c in done["forks"]]}


@endpoint
async def move(request: Request) -> dict:
    """Move the agent's machine to another node (the guide's five steps); the bytes moved and the time."""
    api = api_of(request)
    hub = api.hub
    cid = cid_of(request)
    body = await read_body(request, MoveBody)
    if hub.runtime is None:
        raise ApiError("no_node", "this hub runs without a node; agents have no machines to move")
    ctx = api.context(request, f"move agent {cid} to {body.node}")
    done = await anyio.to_thread.run_sync(lambda: hub.runtime.move(cid, body.node, ctx))
    hub.read_models.catch_up()
    return {"move": done, "agent": rm.agent_of(hub.read_models, cid)}


ROUTES = [
    Route("/v1/agents/{cid}/fork", fork, methods=["POST"]),
    Route("/v1/agents/{cid}/move", move, methods=["POST"]),
    Route("/v1/agents/{cid}/cancel", cancel, methods=["POST"]),
    Route("/v1/agents/{cid}/checkpoint", checkpoint, methods=["POST"]),
    Route("/v1/agents/{cid}/checkpoints", checkpoints, methods=["GET"]),
    Route("/v1/agents/{cid}/rollback", rollback, methods=["POST"]),
    Route("/v1/agents/{cid}/checkpoints/{name}", checkpoint_delete, methods=["DELETE"]),
    Route("/v1/agents", create, methods=["POST"]),
    Route("/v1/agents", list_, methods=["GET"]),
    Route("/v1/agents/{cid}", show, methods=["GET"]),
    Route("/v1/agents/{cid}", patch, methods=["PATCH"]),
    Route("/v1/agents/{cid}", delete, methods=["DELETE"]),
    Route("/v1/agents/{cid}/tell", tell, methods=["POST"]),
    *[Route(f"/v1/agents/{{cid}}/{n}", action(n), methods=["POST"]) for n in LIFECYCLE],
    Route("/v1/agents/{cid}/logs", logs),
    Route("/v1/society/roles", society_roles),
    Route("/v1/nodes", list_nodes),
    Route("/v1/nodes/{name}", show_node),
    Route("/v1/templates", list_templates),
    Route("/v1/templates/{key}", remove_template, methods=["DELETE"]),
]
