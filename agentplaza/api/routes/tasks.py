"""/v1/tasks: the tasks (create, list, show, timeline, assign, withdraw), bids and awards, the
workers the scheduler sees, and the scheduler itself (it runs in the hub; a pass can be asked for).

Routes an agent's harness will call (claim, report, review, give up, bid, and the workers'
availability) are marked AGENT-SIDE: until the agents runtime calls the commands directly they
stand in for it, behind the owner-only wall like every route, acting as the named agent.
"""

from __future__ import annotations

import anyio
import sqlalchemy as sa
from starlette.requests import Request
from starlette.routing import Route

from ...commands import scheduler
from ...commands import tasks as cmd
from ...domain.names import task_number
from ...domain.tasks import STATES
from ...projections import work as rm
from ...projections.runner import equal_to
from ..errors import ApiError, Body, read_body
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, Api

# -- queries -------------------------------------------------------------------------------


def task_rows(hub: Hub, state: str | None, role: str | None, worker: str | None, limit: int) -> list[dict]:
    t = rm.tasks
    where = equal_to(t, state=state, role=role, worker=worker)
    return [_shown(r) for r in hub.read_models.rows(t, *where, order_by=sa.desc(t.c.position), limit=limit)]


def _shown(row: dict) -> dict:
    """A task as people name it: its id is its number (t12)."""
    row = dict(row)
    row["id"] = row.pop("number")
    return row


def task_row(hub: Hub, number: str) -> dict:
    number = task_number(number)
    found = hub.read_models.rows(rm.tasks, rm.tasks.c.number == number)
    if not found:
        raise ApiError("no_task", f"no task {number!r}")
    row = _shown(found[0])
    row["bids"] = hub.read_models.rows(rm.bids, rm.bids.c.task == number, order_by=rm.bids.c.price)
    return row


def timeline_rows(hub: Hub, number: str) -> list[dict]:
    task_row(hub, number)
    tl = rm.timeline
    return hub.read_models.rows(tl, tl.c.task == task_number(number), order_by=tl.c.position)


def worker_rows(hub: Hub) -> list[dict]:
    return hub.read_models.rows(rm.workers, order_by=rm.workers.c.cid)


def overview_counts(hub: Hub) -> dict:
    t = rm.tasks
    with hub.read_models.engine.connect() as conn:
        counts = dict(conn.execute(sa.select(t.c.state, sa.func.count()).group_by(t.c.state)).all())
    return {s: counts.get(s, 0) for s in STATES}


# -- bodies -----------------------------------------------------------------------------------


class CreateBody(Body):
    title: str
    acceptance: str
    budget: int | None = None
    details: str = ""
    role: str | None = None
    project: str | None = None
    parent: str | None = None
    agent: str | int | None = None  # AGENT-SIDE: created by this agent through its tools


class WorkerBody(Body):
    worker: str | int


class WithdrawBody(Body):
    reason: str | None = None
    agent: str | int | None = None  # AGENT-SIDE: the orchestrator withdrawing
    tier: str | None = None


class AgentBody(Body):
    worker: str | int
    role: str | None = None


class BidBody(Body):
    worker: str | int
    role: str | None = None
    price: int


class ReportBody(Body):
    worker: str | int
    summary: str
    files: list[str] = []
    checks: str


class ReviewBody(Body):
    reviewer: str | int
    role: str | None = None
    passed: bool | None = None
    notes: str = ""
    metered_cost: int | None = None


class GiveUpBody(Body):
    worker: str | int
    notes: str = ""


class AvailableBody(Body):
    role: str
    tier: str = "worker"


class BusyBody(Body):
    activity: str = "busy"


def routes(api: Api) -> list:
    hub = api.hub
    cmds = hub.commands

    def agent_ctx(request: Request, cid, reason: str | None = None):
        return cmds.context(f"agent:{cid}", reason, request.headers.get("x-correlation-id"))

    async def show(number: str) -> dict:
        return await api.query(task_row, hub, number)

    async def list_tasks(request: Request) -> dict:
        q = request.query_params
        state = q.get("state") or None
        if state is not None and state not in STATES:
            raise ApiError("invalid_request", f"state is one of {', '.join(STATES)}")
        limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
        rows = await api.query(task_rows, hub, state, q.get("role") or None, q.get("worker") or None, limit)
        return {"tasks": rows}

    async def create(request: Request) -> dict:
        body = await read_body(request, CreateBody)
        ctx = agent_ctx(request, body.agent) if body.agent is not None else api.context(request)
        box: dict = {}

        def go():
            box.update(cmd.create(cmds, ctx, body.title, body.acceptance, body.budget, details=body.details,
                                  role=body.role, project=body.project, parent=body.parent))
            return box["positions"]

        await api.command(go)
        return await show(box["id"])

    async def get_task(request: Request) -> dict:
        return await show(request.path_params["id"])

    async def get_timeline(request: Request) -> dict:
        number = request.path_params["id"]
        return {"task": task_number(number), "timeline": await api.query(timeline_rows, hub, number)}

    async def act(request: Request, fn) -> dict:
        await api.command(lambda: (lambda r: r.positions if hasattr(r, "positions") else r)(fn()))
        return await show(request.path_params["id"])

    async def assign(request: Request) -> dict:
        body = await read_body(request, WorkerBody)
        ctx = api.context(request)
        return await act(request, lambda: cmd.assign(cmds, ctx, request.path_params["id"], str(body.worker)))

    async def assign_review(request: Request) -> dict:
        body = await read_body(request, WorkerBody)
        ctx = api.context(request)
        return await act(request, lambda: cmd.assign_review(cmds, ctx, request.path_params["id"], str(body.worker)))

    async def withdraw(request: Request) -> dict:
        body = await read_body(request, WithdrawBody)
        ctx = agent_ctx(request, body.agent, body.reason) if body.agent is not None else api.context(request, body.reason)
        return await act(request, lambda: cmd.withdraw(cmds, ctx, request.path_params["id"], tier=body.tier))

    async def list_bids(request: Request) -> dict:
        return {"bids": (await show(request.path_params["id"]))["bids"]}

    async def place_bid(request: Request) -> dict:
        body = await read_body(request, BidBody)
        ctx = agent_ctx(request, body.worker)
        return await act(request, lambda: cmd.bid(cmds, ctx, request.path_params["id"], str(body.worker), body.role, body.price))

    async def award(request: Request) -> dict:
        body = await read_body(request, WorkerBody)
        ctx = api.context(request)
        return await act(request, lambda: cmd.award(cmds, ctx, request.path_params["id"], str(body.worker)))

    async def claim(request: Request) -> dict:
        body = await read_body(request, AgentBody)
        ctx = agent_ctx(request, body.worker)
        return await act(request, lambda: cmd.claim(cmds, ctx, request.path_params["id"], str(body.worker), body.role))

    async def report(request: Request) -> dict:
        body = await read_body(request, ReportBody)
        ctx = agent_ctx(request, body.worker)
        return await act(request, lambda: cmd.report_done(cmds, ctx, request.path_params["id"], str(body.worker),
                                                          body.summary, body.files, body.checks))

    async def review(request: Request) -> dict:
        body = await read_body(request, ReviewBody)
        ctx = agent_ctx(request, body.reviewer)
        number, who = request.path_params["id"], str(body.reviewer)
        if body.passed is None:  # take the review
            return await act(request, lambda: cmd.take_review(cmds, ctx, number, who, body.role))
        return await act(request, lambda: cmd.review(cmds, ctx, number, who, body.passed, body.notes,
                                                     metered_cost=body.metered_cost))

    async def give_up(request: Request) -> dict:
        body = await read_body(request, GiveUpBody)
        ctx = agent_ctx(request, body.worker)
        return await act(request, lambda: cmd.give_up(cmds, ctx, request.path_params["id"], str(body.worker), body.notes))

    async def list_workers(request: Request) -> dict:
        return {"workers": await api.query(worker_rows, hub)}

    async def worker_state(request: Request, fn) -> dict:
        await api.command(lambda: (lambda r: r.positions if hasattr(r, "positions") else r)(fn()))
        cid = request.path_params["cid"]
        rows = await api.query(lambda: hub.read_models.rows(rm.workers, rm.workers.c.cid == cid))
        return rows[0] if rows else {}

    async def available(request: Request) -> dict:
        body = await read_body(request, AvailableBody)
        cid = request.path_params["cid"]
        return await worker_state(request, lambda: cmd.worker_available(cmds, agent_ctx(request, cid), cid, body.role, body.tier))

    async def busy(request: Request) -> dict:
        body = await read_body(request, BusyBody)
        cid = request.path_params["cid"]
        return await worker_state(request, lambda: cmd.worker_busy(cmds, agent_ctx(request, cid), cid, body.activity))

    async def offline(request: Request) -> dict:
        cid = request.path_params["cid"]
        return await worker_state(request, lambda: cmd.worker_offline(cmds, api.context(request), cid))

    async def schedule(request: Request) -> dict:
        out = await run_pass(api)
        return {"held": out.held, "assigned": out.assigned, "skipped": out.skipped}

    e = api.endpoint
    return [
        Route("/v1/tasks", e(list_tasks)),
        Route("/v1/tasks", e(create), methods=["POST"]),
        Route("/v1/tasks/workers", e(list_workers)),
        Route("/v1/tasks/workers/{cid}/available", e(available), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/workers/{cid}/busy", e(busy), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/workers/{cid}/offline", e(offline), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/schedule", e(schedule), methods=["POST"]),
        Route("/v1/tasks/{id}", e(get_task)),
        Route("/v1/tasks/{id}/timeline", e(get_timeline)),
        Route("/v1/tasks/{id}/assign", e(assign), methods=["POST"]),
        Route("/v1/tasks/{id}/assign-review", e(assign_review), methods=["POST"]),
        Route("/v1/tasks/{id}/withdraw", e(withdraw), methods=["POST"]),
        Route("/v1/tasks/{id}/bids", e(list_bids)),
        Route("/v1/tasks/{id}/bids", e(place_bid), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/{id}/award", e(award), methods=["POST"]),
        Route("/v1/tasks/{id}/claim", e(claim), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/{id}/report", e(report), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/{id}/review", e(review), methods=["POST"]),  # AGENT-SIDE
        Route("/v1/tasks/{id}/give-up", e(give_up), methods=["POST"]),  # AGENT-SIDE
    ]


# -- the scheduler in the hub ----------------------------------------------------------------------


async def run_pass(api: Api) -> scheduler.Pass:
    """One pass on the read models as they are now; waits until they show what it did."""
    hub = api.hub
    await api.follower.settle(hub.store.max_position())
    queue = await api.query(rm.queue, hub.read_models)
    out = await api.query(scheduler.run_pass, hub.commands, queue)
    if out.assigned:
        await api.follower.settle(hub.store.max_position())
    return out


async def background(api: Api) -> None:
    """The hub's scheduler: a pass every ``scheduler.INTERVAL_S``; none at all while the plaza is held."""
    while True:
        await anyio.sleep(scheduler.INTERVAL_S)
        try:
            await run_pass(api)
        except Exception:  # a pass that failed is retried at the next interval; the hub carries on
            continue
