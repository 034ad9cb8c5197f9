"""Read model of the Library: one row per deliverable (deleted ones are gone), for the Library screen's
cards, its search and its filter by type."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.library import kind_of
from ..events.records import EventRecord
from .framework import Projection, Rows, evictable, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

library_items = evictable(sa.Table(
    "rm_library_items", metadata,
    sa.Column("number", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("filename", sa.String(200), nullable=False),
    sa.Column("media_type", sa.String(100), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("storage", sa.String(8), nullable=False),
    sa.Column("by", sa.String(80), nullable=False),
    sa.Column("task", sa.String(24)),
    sa.Column("project", sa.String(64)),
    sa.Column("submitted_at", sa.String(40), nullable=False),
))

ITEM_COLUMNS = ("number", "title", "kind", "media_type", "size", "by", "task", "project", "submitted_at")


class LibraryProjection(Projection):
    name = "library"
    version = 1
    tables = (library_items,)

    def on_Item_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_library_items", {
            "number": d["number"], "seq": int(d["number"][1:]), "title": d["title"], "description": d["description"],
            "filename": d["filename"], "media_type": d["media_type"], "kind": kind_of(d["media_type"]),
            "size": d["size"], "sha256": d["sha256"], "storage": d["storage"], "by": e.actor, "task": d.get("task"),
            "project": d.get("project"), "submitted_at": e.at})

    def on_Item_Deleted(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_library_items", e.data["number"])


def item_rows(models: ReadModels, q: str | None, kind: str | None, limit: int) -> list[dict]:
    t = library_items
    where = []
    if kind:
        where.append(t.c.kind == kind)
    if q:
        like = f"%{q.lower()}%"
        where.append(sa.or_(sa.func.lower(t.c.title).like(like), sa.func.lower(t.c.description).like(like),
                            sa.func.lower(t.c.filename).like(like)))
    rows = models.rows(t, *where, order_by=t.c.seq.desc(), limit=limit)
    for r in rows:
        del r["seq"]
    return rows


def item_row(models: ReadModels, number: str) -> dict:
    rows = models.rows(library_items, library_items.c.number == number)
    if not rows:
        raise Refusal("no_item", f"no library item {number}")
    del rows[0]["seq"]
    return rows[0]
