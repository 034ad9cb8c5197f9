"""/v1/projects, /v1/council and /v1/courts: the projects and their history, the owner's approval,
send-back, veto and flag of a project; the council's motions and the owner's decision on one the
count gave them; the courts' cases and the incidents, each one shown whole (read only: agents open,
file, defend and rule through their tools).
The ``projects``, ``council`` and ``courts`` families on /v1/ws carry every change."""

from __future__ import annotations

from typing import Literal

from starlette.requests import Request
from starlette.routing import Route

from ...commands import council as council_cmd
from ...commands import projects as cmd
from ...domain.names import case_number, incident_number, motion_number, project_number
from ...projections import governance as rm
from ...wire import MOTION_STATUSES, PROJECT_STAGES
from ..errors import ApiError, Body, read_body
from ..kit import api_of, endpoint


class ReasonBody(Body):
    reason: str | None = None


class FlagBody(Body):
    on: bool


class DecideBody(Body):
    decision: Literal["approve", "reject"]
    reason: str | None = None


def _choice(request: Request, name: str, allowed: tuple[str, ...]) -> str | None:
    value = request.query_params.get(name) or None
    if value is not None and value not in allowed:
        raise ApiError("invalid_request", f"{name} is one of {', '.join(allowed)}")
    return value


async def _project(api, number: str) -> dict:
    row = await api.query(rm.project_row, api.hub.read_models, number)
    if row is None:
        raise ApiError("no_project", f"no project {number!r}")
    return row


@endpoint
async def list_projects(request: Request) -> dict:
    api = api_of(request)
    stage = _choice(request, "stage", PROJECT_STAGES)
    return {"projects": await api.query(rm.project_rows, api.hub.read_models, stage)}


@endpoint
async def show_project(request: Request) -> dict:
    api = api_of(request)
    return await _project(api, project_number(request.path_params["id"]))


def _acting(fn):
    async def handler(request: Request) -> dict:
        api = api_of(request)
        number = project_number(request.path_params["id"])
        body = await read_body(request, FlagBody if fn is cmd.flag else ReasonBody)
        ctx = api.context(request, getattr(body, "reason", None))
        if fn is cmd.flag:
            await api.command(lambda: cmd.flag(api.hub.commands, ctx, number, body.on))
        else:
            await api.command(lambda: fn(api.hub.commands, ctx, number))
        return await _project(api, number)

    handler.__name__ = fn.__name__
    return endpoint(handler)


approve, send_back, veto, flag = (_acting(f) for f in (cmd.approve, cmd.send_back, cmd.veto, cmd.flag))


@endpoint
async def list_motions(request: Request) -> dict:
    api = api_of(request)
    status = _choice(request, "status", MOTION_STATUSES)
    return {"motions": await api.query(rm.motion_rows, api.hub.read_models, status)}


async def _motion(api, number: str) -> dict:
    row = await api.query(rm.motion_row, api.hub.read_models, number)
    if row is None:
        raise ApiError("no_motion", f"no motion {number!r}")
    return row


@endpoint
async def show_motion(request: Request) -> dict:
    api = api_of(request)
    return await _motion(api, motion_number(request.path_params["id"]))


@endpoint
async def decide_motion(request: Request) -> dict:
    api = api_of(request)
    number = motion_number(request.path_params["id"])
    body = await read_body(request, DecideBody)
    ctx = api.context(request, body.reason)
    await api.command(lambda: council_cmd.decide(api.hub.commands, ctx, number, body.decision == "approve",
                                                 body.reason))
    return await _motion(api, number)


@endpoint
async def list_cases(request: Request) -> dict:
    api = api_of(request)
    return {"cases": await api.query(rm.case_rows, api.hub.read_models),
            "incidents": await api.query(rm.incident_rows, api.hub.read_models)}


@endpoint
async def show_case(request: Request) -> dict:
    api = api_of(request)
    number = case_number(request.path_params["id"])
    row = await api.query(rm.case_row, api.hub.read_models, number)
    if row is None:
        raise ApiError("no_case", f"no case {number!r}")
    return row


@endpoint
async def show_incident(request: Request) -> dict:
    api = api_of(request)
    number = incident_number(request.path_params["id"])
    row = await api.query(rm.incident_row, api.hub.read_models, number)
    if row is None:
        raise ApiError("no_incident", f"no incident {number!r}")
    return row


ROUTES = [
    Route("/v1/projects", list_projects),
    Route("/v1/projects/{id}", show_project),
    Route("/v1/projects/{id}/approve", approve, methods=["POST"]),
    Route("/v1/projects/{id}/send-back", send_back, methods=["POST"]),
    Route("/v1/projects/{id}/veto", veto, methods=["POST"]),
    Route("/v1/projects/{id}/flag", flag, methods=["POST"]),
    Route("/v1/council/motions", list_motions),
    Route("/v1/council/motions/{id}", show_motion),
    Route("/v1/council/motions/{id}/decide", decide_motion, methods=["POST"]),
    Route("/v1/courts", list_cases),
    Route("/v1/courts/cases/{id}", show_case),
    Route("/v1/courts/incidents/{id}", show_incident),
]
