"""The toolbox's read model: the discoveries agents shared, as the Tools view and ``plaza_toolbox`` list them
(flagged ones last and marked, then the most endorsed, then the latest)."""

from __future__ import annotations

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

discoveries = sa.Table(
    "rm_toolbox", metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("name", sa.String(120), nullable=False),
    sa.Column("how", sa.Text, nullable=False),
    sa.Column("verdict", sa.Text, nullable=False),
    sa.Column("link", sa.Text, nullable=False),
    sa.Column("by", sa.BigInteger, nullable=False),
    sa.Column("endorsements", sa.Integer, nullable=False),
    sa.Column("flagged", sa.Boolean, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
)

COLUMNS = ("id", "name", "how", "verdict", "link", "by", "endorsements", "flagged", "at", "updated_at")


class ToolboxProjection(Projection):
    name = "toolbox"
    version = 1
    tables = (discoveries,)

    def _change(self, rows: Rows, entry: str, e: EventRecord, **change) -> None:
        row = rows.get("rm_toolbox", entry)
        if row is not None:
            rows.put("rm_toolbox", {**row, **change})

    def on_Toolbox_Shared(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        if d.get("dropped"):
            rows.delete("rm_toolbox", d["dropped"])
        rows.put("rm_toolbox", {"id": d["entry"], "name": d["name"], "how": d["how"], "verdict": d["verdict"],
                                "link": d["link"], "by": d["by"], "endorsements": 0, "flagged": False,
                                "at": e.at, "updated_at": e.at, "position": e.position})

    def on_Toolbox_Updated(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._change(rows, d["entry"], e, how=d["how"], verdict=d["verdict"], link=d["link"], updated_at=e.at,
                     position=e.position)

    def on_Toolbox_Endorsed(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_toolbox", e.data["entry"])
        if row is not None:
            rows.put("rm_toolbox", {**row, "endorsements": row["endorsements"] + 1})

    def on_Toolbox_Flagged(self, e: EventRecord, rows: Rows) -> None:
        self._change(rows, e.data["entry"], e, flagged=True)

    def on_Toolbox_Removed(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_toolbox", e.data["entry"])


def discovery_rows(read_models, limit: int = 500) -> list[dict]:
    """The discoveries: unflagged first, the most endorsed first, then the latest; a flagged one last."""
    rows = sorted(read_models.rows(discoveries), key=lambda r: (r["flagged"], -r["endorsements"], -r["position"]))
    return [{k: r[k] for k in COLUMNS} for r in rows[:limit]]
