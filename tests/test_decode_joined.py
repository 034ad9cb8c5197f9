"""Many stored states read in one call (``joined``, ``catalogue.records``) read exactly as each alone.

A rebuild decodes a thousand events at a time, their states joined into one JSON array.  Whatever
the states hold, and whatever their neighbours hold, each event's record (or the reason it cannot
be read) must be the one ``catalogue.record`` gives it alone: a read model must still equal its
rebuild, and a damaged state must be named, never folded.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from agentplaza.domain.plaza import Plaza
from agentplaza.events import catalogue, joined
from agentplaza.events.records import EventRecord, UnreadableEvent
from agentplaza.projections.framework import DECODE_JOINED, decoded

OID = "0" * 32
TOPIC = "agentplaza.domain.plaza:Plaza.Held"
TS = b'"timestamp":{"_type_":"datetime_iso","_data_":"2026-12-05T10:00:00+00:00"}'


class Strict(Plaza):
    """A later schema whose upcaster cannot read a state without a ``name``."""

    class Created(Plaza.Created):
        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict) -> None:
            state["title"] = state["name"].upper()


STRICT = f"{Strict.__module__}:Strict.Created"


def event(body: bytes = b'"n":1') -> bytes:
    return b"{" + TS + b"," + body + b',"actor":"owner","correlation_id":"c-1"}'


#: States that read alone, states that do not, and states that read only beside each other.
STATES: list[tuple[str, Any]] = [
    (TOPIC, event()),
    (TOPIC, b'{"a":[{}'), (TOPIC, b"{}]}"), (TOPIC, b"{},{}"),  # read together as three objects only
    (TOPIC, b'{"a":NaN}'), (TOPIC, b"not json"), (TOPIC, b"[1]"), (TOPIC, b"7"), (TOPIC, b""),
    (TOPIC, event(b'"n":%d' % 2**70)), (TOPIC, event(b'"n":9223372036854775807')),
    (TOPIC, event(b'"s":"x\\u0000"')), (TOPIC, event(b'"s":"\\\\u0000"')),
    (TOPIC, b'{"digits":12345678901'), (TOPIC, b'23456789}'),  # a run of digits across a join
    (TOPIC, event(b'"note":"' + b"7" * 40 + b'"')),
    (TOPIC, event(b'"deep":' + b"[" * 1023 + b"]" * 1023)),
    (TOPIC, event(b'"deep":' + b"[" * 1024 + b"]" * 1024)),
    (TOPIC, event(b'"at":{"_type_":"datetime_iso","_data_":"2026-12-05"}')),
    (STRICT, event(b'"name":"x"')), (STRICT, event()),  # upcast, and an upcaster that fails
    ("gone.module:Old.Thing", event()),  # a class the code no longer has
    (TOPIC, event().decode()),  # not bytes: read alone
]


def rows(states: list[tuple[str, Any]]) -> list[tuple]:
    return [(i + 1, OID, 1, topic, state) for i, (topic, state) in enumerate(states)]


def alone(row: tuple) -> Any:
    try:
        return catalogue.record(*row)
    except UnreadableEvent as e:
        return ("unreadable", e.position, e.reason)


def seen(rec: EventRecord | UnreadableEvent) -> Any:
    return ("unreadable", rec.position, rec.reason) if isinstance(rec, UnreadableEvent) else rec


def seen_if(found: Any, wanted: bool) -> Any:
    """What ``decoded`` gives for a row read alone as ``found``: its record only when its topic is wanted."""
    return found if wanted or not isinstance(found, EventRecord) else None


@pytest.fixture
def deep_compares():
    """Comparing the states nested about as deep as orjson reads takes Python's recursion that deep."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5_000)
    yield
    sys.setrecursionlimit(limit)


@pytest.mark.parametrize("start", range(len(STATES)))
def test_each_state_reads_as_it_reads_alone_whatever_its_neighbours(start, deep_compares):
    page = rows(STATES[start:] + STATES[:start])
    expected = [alone(r) for r in page]
    assert [seen(r) for r in catalogue.records(page, joined.Separator())] == expected
    assert [seen(r) for r in decoded(page)] == expected
    checked = [seen_if(r, False) for r in expected]  # a row of no wanted topic is only checked
    assert [None if r is None else seen(r) for r in decoded(page, wanted=())] == checked
    readable = [r for r in expected if isinstance(r, EventRecord)]
    assert {r.data.get("n") for r in readable} >= {1, 9223372036854775807}
    assert len(readable) < len(expected)


@pytest.mark.parametrize("odd", range(len(STATES)))
def test_one_odd_state_among_readable_ones_reads_as_alone(odd, deep_compares):
    """Beside readable neighbours only (so the joined read may prove the rest): each state of ``STATES``,
    and the three that read only together, at the start, in the middle and at the end of a page."""
    plain = [(TOPIC, event(b'"n":%d' % i)) for i in range(6)]
    for inserted in ([STATES[odd]], STATES[1:4]):
        for at in (0, 3, 6):
            page = rows(plain[:at] + inserted + plain[at:])
            assert [seen(r) for r in decoded(page)] == [alone(r) for r in page]
            assert [None if r is None else seen(r) for r in decoded(page, wanted={STRICT})] == [
                seen_if(alone(r), r[3] == STRICT) for r in page]


def test_a_page_of_readable_events_is_read_in_one_call_each_thousand(monkeypatch):
    calls = []
    real = joined.read_objects
    monkeypatch.setattr(catalogue, "read_objects", lambda states, sep: calls.append(len(states)) or real(states, sep))
    page = rows([(TOPIC, event(b'"n":%d' % i)) for i in range(2 * DECODE_JOINED + 5)])
    recs = list(decoded(page))
    assert calls == [DECODE_JOINED, DECODE_JOINED, 5]
    assert [r.data["n"] for r in recs] == list(range(2 * DECODE_JOINED + 5))
    assert recs == [catalogue.record(*r) for r in page]


def test_the_joined_read_proves_or_refuses():
    sep = joined.Separator()
    assert joined.read_objects([], sep) == ([], set())
    assert joined.read_objects([b'{"a":[{}', b"{}]}", b"{},{}"], sep) is None
    assert joined.read_objects([b'{"a":1}', b"[1]"], sep) is None  # not an object: each is read alone
    values, exact = joined.read_objects([b'{"a":1}', b'{"n":1234567890123456789}', b'{"s":"\\u0000"}'], sep)
    assert values == [{"a": 1}, {"n": 1234567890123456789}, {"s": "\x00"}] and exact == {1, 2}
    assert joined.read_objects([b'{"a":"' + sep.text.encode() + b'"}'], sep) == ([{"a": sep.text}], set())
