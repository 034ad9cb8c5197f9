"""Read models of the hub as an MCP server: its switches, the tokens (hashes, never values), the call
log (a digest of each call's arguments, never the arguments) and the recommendations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

SETTINGS_KEY = "hub"
DEFAULT_SETTINGS = {"enabled": False, "remote": False, "mode": "secure", "open_scope": "observe", "origins": [],
                    "acp_enabled": False, "acp_write_back": False, "acp_v2": False}

mcp_settings = sa.Table(
    "rm_mcp_settings", metadata,
    sa.Column("key", sa.String(16), primary_key=True),
    sa.Column("settings", sa.JSON, nullable=False),
)
mcp_tokens = sa.Table(
    "rm_mcp_tokens", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("tools", sa.JSON, nullable=False),
    sa.Column("expires_at", sa.String(40)),
    sa.Column("sha256", sa.String(64), nullable=False, index=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("revoked_at", sa.String(40)),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("last_call_at", sa.String(40)),
)
mcp_calls = append_only(sa.Table(
    "rm_mcp_calls", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("caller", sa.String(80), nullable=False, index=True),
    sa.Column("via", sa.String(8), nullable=False),
    sa.Column("tool", sa.String(80), nullable=False, index=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("code", sa.String(64)),
    sa.Column("ms", sa.BigInteger, nullable=False),
))
mcp_recommendations = append_only(sa.Table(
    "rm_mcp_recommendations", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("approval", sa.String(40), nullable=False, index=True),
    sa.Column("verdict", sa.String(16), nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("caller", sa.String(80), nullable=False),
))

#: The editor sessions over ACP (``domain.acp``), kept with the rest of the plaza state.
acp_sessions = sa.Table(
    "rm_acp_sessions", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.Integer, nullable=False, index=True),
    sa.Column("caller", sa.String(80), nullable=False),
    sa.Column("protocol", sa.Integer, nullable=False),
    sa.Column("cwd", sa.Text, nullable=False),
    sa.Column("title", sa.String(200)),
    sa.Column("prompts", sa.Integer, nullable=False),
    sa.Column("last_item", sa.String(40)),
    sa.Column("items", sa.JSON, nullable=False),  # each prompt's work item, in order
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)


class HubMcpProjection(Projection):
    name = "hub_mcp"
    version = 2
    tables = (mcp_settings, mcp_tokens, mcp_calls, mcp_recommendations, acp_sessions)

    def on_HubMcp_AcpSet(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, acp_enabled=e.data["acp_enabled"], acp_write_back=e.data["acp_write_back"],
                  acp_v2=e.data["acp_v2"])

    def on_AcpSession_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_acp_sessions", {"id": _hex(e.originator_id), "cid": d["cid"], "caller": d["caller"],
                                     "protocol": d["protocol"], "cwd": d["cwd"], "title": None, "prompts": 0,
                                     "last_item": None, "items": [], "created_at": e.at, "updated_at": e.at})

    def on_AcpSession_Prompted(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_acp_sessions", _hex(e.originator_id))
        if row is not None:
            rows.put("rm_acp_sessions", {**row, "title": e.data["title"] or row["title"], "prompts": row["prompts"] + 1,
                                         "last_item": e.data["item"], "items": [*row["items"], e.data["item"]],
                                         "updated_at": e.at})

    def on_AcpSession_Opened(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_acp_sessions", _hex(e.originator_id))
        if row is not None:
            rows.put("rm_acp_sessions", {**row, "updated_at": e.at})

    def _set(self, rows: Rows, **changes) -> None:
        row = rows.get("rm_mcp_settings", SETTINGS_KEY)
        settings = dict(row["settings"]) if row else dict(DEFAULT_SETTINGS)
        settings.update(changes)
        rows.put("rm_mcp_settings", {"key": SETTINGS_KEY, "settings": settings})

    def on_HubMcp_Switched(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, enabled=e.data["enabled"], remote=e.data["remote"])

    def on_HubMcp_ModeSet(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, mode=e.data["mode"], open_scope=e.data["open_scope"])

    def on_HubMcp_OriginsSet(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, origins=list(e.data["origins"]))

    def on_McpToken_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_mcp_tokens", {"id": _hex(e.originator_id), "name": d["name"], "scope": d["scope"],
                                   "tools": list(d["tools"]), "expires_at": d["expires_at"], "sha256": d["sha256"],
                                   "created_at": e.at, "revoked_at": None, "calls": 0, "last_call_at": None})

    def on_McpToken_Revoked(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_mcp_tokens", _hex(e.originator_id))
        if row is not None:
            rows.put("rm_mcp_tokens", {**row, "revoked_at": e.at})

    def on_McpCall_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_mcp_calls", {"position": e.position, "at": e.at, "caller": d["caller"], "via": d["via"],
                                  "tool": d["tool"], "digest": d["digest"], "outcome": d["outcome"],
                                  "code": d["code"], "ms": d["ms"]})
        if d["caller"].startswith("token:"):
            row = rows.get("rm_mcp_tokens", d["caller"][len("token:"):])
            if row is not None:
                rows.put("rm_mcp_tokens", {**row, "calls": row["calls"] + 1, "last_call_at": e.at})

    def on_McpRecommendation_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_mcp_recommendations", {"position": e.position, "at": e.at, "approval": d["approval"],
                                            "verdict": d["verdict"], "note": d["note"], "caller": d["caller"]})


def _hex(originator_id: str) -> str:
    return originator_id.replace("-", "")


# -- Queries ---------------------------------------------------------------------------------------------------

def settings(rm: ReadModels) -> dict:
    found = rm.rows(mcp_settings, mcp_settings.c.key == SETTINGS_KEY)
    return dict(DEFAULT_SETTINGS, **(found[0]["settings"] if found else {}))


def token_by_hash(rm: ReadModels, sha256: str) -> dict | None:
    found = rm.rows(mcp_tokens, mcp_tokens.c.sha256 == sha256)
    return found[0] if found else None


def token_row(rm: ReadModels, token_id: str) -> dict | None:
    found = rm.rows(mcp_tokens, mcp_tokens.c.id == token_id)
    return _public(found[0]) if found else None


def tokens(rm: ReadModels) -> list[dict]:
    return [_public(r) for r in rm.rows(mcp_tokens, order_by=mcp_tokens.c.created_at)]


def _public(row: dict) -> dict:
    """A token as the owner sees it: never its hash."""
    return {k: v for k, v in row.items() if k != "sha256"}


def calls(rm: ReadModels, caller: str | None, tool: str | None, limit: int) -> list[dict]:
    where = []
    if caller:
        where.append(mcp_calls.c.caller == caller)
    if tool:
        where.append(mcp_calls.c.tool == tool)
    return rm.rows(mcp_calls, *where, order_by=mcp_calls.c.position.desc(), limit=limit)


def acp_sessions_list(rm: ReadModels, cid: int | None = None, limit: int = 100) -> list[dict]:
    where = [acp_sessions.c.cid == cid] if cid is not None else []
    return rm.rows(acp_sessions, *where, order_by=acp_sessions.c.updated_at.desc(), limit=limit)


def acp_session(rm: ReadModels, session_id: str) -> dict | None:
    found = rm.rows(acp_sessions, acp_sessions.c.id == session_id[:32])
    return found[0] if found else None


def recommendations(rm: ReadModels, approval: str | None = None) -> list[dict]:
    where = [mcp_recommendations.c.approval == approval] if approval else []
    return rm.rows(mcp_recommendations, *where, order_by=mcp_recommendations.c.position)
