"""/v1/tasks: the tasks (create, list, show, timeline, assign, withdraw), bids and awards, the
workers the scheduler sees, and a scheduler pass on demand (the scheduler itself runs in the
runtime: ``runtime.scheduling``).  What an agent does with a task (claim, report, review, give
up, bid) goes through its harness's tools, not through these routes."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import tasks as cmd
from ...domain.names import task_number
from ...domain.tasks import STATES
from ...projections import work as rm
from ...runtime import scheduling
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, Api, api_of, endpoint


class CreateBody(Body):
    title: str
    acceptance: str
    budget: int | None = None
    details: str = ""
    role: str | None = None
    project: str | None = None
    parent: str | None = None


class WorkerBody(Body):
    worker: str | int


class WithdrawBody(Body):
    reason: str | None = None


async def _show(api: Api, number: str) -> dict:
    return await api.query(rm.task_row, api.hub.read_models, task_number(number))


@endpoint
async def list_tasks(request: Request) -> dict:
    api = api_of(request)
    q = request.query_params
    state = q.get("state") or None
    if state is not None and state not in STATES:
        raise ApiError("invalid_request", f"state is one of {', '.join(STATES)}")
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    rows = await api.query(rm.task_rows, api.hub.read_models, state, q.get("role") or None, q.get("worker") or None,
                           limit)
    return {"tasks": rows}


@endpoint
async def create(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, CreateBody)
    ctx = api.context(request)
    task = await api.command(lambda: cmd.create(api.hub.commands, ctx, body.title, body.acceptance, body.budget,
                                                details=body.details, role=body.role, project=body.project,
                                                parent=body.parent))
    return await _show(api, task["id"])


@endpoint
async def get_task(request: Request) -> dict:
    return await _show(api_of(request), request.path_params["id"])


@endpoint
async def get_timeline(request: Request) -> dict:
    api = api_of(request)
    number = task_number(request.path_params["id"])
    return {"task": number, "timeline": await api.query(rm.timeline_rows, api.hub.read_models, number)}


async def _to_worker(request: Request, command) -> dict:
    """An owner's action that names a worker (assign, assign-review, award); the task as it is now."""
    api = api_of(request)
    body = await read_body(request, WorkerBody)
    ctx = api.context(request)
    await api.command(lambda: command(api.hub.commands, ctx, request.path_params["id"], str(body.worker)))
    return await _show(api, request.path_params["id"])


@endpoint
async def assign(request: Request) -> dict:
    return await _to_worker(request, cmd.assign)


@endpoint
async def assign_review(request: Request) -> dict:
    return await _to_worker(request, cmd.assign_review)


@endpoint
async def award(request: Request) -> dict:
    return await _to_worker(request, cmd.award)


@endpoint
async def withdraw(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, WithdrawBody)
    ctx = api.context(request, body.reason)
    await api.command(lambda: cmd.withdraw(api.hub.commands, ctx, request.path_params["id"]))
    return await _show(api, request.path_params["id"])


@endpoint
async def list_bids(request: Request) -> dict:
    return {"bids": (await _show(api_of(request), request.path_params["id"]))["bids"]}


@endpoint
async def list_workers(request: Request) -> dict:
    api = api_of(request)
    return {"workers": await api.query(rm.worker_rows, api.hub.read_models)}


@endpoint
async def schedule(request: Request) -> dict:
    """One pass now, on read models that show every event so far; answered once they show what it did
    (or what the runtime's own pass did meanwhile, which took what this one skipped)."""
    api = api_of(request)
    await api.follower.settle(api.hub.store.max_position())
    out = await api.query(scheduling.run_pass, api.hub)
    await api.follower.settle(api.hub.store.max_position())
    return {"held": out.held, "assigned": out.assigned, "skipped": out.skipped}


ROUTES = [
    Route("/v1/tasks", list_tasks),
    Route("/v1/tasks", create, methods=["POST"]),
    Route("/v1/tasks/workers", list_workers),
    Route("/v1/tasks/schedule", schedule, methods=["POST"]),
    Route("/v1/tasks/{id}", get_task),
    Route("/v1/tasks/{id}/timeline", get_timeline),
    Route("/v1/tasks/{id}/assign", assign, methods=["POST"]),
    Route("/v1/tasks/{id}/assign-review", assign_review, methods=["POST"]),
    Route("/v1/tasks/{id}/withdraw", withdraw, methods=["POST"]),
    Route("/v1/tasks/{id}/bids", list_bids),
    Route("/v1/tasks/{id}/award", award, methods=["POST"]),
]
