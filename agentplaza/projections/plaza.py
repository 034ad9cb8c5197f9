"""Read models of the plaza itself: the hold, its history, and what happened how often."""

from __future__ import annotations

import bisect
import collections
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Page, Projection, Rows, append_only, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

plaza_state = sa.Table(
    "rm_plaza",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("held", sa.Boolean, nullable=False),
    sa.Column("since", sa.String(40)),
    sa.Column("by", sa.String(200)),
    sa.Column("reason", sa.Text),
    sa.Column("founded_at", sa.String(40), nullable=False),
)

plaza_holds = append_only(sa.Table(
    "rm_plaza_holds",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("action", sa.String(10), nullable=False),  # "stop" or "resume"
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("by", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text),
))


class PlazaProjection(Projection):
    name = "plaza"
    version = 1
    tables = (plaza_state, plaza_holds)

    def on_Plaza_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_plaza", {
            "id": e.originator_id, "name": e.data["name"], "held": False,
            "since": e.at, "by": e.actor, "reason": None, "founded_at": e.at,
        })

    def _hold(self, e: EventRecord, rows: Rows, held: bool) -> None:
        row = dict(rows.get("rm_plaza", e.originator_id))
        row.update(held=held, since=e.at, by=e.actor, reason=e.reason)
        rows.put("rm_plaza", row)
        rows.put("rm_plaza_holds", {
            "position": e.position, "action": "stop" if held else "resume",
            "at": e.at, "by": e.actor, "reason": e.reason,
        })

    def on_Plaza_Held(self, e: EventRecord, rows: Rows) -> None:
        self._hold(e, rows, True)

    def on_Plaza_Resumed(self, e: EventRecord, rows: Rows) -> None:
        self._hold(e, rows, False)


event_counts = sa.Table(
    "rm_event_counts",
    metadata,
    sa.Column("kind", sa.String(200), primary_key=True),
    sa.Column("family", sa.String(100), nullable=False),
    sa.Column("count", sa.BigInteger, nullable=False),
    sa.Column("last_position", sa.BigInteger, nullable=False),
    sa.Column("last_at", sa.String(40), nullable=False),
)


class EventCounts(Projection):
    """How many events of each kind the log holds: the overview's activity figures.

    It folds a page at a time (``on_page``): it counts topics, and makes a record only of each kind's last
    event in the page (its time).  An event that cannot be read is not counted."""

    name = "event_counts"
    version = 1
    tables = (event_counts,)

    def on_page(self, page: Page, rows: Rows) -> None:
        topics = page.topics
        counts = collections.Counter(topics)
        last = {topic: i for i, topic in enumerate(topics)}  # each topic's last event in the page
        for position in page.unreadable:
            i = bisect.bisect_left(page.positions, position)
            if i < len(topics) and page.positions[i] == position:
                counts[topics[i]] -= 1
        if page.unreadable:  # each topic's last event that reads
            for topic, i in list(last.items()):
                while i >= 0 and (topics[i] != topic or page.positions[i] in page.unreadable):
                    i -= 1
                last[topic] = i
        # In the order of their last events: a kind two topics share (a class that moved) ends at its latest.
        for topic in sorted((t for t in counts if counts[t] > 0), key=last.__getitem__):
            e = page.record(last[topic])
            row = rows.get("rm_event_counts", e.kind)
            rows.put("rm_event_counts", {
                "kind": e.kind, "family": e.family, "count": (row["count"] if row else 0) + counts[topic],
                "last_position": e.position, "last_at": e.at,
            })

    def merge(self, rows: Rows, theirs: dict[str, list[dict]]) -> None:
        """A rebuild's other process's counts (of the events of its topics) added to these: a kind whose events
        both counted (two topics) sums, its last event the later of the two."""
        for other in theirs["rm_event_counts"]:
            row = rows.get("rm_event_counts", other["kind"])
            if row is None:
                rows.put("rm_event_counts", dict(other))
                continue
            later = other if other["last_position"] > row["last_position"] else row
            rows.put("rm_event_counts", {**later, "count": row["count"] + other["count"]})


# -- the queries of the plaza's screens -------------------------------------------------------------------


def state_view(read_models: ReadModels) -> dict:
    """The plaza's state: running or held, since when, by whom and why ("unknown" before it is founded)."""
    rows = read_models.rows(plaza_state)
    if not rows:
        return {"state": "unknown"}
    r = rows[0]
    return {
        "name": r["name"],
        "state": "held" if r["held"] else "running",
        "held": r["held"],
        "since": r["since"],
        "by": r["by"],
        "reason": r["reason"],
        "founded_at": r["founded_at"],
    }


def history_rows(read_models: ReadModels, limit: int) -> list[dict]:
    """The holds and resumes, newest first."""
    return read_models.rows(plaza_holds, order_by=sa.desc(plaza_holds.c.position), limit=limit)


def events_overview(read_models: ReadModels) -> dict:
    """The overview's events line: how many in all, and by family."""
    families: dict[str, int] = {}
    for row in read_models.rows(event_counts):
        families[row["family"]] = families.get(row["family"], 0) + row["count"]
    return {"total": sum(families.values()), "by_family": dict(sorted(families.items()))}
