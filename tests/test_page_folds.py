"""A read model that folds a page at a time (``Projection.on_page``, as ``event_counts`` does) makes what the same
rule makes event by event, whatever the pages, wherever the read model stood, and counts no event that cannot
be read."""

from __future__ import annotations

import pytest

from agentplaza.events.records import EventRecord
from agentplaza.projections.framework import Projection, Rows, fold
from agentplaza.projections.plaza import EventCounts, event_counts

HELD = "agentplaza.domain.plaza:Plaza.Held"
MOVED = "gone.module:Plaza.Held"  # the same kind, from a module the code no longer has
CREATED = "agentplaza.domain.tasks:Task.Created"
OID = "0" * 32


class OneByOne(Projection):
    """``event_counts``' rule, an event at a time: the reference."""

    name = "one_by_one"
    tables = (event_counts,)

    def on_any(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_event_counts", e.kind)
        rows.put("rm_event_counts", {"kind": e.kind, "family": e.family, "count": (row["count"] if row else 0) + 1,
                                     "last_position": e.position, "last_at": e.at})


def state(minute: int) -> bytes:
    return b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-05T10:%02d:00+00:00"},"actor":"owner"}' % minute


def log() -> list[tuple]:
    topics = [HELD, CREATED, HELD, MOVED, CREATED, HELD, HELD, MOVED, CREATED, CREATED, HELD, MOVED]
    broken = {5, 6, 9, 12}  # the last Held of a page, the last Created and the log's last event among them
    return [(i, OID, 1, topic, b"not json" if i in broken else state(i))
            for i, topic in enumerate(topics, start=1)]


def folded(projection: Projection, rows: list[tuple], page: int, slot: list | None = None) -> list:
    slot = slot or [projection.new_rows(), 0]
    for first in range(0, len(rows), page):
        fold([projection], [slot], rows[first : first + page])
        slot[1] = rows[min(first + page, len(rows)) - 1][0]
    return slot


@pytest.mark.parametrize("page", [1, 2, 3, 5, 7, 100])
def test_counting_a_page_at_a_time_is_counting_each_event(page):
    rows = log()
    expected = folded(OneByOne(), rows, 1)[0].snapshot()
    assert folded(EventCounts(), rows, page)[0].snapshot() == expected
    held = next(r for r in expected["rm_event_counts"] if r["kind"] == "Plaza.Held")
    assert held["count"] == 6 and held["last_position"] == 11 and held["last_at"] == "2026-12-05T10:11:00+00:00"
    assert sum(r["count"] for r in expected["rm_event_counts"]) == 8


@pytest.mark.parametrize("ahead", [2, 5, 6, 11])
def test_a_page_that_begins_before_where_the_read_model_stands(ahead):
    rows = log()
    slot = folded(EventCounts(), rows[:ahead], 4)  # it has folded up to ``ahead``; the page starts at 1
    slot[1] = ahead
    both = [OneByOne(), EventCounts()]
    slots = [[both[0].new_rows(), 0], slot]
    fold(both, slots, rows)
    assert slots[1][0].snapshot() == slots[0][0].snapshot()


@pytest.mark.parametrize("cut", [3, 6, 9])
def test_two_halves_by_topic_merge_into_the_whole(cut):
    """A rebuild's two processes each count the topics they read (``owned``), the first also every topic of the
    events before ``cut`` (its first page); merged, the counts are the whole log's, and a kind whose two topics
    the two halves counted sums, its last event the later one."""
    rows = log()
    whole = folded(EventCounts(), rows, 100)[0]
    first, second = EventCounts(), EventCounts()
    mine = [first.new_rows(), 0]
    fold([first], [mine], rows[:cut])
    mine[1] = cut
    fold([first], [mine], rows[cut:], owned={"event_counts": {HELD, CREATED}})
    theirs = [second.new_rows(), cut]
    fold([second], [theirs], [r for r in rows if r[3] == MOVED])
    first.merge(mine[0], {"rm_event_counts": theirs[0].all("rm_event_counts")})
    assert mine[0].snapshot() == whole.snapshot()
