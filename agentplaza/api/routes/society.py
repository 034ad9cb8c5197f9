"""/v1/society: reputation, the bonds (contacts) between agents, opinions, ratings, and the owner's
"Trust more" / "Trust less" (``POST /v1/society/{cid}/trust``); the ``society`` family on /v1/ws.
Everything that fades is computed at the hub's clock. (``/v1/society/roles`` is the agents' area's.)"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import society as cmd
from ...domain.names import check_cid
from ...projections import society as rm
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, Api, api_of, endpoint


class TrustBody(Body):
    more: bool


def _now(api: Api):
    return api.hub.commands.clock()


def _cid(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    text = check_cid(raw)
    if not text.isdigit():
        raise ApiError("invalid_cid", "an agent's CID is a number")
    return int(text)


@endpoint
async def reputation(request: Request) -> dict:
    api = api_of(request)
    return {"at": _now(api).isoformat(), "agents": await api.query(rm.reputation_rows, api.hub.read_models, _now(api))}


@endpoint
async def bonds(request: Request) -> dict:
    api = api_of(request)
    cid = _cid(request.query_params.get("cid"))
    return {"bonds": await api.query(rm.bond_rows, api.hub.read_models, _now(api), cid)}


@endpoint
async def opinions(request: Request) -> dict:
    api = api_of(request)
    cid = _cid(request.query_params.get("cid"))
    return {"opinions": await api.query(rm.opinion_rows, api.hub.read_models, _now(api), cid)}


@endpoint
async def ratings(request: Request) -> dict:
    api = api_of(request)
    cid = _cid(request.query_params.get("cid"))
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return {"ratings": await api.query(rm.rating_rows, api.hub.read_models, cid, limit)}


@endpoint
async def trust(request: Request) -> dict:
    api = api_of(request)
    cid = _cid(request.path_params["cid"])
    body = await read_body(request, TrustBody)
    ctx = api.context(request)
    out = await api.command(lambda: cmd.owner_rates(api.hub.commands, ctx, cid, body.more))
    rows = await api.query(rm.reputation_rows, api.hub.read_models, _now(api))
    return {**out, "agent": next((r for r in rows if r["cid"] == cid), None)}


ROUTES = [
    Route("/v1/society/reputation", reputation),
    Route("/v1/society/bonds", bonds),
    Route("/v1/society/opinions", opinions),
    Route("/v1/society/ratings", ratings),
    Route("/v1/society/{cid}/trust", trust, methods=["POST"]),
]
