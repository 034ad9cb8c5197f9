"""/v1/conduct: an agent's permission mode and conduct (suspensions in force, sanctions received),
lifting a suspension; and the check a tool call passes (AGENT-SIDE, for the harness). A confirmed
violation is recorded by the check itself (tests record one directly: ``tests/support/conduct.py``).

These sit under /v1/conduct until the agents area owns /v1/agents/{cid}; it may mount the same
functions there.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

import jhrl
from jhrl.catalog import risk_of

from ...commands import conduct as cmd
from ...projections import work as rm
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, Api, api_of, endpoint


def conduct_of(api: Api, cid: str, limit: int) -> dict:
    """The agent's conduct as it stands now (the hub's clock)."""
    return rm.conduct_view(api.hub.read_models, api.hub.commands.clock().isoformat(), cid, limit)


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
    return await api.query(conduct_of, api, request.path_params["cid"], limit)


@endpoint
async def set_mode(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, ModeBody)
    cid = request.path_params["cid"]
    await api.command(lambda: cmd.set_mode(api.hub.commands, api.context(request), cid, body.mode))
    return await api.query(conduct_of, api, cid, 50)


@endpoint
async def lift(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, LiftBody)
    cid = request.path_params["cid"]
    ctx = api.context(request, body.reason)
    await api.command(lambda: cmd.lift(api.hub.commands, ctx, cid, request.path_params["sid"]))
    return await api.query(conduct_of, api, cid, 50)


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
