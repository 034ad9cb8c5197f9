"""Memory's read model: each agent's notes with their links (and the notes that link back), and the plaza's
``warnings`` note, which folds the sanctions schedule's ``Conduct.Warned`` ("a note in its memory")."""

from __future__ import annotations

import json

import sqlalchemy as sa

from ..domain.memory import MAX_NOTE_CHARS, WARNINGS, links_of
from ..events.records import EventRecord
from .framework import Projection, Rows, evictable, metadata

notes = evictable(sa.Table(
    "rm_memory_notes", metadata,
    sa.Column("cid", sa.BigInteger, primary_key=True),
    sa.Column("slug", sa.String(120), primary_key=True),
    sa.Column("title", sa.String(120), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("links", sa.Text, nullable=False),  # JSON list of slugs
    sa.Column("by", sa.String(16), nullable=False),  # agent, or plaza (the warnings note)
    sa.Column("updated_at", sa.String(40), nullable=False),
))

memories = sa.Table(  # which aggregate is whose memory, and whose conduct
    "rm_memory_owners", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.BigInteger, nullable=False),
)


class MemoryProjection(Projection):
    name = "memory"
    version = 1
    tables = (notes, memories)

    def on_Memory_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_memory_owners", {"id": e.originator_id, "cid": e.data["cid"]})

    def on_Conduct_Created(self, e: EventRecord, rows: Rows) -> None:
        cid = str(e.data["cid"])
        if cid.isdigit():
            rows.put("rm_memory_owners", {"id": e.originator_id, "cid": int(cid)})

    def _cid(self, e: EventRecord, rows: Rows) -> int | None:
        owner = rows.get("rm_memory_owners", e.originator_id)
        return owner["cid"] if owner else None

    def on_Memory_NoteWritten(self, e: EventRecord, rows: Rows) -> None:
        cid = self._cid(e, rows)
        if cid is not None:
            d = e.data
            rows.put("rm_memory_notes", {"cid": cid, "slug": d["slug"], "title": d["title"], "text": d["text"],
                                         "links": json.dumps(links_of(d["text"])), "by": "agent", "updated_at": e.at})

    def on_Memory_NoteDeleted(self, e: EventRecord, rows: Rows) -> None:
        cid = self._cid(e, rows)
        if cid is not None:
            rows.delete("rm_memory_notes", (cid, e.data["slug"]))

    def on_Conduct_Warned(self, e: EventRecord, rows: Rows) -> None:
        cid = self._cid(e, rows)
        if cid is None:
            return
        old = rows.get("rm_memory_notes", (cid, WARNINGS))
        line = f"- {e.at[:19]}Z, law {e.data['law']}: {e.data['note']}\n"
        text = ((old["text"] if old else "# Warnings\n\n") + line)[-MAX_NOTE_CHARS:]  # the latest kept
        rows.put("rm_memory_notes", {"cid": cid, "slug": WARNINGS, "title": "Warnings", "text": text,
                                     "links": "[]", "by": "plaza", "updated_at": e.at})


def _shaped(r: dict, backlinks: list[str], with_text: bool) -> dict:
    out = {"note": r["slug"], "title": r["title"], "links": json.loads(r["links"]), "backlinks": backlinks,
           "by": r["by"], "updated_at": r["updated_at"]}
    if with_text:
        out["text"] = r["text"]
    return out


def memory_of(read_models, cid: int, note: str | None = None) -> dict:
    """An agent's notes (titles, links, backlinks), or with ``note`` that one note with its text."""
    rows = read_models.rows(notes, notes.c.cid == cid, order_by=notes.c.slug)
    back: dict[str, list[str]] = {}
    for r in rows:
        for target in json.loads(r["links"]):
            back.setdefault(target, []).append(r["slug"])
    if note is not None:
        found = next((r for r in rows if r["slug"] == note), None)
        return {"cid": cid, "note": _shaped(found, back.get(note, []), True) if found else None}
    return {"cid": cid, "notes": [_shaped(r, back.get(r["slug"], []), False) for r in rows]}
