"""Many stored states read in one call (``joined``, ``catalogue.records``) read exactly as each alone.

A rebuild decodes a thousand events at a time, their states joined into one JSON array.  Whatever
the states hold, and whatever their neighbours hold, each event's record (or the reason it cannot
be read) must be the one ``catalogue.record`` gives it alone: a read model must still equal its
rebuild, and a damaged state must be named, never folded.

``audit verify`` only checks that states read (``joined.check_objects``, with simdjson, not the store's
own reader): what it proves must be what ``storable.read_back`` reads, on tricky states and on states
mutated at random.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentplaza.domain.plaza import Plaza
from agentplaza.events import catalogue, joined, storable
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


def test_a_separator_is_drawn_new_each_time():
    assert joined.Separator().text != joined.Separator().text


def reads_as_object(state: Any) -> bool:
    try:
        return type(storable.read_back(state)) is dict
    except storable.StateProblem:
        return False


def proves_only_what_reads(states: list[Any]) -> bool:
    """``check_objects`` of ``states``: when it proves them, each state it does not name reads back as an
    object, and it names exactly those ``read_back`` looks at value by value.  Did it prove them?"""
    exact = joined.check_objects(states)
    if exact is None:
        return False
    for i, state in enumerate(states):
        assert (i in exact) == storable.needs_exact_read(state), state
        assert i in exact or reads_as_object(state), state
    return True


#: States where the two readers could part: simdjson reads past a byte order mark and one level deeper.
EDGES = [
    b"\xef\xbb\xbf" + event(), b" " + event(), event() + b"\n", b"{}", b' \t\r\n{"a":1}',
    b'{"a":' * 1023 + b"1" + b"}" * 1023, b'{"a":' * 1024 + b"1" + b"}" * 1024,
    b'{"a":' + b"[" * 1023 + b"]" * 1023 + b"}", b'{"a":' + b"[" * 1024 + b"]" * 1024 + b"}",
    b'{"n":18446744073709551615}', b'{"n":18446744073709551616}', b'{"n":-9223372036854775809}',
    b'{"f":1e400}', b'{"f":1e-400}', b'{"f":1.8e308}',
    b'{"s":"\\ud800"}', b'{"s":"\\udc00"}', b'{"s":"\\ud800\\udc00"}', b'{"s":"\\ud800\\u0041"}',
    b'{"s":"\xed\xa0\x80"}', b'{"s":"\xc0\xaf"}', b'{"s":"\xf4\x90\x80\x80"}', b'{"s":"\xff"}',
    b'{"s":"\x00"}', b'{"s":"\x7f"}', b'{"s":"\\u0000"}', b'{"a":1,"a":2}', b'{"a":1}\x00', b'{"a":1}\x0b',
]


@pytest.mark.parametrize("odd", range(len(STATES) + len(EDGES)))
def test_checking_that_states_read_proves_only_what_reads(odd, deep_compares):
    state = ([s for _, s in STATES] + EDGES)[odd]
    plain = [event(b'"n":%d' % i) for i in range(4)]
    for at in (0, 2, 4):
        proven = proves_only_what_reads(plain[:at] + [state] + plain[at:])
        if type(state) is bytes and len(state) < 2000 and not state.startswith(b"\xef\xbb\xbf"):
            assert proven == reads_as_object(state) or storable.needs_exact_read(state), state


def test_checking_that_states_read_proves_a_page_of_events_and_names_the_exact_ones():
    states = [event(b'"n":%d' % i) for i in range(10)]
    states[3] = event(b'"n":1234567890123456789')
    states[7] = event(b'"s":"\\u0000"')
    assert joined.check_objects(states) == {3, 7}
    assert joined.check_objects([]) == set()
    assert joined.check_objects(states[:2] + [b"[1]"]) is None  # not an object
    assert joined.check_objects(states[:2] + [event().decode()]) is None  # not bytes
    # Nested near a reader's limit, a state is left to ``read_back`` even where both readers read it.
    deep = joined.SHALLOW_BRACKETS
    assert joined.check_objects([b'{"a":' * (deep - 1) + b"1" + b"}" * (deep - 1)]) == set()
    assert joined.check_objects([b'{"a":' * deep + b"1" + b"}" * deep]) is None
    assert joined.check_objects([b'{"s":"' + b"[" * 3 * deep + b'"}']) is None  # (brackets in a string count too)


#: What a damaged or hostile state may hold: JSON's structure, escapes, numbers at the limits, bad UTF-8.
PIECES = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b" ", b"\t", b"\n", b"\x0b", b"\x00", b"\x1f", b"\x7f",
          b"\x80", b"\xc0", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xef\xbb\xbf", b"\\u0000", b"\\ud800",
          b"\\udc00", b"\\ud800\\udc00", b"\\u12", b"\\x", b"1", b"0", b"-", b"+", b".", b"e", b"99999999999999999999",
          b"1e400", b"-0", b"01", b"true", b"fals", b"null", b"NaN", b"Infinity", b"18446744073709551616", b"\xc3", b"\xff"]


@settings(max_examples=1_500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.floats(0, 1), st.sampled_from(PIECES)),
                min_size=1, max_size=3))
def test_a_mutated_state_is_proven_only_when_it_reads(edits):
    state = bytearray(event(b'"n":12,"s":"caf\\u00e9","l":[1,2.5,{"k":null}]'))
    for op, where, piece in edits:
        at = int(where * len(state))
        if op == "insert":
            state[at:at] = piece
        elif op == "delete":
            del state[at : at + 2]
        else:
            state[at : at + 1] = piece
    proves_only_what_reads([event(), bytes(state), event()])
