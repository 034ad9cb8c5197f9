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


def test_the_gateways_door_takes_exactly_the_paths_its_routes_match():
    """``routes.gateway.Door`` answers a model call before Starlette's stack; it must take no path the
    routes would not (a token with a slash, a path one step longer, a prefix alone)."""
    paths = GATEWAY_PATHS + [
        "/v1/gateway/a/b/openai/v1/chat/completions", "/v1/gateway//openai/v1/chat/completions",
        "/v1/gateway/t/openai/v1/chat/completions/", "/v1/gateway/t/openai/v1/chat/completionsx",
        "/v1/gateway/t/anthropic/v1/messages/x", "/v1/gateway/t/gemini/v1beta/models/a/b:generateContent",
        "/v1/gateway/t/gemini/v2/models/m:generateContent", "/v1/gateway/t/gemini/v1beta/models/",
        "/v1/gateway/t", "/v1/gatewayx/t/anthropic/v1/messages", "/x/v1/gateway/t/anthropic/v1/messages",
    ]
    for path in paths:
        routed = any(r.matches(scope(path))[0] == Match.FULL for r in gateway_routes.ROUTES)
        assert bool(gateway_routes.DOOR_PATH.fullmatch(path)) == routed, path
