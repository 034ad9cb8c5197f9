"""The log's own read model: every stored event that cannot be read back, and the owner's voiding.

Every read model steps over an unreadable event (see ``framework``); this one
keeps a row for each, so the hub can name it at start and ``overview`` can
show it: its position, why it cannot be read, and the position of the
``Log.EventVoided`` that voids it, once the owner has.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

unreadable_events = sa.Table(
    "rm_unreadable_events",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("voided_at", sa.BigInteger),  # the position of the Log.EventVoided, once voided
    sa.Column("voided_by", sa.String(200)),
    sa.Column("voided_reason", sa.Text),
)


class UnreadableEvents(Projection):
    name = "unreadable"
    version = 1
    tables = (unreadable_events,)

    def on_unreadable(self, position: int, reason: str, rows: Rows) -> None:
        rows.put("rm_unreadable_events", {"position": position, "reason": reason, "voided_at": None,
                                          "voided_by": None, "voided_reason": None})

    def merge(self, rows: Rows, theirs: dict[str, list[dict]]) -> None:
        """A rebuild's other process's unreadable events (of its topics: each event is one process's).  A voiding
        is where its event is: both processes fold every ``Log.EventVoided``, each into the rows it has."""
        for other in theirs["rm_unreadable_events"]:
            rows.put("rm_unreadable_events", dict(other))

    def on_Log_EventVoided(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_unreadable_events", e.data["position"])
        if row is not None:
            rows.put("rm_unreadable_events", {**row, "voided_at": e.position, "voided_by": e.actor,
                                              "voided_reason": e.reason})
