"""/v1/hub-mcp: the hub as an MCP server — its switches, tokens, tool list and call log (docs/mcp.md).

Owner only (like every /v1 route); ``/mcp`` itself is ``api/mcp_door.py``."""

from __future__ import annotations

import uuid

from starlette.requests import Request
from starlette.routing import Route

from ...commands import acp as acp_cmd
from ...commands import hub_mcp as cmd
from ...domain.hub_mcp import describe, parse_expiry
from ...projections import hub_mcp as rm
from ...wire import ACP_PATH, MCP_PATH
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, api_of, endpoint
from ..mcp_door import RATE_PER_MINUTE
from ..mcp_tools import SCOPE_OF, TOOLS

#: The guide's Claude Code line, with this hub's address filled in (the token stays a placeholder).
CLAUDE_LINE = 'claude mcp add --transport http agentplaza {url} --header "Authorization: Bearer apz_mcp_…"'

#: The guide's Zed block (Connecting Zed).
ZED_BLOCK = '{"agent_servers": {"AgentPlaza": {"command": "agentplaza", "args": ["acp"]}}}'


class EnableBody(Body):
    remote: bool = False


class SettingsBody(Body):
    mode: str | None = None
    open_scope: str | None = None
    origins: list[str] | None = None


class AcpBody(Body):
    acp_enabled: bool | None = None
    acp_write_back: bool | None = None
    acp_v2: bool | None = None


class TokenBody(Body):
    name: str
    scope: str
    tools: list[str] = []
    expires: str | None = None


def status_of(request: Request, settings: dict) -> dict:
    hub = api_of(request).hub
    url = (hub.address or str(request.base_url).rstrip("/")) + MCP_PATH
    own = sorted({hub.address, *hub.names.origins} - {""})
    warnings = []
    if not settings["enabled"]:
        warnings.append("the server is off: nothing answers at /mcp")
    if settings["mode"] == "open":
        warnings.append(f"open mode: a request with no token runs at {settings['open_scope']}, rate limited per "
                        "address")
    if settings["remote"]:
        warnings.append("remote: other machines can reach /mcp")
    return {
        "enabled": settings["enabled"], "state": describe(settings["enabled"], settings["remote"]),
        "bind": "remote" if settings["remote"] else "local", "url": url,
        "auth": {"mode": settings["mode"], "open_scope": settings["open_scope"]},
        "origins": {"own": own, "added": settings["origins"]},
        "rate_per_minute": RATE_PER_MINUTE,
        "claude_code": CLAUDE_LINE.format(url=url),
        "acp": {"acp_enabled": settings["acp_enabled"], "acp_write_back": settings["acp_write_back"],
                "acp_v2": settings["acp_v2"], "url": url[: -len(MCP_PATH)].replace("http", "ws", 1) + ACP_PATH,
                "zed": ZED_BLOCK},
        "warnings": warnings,
    }


async def _status(request: Request) -> dict:
    api = api_of(request)
    return status_of(request, await api.query(rm.settings, api.hub.read_models))


@endpoint
async def status(request: Request) -> dict:
    return await _status(request)


@endpoint
async def enable(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, EnableBody)
    ctx = api.context(request, "MCP server on" + (" (remote)" if body.remote else ""))
    await api.command(lambda: cmd.switch(api.hub.commands, ctx, True, body.remote, serves_https=api.hub.serves_https))
    return await _status(request)


@endpoint
async def disable(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request, "MCP server off")
    await api.command(lambda: cmd.switch(api.hub.commands, ctx, False, False, serves_https=api.hub.serves_https))
    return await _status(request)


@endpoint
async def settings(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, SettingsBody)
    given = body.model_dump(exclude_unset=True)
    if not given or any(v is None for v in given.values()):
        raise ApiError("invalid_request", "send any of mode, open_scope, origins")
    ctx = api.context(request)
    await api.command(lambda: cmd.configure(api.hub.commands, ctx, mode=given.get("mode"),
                                            open_scope=given.get("open_scope"), origins=given.get("origins")))
    return await _status(request)


@endpoint
async def tools(request: Request) -> dict:
    return {"tools": [{"name": t.name, "scope": t.scope, "description": t.description, "changes": t.changes,
                       "input_schema": t.input_schema} for t in TOOLS]}


@endpoint
async def list_tokens(request: Request) -> dict:
    api = api_of(request)
    return {"tokens": await api.query(rm.tokens, api.hub.read_models)}


@endpoint
async def create_token(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, TokenBody)
    ctx = api.context(request, f"MCP token {body.name[:80]}")
    expires_at = ctx.at + parse_expiry(body.expires) if body.expires is not None else None
    made = await api.command(lambda: cmd.create_token(api.hub.commands, ctx, body.name, body.scope, body.tools,
                                                      expires_at, SCOPE_OF))
    row = await api.query(rm.token_row, api.hub.read_models, made["id"])
    return {"token": made["token"], "shown_once": True, **row}


def _token_id(request: Request) -> uuid.UUID:
    raw = request.path_params["id"]
    try:
        return uuid.UUID(hex=raw) if len(raw) == 32 else uuid.UUID(raw)
    except ValueError:
        raise ApiError("invalid_request", "a token id is the id the token list shows") from None


@endpoint
async def revoke_token(request: Request) -> dict:
    api = api_of(request)
    token_id = _token_id(request)
    ctx = api.context(request, "MCP token revoked")
    await api.command(lambda: cmd.revoke_token(api.hub.commands, ctx, token_id))
    return {"revoked": await api.query(rm.token_row, api.hub.read_models, token_id.hex)}


@endpoint
async def calls(request: Request) -> dict:
    api = api_of(request)
    q = request.query_params
    token = q.get("token") or None
    caller = None if token is None else (token if ":" in token or token == "owner" else f"token:{token}")
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return {"calls": await api.query(rm.calls, api.hub.read_models, caller, q.get("tool") or None, limit)}


@endpoint
async def recommendations(request: Request) -> dict:
    api = api_of(request)
    return {"recommendations": await api.query(rm.recommendations, api.hub.read_models,
                                               request.query_params.get("approval") or None)}


@endpoint
async def acp_switches(request: Request) -> dict:
    """The Editors (ACP) switches of Setup › MCP › This hub as a server: any of the three."""
    api = api_of(request)
    body = await read_body(request, AcpBody)
    given = body.model_dump(exclude_unset=True)
    if not given or any(v is None for v in given.values()):
        raise ApiError("invalid_request", "send any of acp_enabled, acp_write_back, acp_v2 (true or false)")
    ctx = api.context(request, "Editors (ACP) " + ", ".join(f"{k} {'on' if v else 'off'}" for k, v in given.items()))
    await api.command(lambda: acp_cmd.set_switches(api.hub.commands, ctx, **given))
    return await _status(request)


@endpoint
async def acp_sessions(request: Request) -> dict:
    api = api_of(request)
    cid = api.int_param(request, "cid", None, 1, 2**31 - 1) if request.query_params.get("cid") else None
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    rows = await api.query(rm.acp_sessions_list, api.hub.read_models, cid, limit)
    return {"sessions": [{k: v for k, v in r.items() if k != "items"} for r in rows]}


ROUTES = [
    Route("/v1/hub-mcp", status),
    Route("/v1/hub-mcp/enable", enable, methods=["POST"]),
    Route("/v1/hub-mcp/disable", disable, methods=["POST"]),
    Route("/v1/hub-mcp/settings", settings, methods=["PATCH"]),
    Route("/v1/hub-mcp/tools", tools),
    Route("/v1/hub-mcp/tokens", list_tokens),
    Route("/v1/hub-mcp/tokens", create_token, methods=["POST"]),
    Route("/v1/hub-mcp/tokens/{id}", revoke_token, methods=["DELETE"]),
    Route("/v1/hub-mcp/calls", calls),
    Route("/v1/hub-mcp/recommendations", recommendations),
    Route("/v1/hub-mcp/acp", acp_switches, methods=["PATCH"]),
    Route("/v1/hub-mcp/acp/sessions", acp_sessions),
]
