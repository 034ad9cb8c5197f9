"""/v1/egress: what the egress proxy does, as the Egress screen shows it (the guide, "Egress rules").

``GET /v1/egress`` is the proxy's settings on each node (on or off, the ports) and the fetch blocklist
(the model policy's, edited on the Models screen); ``GET /v1/egress/audit`` the agents' egress
connections, newest first, read from their transcripts (every connection, allowed or refused, is one
``egress`` entry).  Both are read-only: the credential rules of "Egress credentials" have no API yet.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...projections import agents as rm
from ..errors import ApiError
from ..kit import MAX_LIST_LIMIT, api_of, endpoint
from .agents import nodes


@endpoint
async def settings(request: Request) -> dict:
    api = api_of(request)
    policy = await api.query(rm.policy_of, api.hub.read_models) or {}
    listed = await api.query(nodes, api.hub)
    return {"nodes": [{"name": n["name"], "online": n["online"], "egress": n["egress"]} for n in listed],
            "fetch_blocklist": list(policy.get("fetch_blocklist") or [])}


@endpoint
async def audit(request: Request) -> dict:
    api = api_of(request)
    verdict = request.query_params.get("verdict") or None
    if verdict is not None and verdict not in rm.EGRESS_VERDICTS:
        raise ApiError("invalid_request", f"verdict is one of {', '.join(rm.EGRESS_VERDICTS)}")
    cid = api.int_param(request, "cid", None, 0)
    before = api.int_param(request, "before", None, 0)
    limit = api.int_param(request, "limit", rm.PAGE_EGRESS, 1, MAX_LIST_LIMIT)
    entries = await api.query(rm.egress_audit, api.hub.read_models, verdict, cid, before, limit)
    return {"entries": entries, "older": entries[-1]["position"] if len(entries) == limit else None}


ROUTES = [
    Route("/v1/egress", settings),
    Route("/v1/egress/audit", audit),
]
