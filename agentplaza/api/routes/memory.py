"""/v1/agents/{cid}/memory: an agent's memory as the owner reads it (the agent page, ``agents memory CID``):
its notes with their links and backlinks, or with ``?note=`` one note's text."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...domain.memory import slug
from ...projections import memory as rm
from ..kit import api_of, endpoint
from .society import _cid


@endpoint
async def memory(request: Request) -> dict:
    api = api_of(request)
    cid = _cid(request.path_params["cid"])
    raw = request.query_params.get("note")
    return await api.query(rm.memory_of, api.hub.read_models, cid, slug(raw) if raw else None)


ROUTES = [Route("/v1/agents/{cid}/memory", memory)]
