"""Read model of the file store: one row per shared file (deleted ones are gone), for the Library
screen's shared files and the owner's ``library shared``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.library import kind_of
from ..events.records import EventRecord
from .framework import Projection, Rows, evictable, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

shared_files = evictable(sa.Table(
    "rm_shared_files", metadata,
    sa.Column("number", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("owner", sa.Integer, nullable=False),
    sa.Column("path", sa.String(300), nullable=False),
    sa.Column("filename", sa.String(200), nullable=False),
    sa.Column("media_type", sa.String(100), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("storage", sa.String(8), nullable=False),
    sa.Column("public", sa.Boolean, nullable=False),
    sa.Column("agents", sa.Text, nullable=False),  # JSON: the CIDs it is shared with by name
    sa.Column("shared_at", sa.String(40), nullable=False),
))


class FilesProjection(Projection):
    name = "files"
    version = 1
    tables = (shared_files,)

    def on_SharedFile_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_shared_files", {
            "number": d["number"], "seq": int(d["number"][1:]), "owner": d["owner"], "path": d["path"],
            "filename": d["filename"], "media_type": d["media_type"], "kind": kind_of(d["media_type"]),
            "size": d["size"], "sha256": d["sha256"], "storage": d["storage"], "public": d["public"],
            "agents": json.dumps(d["agents"]), "shared_at": e.at})

    def on_SharedFile_Deleted(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_shared_files", e.data["number"])


def _shown(r: dict) -> dict:
    r = dict(r)
    del r["seq"]
    r["agents"] = json.loads(r["agents"])
    r["by"] = f"agent:{r['owner']}"
    return r


def file_rows(models: ReadModels, q: str | None, kind: str | None, limit: int) -> list[dict]:
    t = shared_files
    where = []
    if kind:
        where.append(t.c.kind == kind)
    if q:
        like = f"%{q.lower()}%"
        where.append(sa.or_(sa.func.lower(t.c.filename).like(like), sa.func.lower(t.c.path).like(like)))
    return [_shown(r) for r in models.rows(t, *where, order_by=t.c.seq.desc(), limit=limit)]


def file_row(models: ReadModels, number: str) -> dict:
    rows = models.rows(shared_files, shared_files.c.number == number)
    if not rows:
        raise Refusal("no_shared_file", f"no shared file {number}")
    return _shown(rows[0])
