"""/v1/health, /v1/hub, /v1/overview, the log (/v1/events), audit (verify, anchor) and replay."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...events import anchor
from ...when import parse_when
from .. import queries
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, Api


class RebuildBody(Body):
    name: str | None = None


def routes(api: Api) -> list:
    hub = api.hub

    async def health(request: Request) -> dict:
        return {"ok": True}

    async def hub_info(request: Request) -> dict:
        return await api.query(hub.info)

    async def overview(request: Request) -> dict:
        return await api.query(queries.overview, hub)

    async def events(request: Request) -> dict:
        after = api.int_param(request, "after", 0)
        limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
        kinds = [k for k in (request.query_params.get("kinds") or "").split(",") if k]

        def read() -> list[dict]:
            return [r.as_message() for r in hub.store.read(after, limit)
                    if not kinds or r.family in kinds or r.kind in kinds]

        return {"events": await api.query(read)}

    async def audit_verify(request: Request) -> dict:
        given = None
        if request.query_params.get("anchor") is not None:
            try:
                given = anchor.parse_anchor(request.query_params["anchor"])
            except anchor.AnchorSyntax as e:
                raise ApiError("invalid_anchor", str(e)) from None
        verdict = await api.query(anchor.check, hub.store, hub.folders.state, hub.folders.config, given)
        return verdict.as_dict()

    async def audit_anchor(request: Request) -> dict:
        if hub.anchors is None:
            raise ApiError("not_anchored", "this hub keeps no chain checkpoints")
        try:
            position, head = await api.query(hub.anchors.current)
        except anchor.ChainBroken as e:
            raise ApiError("chain_broken", f"{e}; run agentplaza audit verify") from None
        return {"anchor": anchor.format_anchor(position, head), "position": position, "head": head.hex()}

    def known(name: str | None) -> None:
        if name is not None and name not in hub.read_models.states:
            raise ApiError("unknown_read_model",
                           f"no read model named {name!r}; known: {', '.join(hub.read_models.states)}")

    async def rebuild(request: Request) -> dict:
        body = await read_body(request, RebuildBody)
        known(body.name)
        return {"rebuilt": await api.query(hub.read_models.rebuild, body.name)}

    async def replay(request: Request) -> dict:
        at = request.query_params.get("at")
        upto = api.int_param(request, "upto", None, 0)
        name = request.query_params.get("name") or None
        known(name)
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

    async def read_models(request: Request) -> dict:
        return {"read_models": {n: s.position for n, s in hub.read_models.states.items()}}

    return [
        Route("/v1/health", api.endpoint(health)),
        Route("/v1/hub", api.endpoint(hub_info)),
        Route("/v1/overview", api.endpoint(overview)),
        Route("/v1/events", api.endpoint(events)),
        Route("/v1/audit/verify", api.endpoint(audit_verify)),
        Route("/v1/audit/anchor", api.endpoint(audit_anchor)),
        Route("/v1/replay", api.endpoint(replay)),
        Route("/v1/replay/rebuild", api.endpoint(rebuild), methods=["POST"]),
        Route("/v1/read-models", api.endpoint(read_models)),
    ]
