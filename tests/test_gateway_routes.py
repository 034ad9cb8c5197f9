"""The gateway's routes are matched before every other (api/app.py: a model call need not be tried
against the hundred routes before them); that order changes nothing only while no other route
matches a gateway path, which this holds for every route of every area."""

from __future__ import annotations

from starlette.routing import Match

from agentplaza.api.routes import AREAS
from agentplaza.api.routes import gateway as gateway_routes

GATEWAY_PATHS = [
    "/v1/gateway/apz_gw_abc/anthropic/v1/messages",
    "/v1/gateway/apz_gw_abc/openai/v1/chat/completions",
    "/v1/gateway/apz_gw_abc/gemini/v1beta/models/gemini-x:generateContent",
    "/v1/gateway/apz_gw_abc/gemini/v1/models/gemini-x:streamGenerateContent",
]


def scope(path: str) -> dict:
    return {"type": "http", "method": "POST", "path": path, "root_path": "", "query_string": b"", "headers": []}


def test_every_gateway_path_is_the_gateways_and_no_other_route_matches_it():
    others = [r for area in AREAS if area is not gateway_routes for r in area.ROUTES]
    assert len(others) > 50
    for path in GATEWAY_PATHS:
        assert any(r.matches(scope(path))[0] == Match.FULL for r in gateway_routes.ROUTES), path
        assert [r.path for r in others if r.matches(scope(path))[0] != Match.NONE] == [], path
