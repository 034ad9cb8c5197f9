"""/v1/health, /v1/hub, /v1/overview, the log (/v1/events), audit (verify, anchor) and replay."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...events import anchor
from ...when import parse_when
from .. import queries
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, Api, api_of, endpoint


class RebuildBody(Body):
    name: str | None = None


@endpoint
async def health(request: Request) -> dict:
    return {"ok": True}


@endpoint
async def hub_info(request: Request) -> dict:
    api = api_of(request)
    return await api.query(api.hub.info)


@endpoint
async def overview(request: Request) -> dict:
    api = api_of(request)
    return await api.query(queries.overview, api.hub)


@endpoint
async def events(request: Request) -> dict:
    api = api_of(request)
    store = api.hub.store
    after = api.int_param(request, "after", 0)
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    kinds = [k for k in (request.query_params.get("kinds") or "").split(",") if k]

    def read() -> list[dict]:
        return [r.as_message() for r in store.read(after, limit) if not kinds or r.family in kinds or r.kind in kinds]

    return {"events": await api.query(read)}


@endpoint
async def audit_verify(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    given = None
    if request.query_params.get("anchor") is not None:
        try:
            given = anchor.parse_anchor(request.query_params["anchor"])
        except anchor.AnchorSyntax as e:
            raise ApiError("invalid_anchor", str(e)) from None
    verdict = await api.query(anchor.check, hub.store, hub.folders.state, hub.folders.config, given)
    return verdict.as_dict()


@endpoint
async def audit_anchor(request: Request) -> dict:
    api = api_of(request)
    anchors = api.hub.anchors
    if anchors is None:
        raise ApiError("not_anchored", "this hub keeps no chain checkpoints")
    try:
        position, head = await api.query(anchors.current)
    except anchor.ChainBroken as e:
        raise ApiError("chain_broken", f"{e}; run agentplaza audit verify") from None
    return {"anchor": anchor.format_anchor(position, head), "position": position, "head": head.hex()}


def _known(api: Api, name: str | None) -> None:
    states = api.hub.read_models.states
    if name is not None and name not in states:
        raise ApiError("unknown_read_model", f"no read model named {name!r}; known: {', '.join(states)}")


@endpoint
async def rebuild(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, RebuildBody)
    _known(api, body.name)
    return {"rebuilt": await api.query(api.hub.read_models.rebuild, body.name)}


@endpoint
async def replay(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    at = request.query_params.get("at")
    upto = api.int_param(request, "upto", None, 0)
    name = request.query_params.get("name") or None
    _known(api, name)
    if at:
        try:
            at = parse_when(at)
        except ValueError as e:
            raise ApiError("invalid_request", str(e)) from None
        upto = await api.query(hub.store.position_at, at)
    if upto is None:
        upto = hub.store.max_position()
    models = await api.query(hub.read_models.replay, upto, [name] if name else None)
    return {"upto": upto, "at": at, "read_models": models}


@endpoint
async def read_models(request: Request) -> dict:
    return {"read_models": {n: s.position for n, s in api_of(request).hub.read_models.states.items()}}


ROUTES = [
    Route("/v1/health", health),
    Route("/v1/hub", hub_info),
    Route("/v1/overview", overview),
    Route("/v1/events", events),
    Route("/v1/audit/verify", audit_verify),
    Route("/v1/audit/anchor", audit_anchor),
    Route("/v1/replay", replay),
    Route("/v1/replay/rebuild", rebuild, methods=["POST"]),
    Route("/v1/read-models", read_models),
]
