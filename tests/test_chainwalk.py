"""``audit verify``'s fast walk (``chainwalk``) gives the reference walk's verdict, word for word.

The fast walk proves the log a segment at a time and, over a long log, splits it with a second
process; wherever a segment does not prove, the reference walk (``chain.verify``) takes over.
Here segments are 7 events and the second process starts from 20 events, so a log of about
seventy events crosses many segments and both halves, and every kind of damage is put in each
half: the verdict must be the reference walk's own (intact or not, count, head, position, the
first broken position and its words).
"""

from __future__ import annotations

import datetime as dt

import pytest
from support import tamper
from support.tally import Tally

from agentplaza.domain.base import Context
from agentplaza.events import chainwalk
from agentplaza.events.chain import CHAIN_TABLE, GENESIS, Anchor
from agentplaza.events.store import EventStore

T0 = dt.datetime(2026, 12, 5, 9, 0, tzinfo=dt.UTC)
#: Commits of these many events: chain rows of many sizes, some across segment boundaries.
COMMITS = (1, 9, 13, 4, 20, 2, 13, 1, 8)
EARLY, LATE = 12, 61  # a position in the first half and one in the second (the split is near the middle)


def ctx() -> Context:
    return Context(actor="owner", at=T0, correlation_id="c-1", reason="test")


@pytest.fixture
def store(folders, database_url, monkeypatch):
    monkeypatch.setattr(chainwalk, "SEGMENT_EVENTS", 7)
    monkeypatch.setattr(chainwalk, "PARALLEL_FROM", 20)
    monkeypatch.setattr(chainwalk, "HELPER_START_EVENTS", 0)
    monkeypatch.setattr(chainwalk, "cpus", lambda: 2)
    s = EventStore.open(state_dir=folders.state, database_url=database_url)
    for i, size in enumerate(COMMITS):
        # a label of 25 digits: a digit run that ``read_back`` reads the exact way, and that reads
        t = Tally.start(ctx(), label=f"{i}" * 25 if i % 3 == 0 else f"tally {i}")
        for _ in range(size - 1):
            t.count(ctx())
        s.commit(t)
    yield s
    s.close()


@pytest.fixture
def helpers(monkeypatch):
    """The stretches the second process reported (to see that it walked)."""
    seen = []
    result = chainwalk._Helper.result

    def spy(self):
        stretch = result(self)
        seen.append(stretch)
        return stretch

    monkeypatch.setattr(chainwalk._Helper, "result", spy)
    return seen


def reference(store: EventStore, anchors=()) -> dict:
    upto = max(store.max_position(), store.chain_head()[0])
    return store._walk_exact(0, GENESIS, upto, sorted(anchors, key=lambda a: a.position), True).as_dict()


def same_verdict(store: EventStore, anchors=()) -> dict:
    fast = store.verify(anchors).as_dict()
    assert fast == reference(store, anchors)
    return fast


@pytest.fixture
def exact_walks(store, monkeypatch):
    """Where the reference walk was asked to start (the fast walk hands it what it cannot prove)."""
    starts = []
    walk = store._walk_exact

    def spy(after, *rest):
        starts.append(after)
        return walk(after, *rest)

    monkeypatch.setattr(store, "_walk_exact", spy)
    return starts


def put_state(store: EventStore, position: int, state: bytes) -> None:
    """The bytes at ``position`` replaced and every link from there recomputed: only reading tells."""
    tamper.rewrite(store, position, lambda _old: state)


def sql(store: EventStore, statement: str, *params) -> None:
    statement = statement.format(events=store.events_table, id=store._id_col(), ph=store._ph(), chain=CHAIN_TABLE)
    tamper._execute(store, [(statement, params)])


def test_an_intact_log_the_second_process_walking_its_second_half(store, helpers, exact_walks):
    v = store.verify().as_dict()
    assert exact_walks == []  # proven by the fast walk alone
    assert v == reference(store)
    assert v["intact"] and v["count"] == sum(COMMITS) and v["position"] == sum(COMMITS)
    (theirs,) = helpers
    assert theirs.stopped is None and theirs.count > 0 and theirs.last == sum(COMMITS)


def test_the_reference_walk_starts_at_the_segment_that_did_not_prove(store, exact_walks):
    put_state(store, LATE, b'{"a":1')
    v = store.verify()
    assert not v.intact and v.broken_at == LATE
    (start,) = exact_walks
    assert LATE - chainwalk.SEGMENT_EVENTS <= start < LATE


def test_one_process_below_the_threshold(store, helpers, monkeypatch):
    monkeypatch.setattr(chainwalk, "PARALLEL_FROM", 10**9)
    assert same_verdict(store)["intact"]
    assert helpers == []


@pytest.mark.parametrize("at", [1, EARLY, LATE, sum(COMMITS)])
def test_changed_bytes(store, backend, at):
    flip = ("CAST(substr(state,1,10) || 'X' || substr(state,12) AS BLOB)" if backend == "sqlite"
            else "overlay(state placing '\\x58'::bytea from 11 for 1)")
    sql(store, f"UPDATE {{events}} SET state = {flip} WHERE {{id}} = {at}")
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == at and "does not match" in v["problem"]


@pytest.mark.parametrize("at", [EARLY, LATE])
@pytest.mark.parametrize("state", [
    b'{"a":1',                                        # not JSON
    b'{"n":123456789012345678901234567890}',          # an integer beyond 64 bits
    b'{"s":"\\u0000"}',                               # a NUL
    b'{"x":NaN}',                                     # what issue 16's request wrote
    b'[1,2]',                                         # not an object
])
def test_unreadable_bytes_under_a_recomputed_chain(store, at, state):
    put_state(store, at, state)
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == at and "cannot be read" in v["problem"]


@pytest.mark.parametrize("at", [EARLY, LATE])
def test_states_that_only_read_together_are_each_unreadable(store, at):
    # Joined with plain commas these read as three objects in a list of three: one state closes
    # another's brackets and a third gives the count back.  Each alone is not one JSON object.
    for i, state in enumerate((b'{"a":[{}', b'{}]}', b'{},{}')):
        put_state(store, at + i, state)
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == at and "cannot be read" in v["problem"]


@pytest.mark.parametrize("at", [EARLY, LATE])
def test_a_long_digit_run_in_a_string_reads(store, at):
    put_state(store, at, b'{"note":"' + b"7" * 40 + b'","n":1}')
    assert same_verdict(store)["intact"]


@pytest.mark.parametrize("at", [EARLY, LATE])
def test_a_removed_event(store, at):
    sql(store, "DELETE FROM {events} WHERE {id} = {ph}", at)
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == at and "removed" in v["problem"]


def test_a_removed_chain_row(store):
    first = sum(COMMITS[:5]) + 1  # the commit of 2 events in the second half
    sql(store, "DELETE FROM {chain} WHERE first_position = {ph}", first)
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == first and "no chain link" in v["problem"]


def test_the_last_transaction_cut(store):
    tamper.cut_last_transaction(store)
    assert same_verdict(store)["intact"]  # (what only an anchor shows)
    anchor = Anchor(sum(COMMITS), bytes(32), "given")
    v = same_verdict(store, [anchor])
    assert not v["intact"] and "were removed" in v["problem"]


def test_events_without_links_after_the_last(store):
    store.commit(Tally.start(ctx(), label="late"))
    sql(store, "DELETE FROM {chain} WHERE first_position = {ph}", sum(COMMITS) + 1)
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == sum(COMMITS) + 1 and "no chain link" in v["problem"]


@pytest.mark.parametrize("at", [EARLY, LATE, sum(COMMITS)])
def test_anchors(store, at):
    good = Anchor(at, store.link_at(at), "given")
    assert same_verdict(store, [good])["intact"]
    wrong = Anchor(at, bytes(32), "given")
    v = same_verdict(store, [good, wrong] if at != EARLY else [wrong])
    assert not v["intact"] and v["broken_at"] == at and "differs from" in v["problem"]
    beyond = Anchor(sum(COMMITS) + 5, bytes(32), "given")
    assert not same_verdict(store, [good, beyond])["intact"]


def test_the_second_process_failing_leaves_its_half_to_the_first(store, helpers, monkeypatch):
    monkeypatch.setattr(chainwalk._Helper, "result", lambda self: (self.cancel(), None)[1])
    put_state(store, LATE, b'{"a":1')
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == LATE


def test_verify_after_is_the_reference_walk_from_a_head(store):
    upto = store.max_position()
    head = store.link_at(EARLY)
    fast = store.verify_after(EARLY, head, upto)
    ref = store._walk_exact(EARLY, head, upto, (), False)
    assert fast.as_dict() == ref.as_dict() and fast.intact and fast.count == upto - EARLY
    put_state(store, LATE, b'{"a":1')  # (verify_after hashes; it does not read)
    sql(store, "UPDATE {events} SET originator_version = 99 WHERE {id} = {ph}", LATE + 2)
    fast = store.verify_after(EARLY, head, upto)
    assert fast.as_dict() == store._walk_exact(EARLY, head, upto, (), False).as_dict()
    assert not fast.intact and fast.broken_at == LATE + 2


@pytest.mark.parametrize("backend", ["postgres"])  # (SQLite gives the next rowid: its positions have no gaps)
def test_positions_with_a_gap_are_proven_too(store, database_url, exact_walks):
    # On PostgreSQL positions come from a sequence: a transaction rolled back leaves a gap.
    # The chain spans the gap; so must the fast walk.
    import psycopg

    with psycopg.connect(database_url) as conn:
        conn.execute(f"INSERT INTO {store.events_table} (originator_id, originator_version, topic, state) "
                     "VALUES (gen_random_uuid(), 1, 'x:Y', '\\x7b7d'::bytea)")
        conn.rollback()
    store.commit(Tally.start(ctx(), label="after the gap"))
    positions = [r.position for r in store.read()]
    assert positions[-1] > positions[-2] + 1  # the gap is there
    v = store.verify().as_dict()
    assert exact_walks == [] and v == reference(store) and v["intact"] and v["count"] == sum(COMMITS) + 1


def test_a_second_process_that_cannot_open_the_store_is_said_and_its_half_walked_here(store, backend, monkeypatch, caplog):
    broken = {**store.reader_env(), "SQLITE_DBNAME": "file:/nonexistent/plaza.sqlite?mode=ro",
              "POSTGRES_DBNAME": "no_such_database"}
    monkeypatch.setattr(store, "reader_env", lambda: broken)
    put_state(store, LATE, b'{"a":1')
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == LATE
    assert "the second process failed" in caplog.text


def test_a_chain_row_that_is_not_whole_links(store):
    first = sum(COMMITS[:6]) + 1  # the row of the 13 events in the second half
    chopped = store._chain_row_at(first)[1][:-5]
    sql(store, "UPDATE {chain} SET links = {ph} WHERE first_position = {ph}", chopped, first)
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == first + 12


def test_segments_mark_every_piece_of_a_row_that_is_not_whole():
    rows = [(1, bytes(32 * 3)), (4, bytes(32 * 5 + 7)), (9, bytes(32 * 2))]
    segs = list(chainwalk.segments(rows, 0, 10, size=2))
    assert [s.positions for s in segs] == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
    assert [s.whole for s in segs] == [True, False, False, False, True]
    assert [s.after for s in segs] == [0, 2, 4, 6, 8]


@pytest.mark.parametrize("depth", [998, 999, 1022, 1023, 1024, 1025])
@pytest.mark.parametrize("opens", [b"[", b'{"a":'])
def test_states_nested_about_as_deep_as_orjson_reads(store, depth, opens):
    # orjson reads 1024 deep, simdjson as deep as its parser is set to: near there the fast walk leaves
    # the state to the reference walk, which decides.
    closes = b"]" if opens == b"[" else b"}"
    put_state(store, LATE, b'{"a":' + opens * depth + b"1" * (opens != b"[") + closes * depth + b"}")
    same_verdict(store)


@pytest.mark.parametrize("at", [EARLY, LATE])
def test_a_state_after_a_byte_order_mark_does_not_read(store, at):
    put_state(store, at, b"\xef\xbb\xbf" + b'{"n":1}')  # simdjson steps over the mark; orjson does not
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == at and "cannot be read" in v["problem"]


def test_several_states_to_read_the_exact_way_in_one_segment(store):
    first = sum(COMMITS[:6]) + 1  # 13 events in a row, in the second half
    put_state(store, first, b'{"a":"' + b"1" * 30 + b'","b":"\\u00e9' + b"2" * 19 + b'"}')
    put_state(store, first + 1, b'{"n":9223372036854775807}')  # the widest integer: reads
    assert same_verdict(store)["intact"]
    put_state(store, first + 3, b'{"n":9223372036854775808}')  # one more: does not
    v = same_verdict(store)
    assert not v["intact"] and v["broken_at"] == first + 3 and "64 bits" in v["problem"]
