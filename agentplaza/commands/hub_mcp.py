"""The hub as an MCP server: switch it, set its mode and origins, issue and revoke tokens, record calls
(see ``domain.hub_mcp``)."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import uuid

from ..domain.base import Context, Refusal
from ..domain.hub_mcp import HUB_MCP_ID, HubMcp, McpCall, McpRecommendation, McpToken
from ..wire import MCP_TOKEN_PREFIX
from . import approvals
from .unit import Commands, Done, Unit

#: The random part of a token, in bytes.
TOKEN_BYTES = 32


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _settings(unit: Unit, ctx: Context) -> HubMcp:
    return unit.get(HUB_MCP_ID) or HubMcp.open(ctx)


def switch(cmds: Commands, ctx: Context, enabled: bool, remote: bool, serves_https: bool) -> Done[None]:
    def decide(unit: Unit) -> None:
        m = _settings(unit, ctx)
        m.switch(ctx, enabled, remote, serves_https)
        unit.add(m)

    return cmds.run(decide)


def configure(cmds: Commands, ctx: Context, *, mode: str | None = None, open_scope: str | None = None,
              origins: list[str] | None = None) -> Done[None]:
    """The console's switches: the mode (and open scope), the origins, or both."""
    def decide(unit: Unit) -> None:
        m = _settings(unit, ctx)
        if mode is not None or open_scope is not None:
            m.set_mode(ctx, mode or m.mode, open_scope or m.open_scope)
        if origins is not None:
            m.set_origins(ctx, origins)
        unit.add(m)

    return cmds.run(decide)


def create_token(cmds: Commands, ctx: Context, name: str, scope: str, tools: list[str], expires_at: dt.datetime | None,
                 scope_of_tool: dict[str, str]) -> Done[dict]:
    """A new token: its id and record, and its value (returned here once, kept nowhere)."""
    value = MCP_TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    token_id = uuid.uuid4()

    def decide(unit: Unit) -> dict:
        t = McpToken.issue(ctx, token_id, name, scope, tools, expires_at, token_sha256(value), scope_of_tool)
        unit.add(t)
        return {"id": token_id.hex, "token": value}

    return cmds.run(decide)


def revoke_token(cmds: Commands, ctx: Context, token_id: uuid.UUID) -> Done[None]:
    def decide(unit: Unit) -> None:
        t = unit.get(token_id)
        if not isinstance(t, McpToken):
            raise Refusal("unknown_token", f"no MCP token {token_id.hex}")
        t.revoke(ctx)
        unit.add(t)

    return cmds.run(decide)


def record_call(cmds: Commands, ctx: Context, caller: str, via: str, tool: str, digest: str, outcome: str,
                code: str | None, ms: int) -> Done[None]:
    def decide(unit: Unit) -> None:
        unit.add(McpCall.start(ctx, id=uuid.uuid4(), caller=caller, via=via, tool=tool, digest=digest,
                               outcome=outcome, code=code, ms=ms))

    return cmds.run(decide)


def recommend(cmds: Commands, ctx: Context, number: str, verdict: str, note: str, caller: str) -> Done[dict]:
    """request_decision: the caller's advice on a pending approval, recorded for the owner; nothing decided."""
    def decide(unit: Unit) -> dict:
        a = approvals.load_in(unit, number)
        rec = McpRecommendation.make(ctx, uuid.uuid4(), number, a.status, verdict, note, caller)
        unit.add(rec)
        return {"approval": number, "recommendation": verdict, "decided": False}

    return cmds.run(decide)
