"""/v1/conduct: an agent's permission mode and conduct (suspensions in force, sanctions received),
lifting a suspension; and the check a tool call passes (AGENT-SIDE, for the harness). A confirmed
violation is recorded by the check itself (tests record one directly: ``tests/support/conduct.py``).

These sit under /v1/conduct until the agents area owns /v1/agents/{cid}; it may mount the same
functions there.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from starlette.requests import Request
from starlette.routing import Route

import jhrl
from jhrl.catalog import risk_of

from ...commands import conduct as cmd
from ...projections import work as rm
from ..errors import ApiError, Body, read_body
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, api_of, endpoint


def conduct_view(hub: Hub, cid: str, limit: int) -> dict:
    at = hub.commands.clock().isoformat()
    rows = hub.read_models.rows(rm.conduct, rm.conduct.c.cid == cid)
    base = rows[0] if rows else {"cid": cid, "mode": "autonomous", "offences": 0, "warnings": 0, "fined": 0}
    s = rm.suspensions
    sus = hub.read_models.rows(s, s.c.cid == cid, order_by=s.c.at)
    log = hub.read_models.rows(rm.conduct_log, rm.conduct_log.c.cid == cid, order_by=sa.desc(rm.conduct_log.c.position),
                               limit=limit)
    return {
        "cid": cid, "mode": base["mode"], "offences": base["offences"], "warnings": base["warnings"],
        "fined": base["fined"],
        "suspensions": [dict(x, in_force=not x["lifted"] and x["until"] > at) for x in sus],
        "in_force": [x for x in sus if not x["lifted"] and x["until"] > at],
        "sanctions": log,
    }


class ModeBody(Body):
    mode: str


class LiftBody(Body):
    reason: str | None = None


class CallBody(Body):
    agent: str | int
    role: str
    tool: str
    risk: str | None = None
    tier: str = "worker"
    args: dict[str, Any] = {}


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
    return await api.query(conduct_view, api.hub, request.path_params["cid"], limit)


@endpoint
async def set_mode(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, ModeBody)
    cid = request.path_params["cid"]
    await api.command(lambda: cmd.set_mode(api.hub.commands, api.context(request), cid, body.mode))
    return await api.query(conduct_view, api.hub, cid, 50)


@endpoint
async def lift(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, LiftBody)
    cid = request.path_params["cid"]
    ctx = api.context(request, body.reason)
    await api.command(lambda: cmd.lift(api.hub.commands, ctx, cid, request.path_params["sid"]))
    return await api.query(conduct_view, api.hub, cid, 50)


@endpoint
async def check(request: Request) -> dict:
    """The check a tool call passes, as the harness's session makes it (one commit)."""
    api = api_of(request)
    cmds = api.hub.commands
    body = await read_body(request, CallBody)
    agent = str(body.agent)
    try:
        call = jhrl.Call(role=body.role, action=body.tool, risk=body.risk or risk_of(body.tool),
                         tier=body.tier, args=body.args)
    except ValueError as e:
        raise ApiError("invalid_request", str(e)) from None
    ctx = cmds.context(f"agent:{agent}")
    checked = await api.command(lambda: cmds.run(lambda unit: cmd.check_in(unit, cmds, call, agent, ctx)))
    return checked.as_dict()


ROUTES = [
    Route("/v1/conduct/calls", check, methods=["POST"]),  # AGENT-SIDE: the harness's check
    Route("/v1/conduct/{cid}", show),
    Route("/v1/conduct/{cid}/mode", set_mode, methods=["POST"]),
    Route("/v1/conduct/{cid}/suspensions/{sid}/lift", lift, methods=["POST"]),
]
