"""Outreach's read model: when the hub last sent each agent looking for people to work with, and how
often (``domain.outreach``). The runtime plans on it; the command checks again on the stored state.

- ``rm_outreach``: one row an agent that was ever sent, by the ``Outreach`` aggregate's id.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

outreach = sa.Table(
    "rm_outreach", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.BigInteger, nullable=False, index=True),
    sa.Column("last_at", sa.String(40)),  # None until the first outreach
    sa.Column("count", sa.BigInteger, nullable=False),
)


class OutreachProjection(Projection):
    name = "outreach"
    version = 1
    tables = (outreach,)

    def on_Outreach_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_outreach", {"id": e.originator_id, "cid": e.data["cid"], "last_at": None, "count": 0})

    def on_Outreach_Sent(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_outreach", e.originator_id)
        if row is not None:
            rows.put("rm_outreach", {**row, "last_at": e.at, "count": row["count"] + 1})


def last_outreach(read_models) -> dict[int, str]:
    """Each agent's last outreach (ISO time), by CID."""
    return {r["cid"]: r["last_at"] for r in read_models.rows(outreach) if r["last_at"] is not None}


def outreach_of(read_models, cid: int) -> dict:
    found = read_models.rows(outreach, outreach.c.cid == cid)
    return {"cid": cid, "last_at": found[0]["last_at"] if found else None, "count": found[0]["count"] if found else 0}
