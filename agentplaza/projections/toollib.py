"""Read model of the tool library: one row per version of each named tool, with its status, for the
Tools screen, ``agentplaza tools`` and the toolbox each agent is offered (``offered_for``, by the
domain's one rule ``toollib.version_for``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.toollib import APPROVED, REJECTED, offered_name, version_for
from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

tool_versions = sa.Table(
    "rm_tool_versions", metadata,
    sa.Column("key", sa.String(64), primary_key=True),  # name:version
    sa.Column("name", sa.String(40), nullable=False, index=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("author", sa.Integer, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("filename", sa.String(200), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("approval", sa.String(24), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("packaged_at", sa.String(40), nullable=False),
    sa.Column("decided_at", sa.String(40)),
)

VERSION_FIELDS = ("version", "author", "description", "filename", "size", "sha256", "approval", "status",
                  "packaged_at", "decided_at")


class ToolLibraryProjection(Projection):
    name = "toollib"
    version = 1
    tables = (tool_versions,)

    def on_LibraryTool_Packaged(self, e: EventRecord, rows: Rows) -> None:
        d, name = e.data, e.data["name"]
        rows.put("rm_tool_versions", {
            "key": f"{name}:{d['version']}", "name": name, "version": d["version"], "author": d["author"],
            "description": d["description"], "filename": d["filename"], "size": d["size"], "sha256": d["sha256"],
            "approval": d["approval"], "status": "pending", "packaged_at": e.at, "decided_at": None})

    def _decided(self, e: EventRecord, rows: Rows, status: str) -> None:
        key = f"{e.data['name']}:{e.data['version']}"
        row = rows.get("rm_tool_versions", key)
        if row is not None:
            rows.put("rm_tool_versions", dict(row, status=status, decided_at=e.at))

    def on_LibraryTool_Approved(self, e: EventRecord, rows: Rows) -> None:
        self._decided(e, rows, APPROVED)

    def on_LibraryTool_Rejected(self, e: EventRecord, rows: Rows) -> None:
        self._decided(e, rows, REJECTED)


def _versions(models: ReadModels, *where) -> dict[str, list[dict]]:
    t = tool_versions
    out: dict[str, list[dict]] = {}
    for r in sorted(models.rows(t, *where), key=lambda r: (r["name"], r["version"])):
        out.setdefault(r["name"], []).append(r)
    return out


def _summary(name: str, versions: list[dict]) -> dict:
    approved = [v["version"] for v in versions if v["status"] == APPROVED]
    return {"name": name, "tool": offered_name(name), "versions": len(versions),
            "approved": max(approved, default=None),
            "pending": [v["version"] for v in versions if v["status"] == "pending"],
            "description": versions[-1]["description"], "updated_at": versions[-1]["packaged_at"]}


def tool_rows(models: ReadModels) -> list[dict]:
    """Every named tool, with its newest approved version and those that wait."""
    return [_summary(n, vs) for n, vs in sorted(_versions(models).items())]


def tool_row(models: ReadModels, name: str) -> dict:
    found = _versions(models, tool_versions.c.name == name).get(name)
    if not found:
        raise Refusal("no_library_tool", f"no library tool {offered_name(name)}")
    return dict(_summary(name, found), versions=[{k: v[k] for k in VERSION_FIELDS} for v in reversed(found)])


def offered_for(models: ReadModels, cid: int) -> list[dict]:
    """The library tools this agent is offered now: each one's name, version and description."""
    out = []
    for name, vs in sorted(_versions(models, tool_versions.c.status != REJECTED).items()):
        v = version_for(vs, cid)
        if v is not None:
            out.append({"name": offered_name(name), "version": v["version"], "description": v["description"],
                        "status": v["status"]})
    return out
