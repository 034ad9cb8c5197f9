"""/v1/conversations: the threads between agents, and the owner's with each agent (read-only here:
agents write with ``plaza_message``, the owner with ``POST /v1/agents/{cid}/tell``); the ``conversation``
family on /v1/ws."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...domain.conversations import OWNER
from ...domain.names import check_cid
from ...projections import conversations as rm
from ..kit import MAX_LIST_LIMIT, api_of, endpoint


@endpoint
async def list_conversations(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    party = request.query_params.get("party") or None
    if party is not None and party != OWNER:
        party = check_cid(party, "the party")
    return {"conversations": await api.query(rm.conversation_rows, api.hub.read_models, party, limit)}


@endpoint
async def get_conversation(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 200, 1, MAX_LIST_LIMIT)
    return await api.query(rm.conversation_row, api.hub.read_models, request.path_params["id"], limit)


ROUTES = [
    Route("/v1/conversations", list_conversations),
    Route("/v1/conversations/{id}", get_conversation),
]
