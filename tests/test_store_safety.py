"""The store refuses what it could not read back, and a poisoned command never fails its neighbours.

Values are put straight into aggregates (no HTTP gate in front), as a bug in a
command, a provider's answer or an older client could.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from support.tally import Tally

from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Context, PlazaAggregate, Refusal
from agentplaza.domain.refusals import Kind
from agentplaza.events.committer import GroupCommitter, StoreClosed
from agentplaza.events.storable import INT_MAX, INT_MIN, UnstorableEvent, stored_form, stored_problem
from agentplaza.events.store import EventStore

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def ctx(reason: str | None = "test") -> Context:
    return Context(actor="owner", at=T0, correlation_id="c-1", reason=reason)


class Note(PlazaAggregate):
    """An aggregate whose event carries any value at all."""

    class Created(PlazaAggregate.Created):
        body: Any


def nested(depth: int) -> list:
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


POISON = {
    "nan": float("nan"),
    "infinity": float("inf"),
    "minus_infinity": float("-inf"),
    "int_2_70": 2**70,
    "int_2_63": 2**63,
    "int_below_min": INT_MIN - 1,
    "nul_in_string": "a\x00b",
    "nul_in_key": {"k\x00": 1},
    "lone_surrogate": "x\ud800y",
    "surrogate_in_key": {"\udfff": 1},
    "nan_deep_inside": {"detail": [1, {"x": float("nan")}]},
    "too_deep": nested(2_000),
}

FINE = {
    "int_max": INT_MAX,
    "int_min": INT_MIN,
    "big_float": 1.5e308,
    "unicode": "café ☕ 𝄞",
    "backslash_u_text": "\\u0000 is how JSON writes NUL",
    "long_digits_in_text": "9" * 40,
}


@pytest.fixture
def store(folders, database_url):
    s = EventStore.open(state_dir=folders.state, database_url=database_url)
    yield s
    s.close()


@pytest.mark.parametrize("name", sorted(POISON))
def test_an_event_that_would_not_read_back_is_refused_and_nothing_is_written(store, name):
    store.commit(Tally.start(ctx(), label="before"))
    with pytest.raises(UnstorableEvent) as e:
        store.commit(Note.start(ctx(), body=POISON[name]))
    assert isinstance(e.value, Refusal)
    assert (e.value.code, e.value.kind) == ("unstorable_event", Kind.INVALID)
    assert "Note.Created cannot be stored" in e.value.message and "nothing was written" in e.value.message
    assert "\x00" not in e.value.message and "\ud800" not in e.value.message
    assert store.max_position() == 1
    assert [r.kind for r in store.read()] == ["Tally.Created"]
    assert store.verify().intact
    store.commit(Tally.start(ctx(), label="after"))  # the store goes on
    assert [r.data.get("label") for r in store.read()] == ["before", "after"]


def test_the_refusal_names_the_field_and_never_the_value(store):
    with pytest.raises(UnstorableEvent) as e:
        store.commit(Note.start(ctx(), body={"detail": {"x": float("nan")}}))
    assert "body.detail.x" in e.value.message and "not finite" in e.value.message
    with pytest.raises(UnstorableEvent) as e:
        store.commit(Note.start(ctx(reason="sk-secret\x00"), body=1))
    assert "reason" in e.value.message and "sk-secret" not in e.value.message


@pytest.mark.parametrize("name", sorted(FINE))
def test_values_at_the_edge_of_the_rules_are_stored_and_read_back_exactly(store, name):
    store.commit(Note.start(ctx(), body=FINE[name]))
    (rec,) = store.read()
    assert rec.data["body"] == FINE[name]


def test_a_command_with_a_poisoned_event_is_a_clear_refusal_through_commands(store):
    cmds = Commands(store, clock=lambda: T0)
    with pytest.raises(UnstorableEvent):
        cmds.run(lambda unit: unit.add(Note.start(ctx(), body=float("nan"))))
    assert cmds.run(lambda unit: unit.add(Note.start(ctx(), body=1.0))).positions == [1]


def test_poisoned_commands_among_concurrent_good_ones_fail_alone(store):
    cmds = Commands(store, clock=lambda: T0)
    tallies = [Tally.start(ctx(), label=str(i)) for i in range(8)]
    store.commit(*tallies)
    start = threading.Barrier(16)
    refused, errors = [], []

    def good(i: int) -> None:
        start.wait()
        for _ in range(20):
            def decide(unit, i=i):
                t = unit.get(tallies[i].id)
                t.count(ctx())
                unit.add(t)
            try:
                cmds.run(decide)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    def poisoned(i: int) -> None:
        start.wait()
        for k in range(20):
            try:
                cmds.run(lambda unit, k=k: unit.add(Note.start(ctx(), body=list(POISON.values())[(i + k) % len(POISON)])))
            except UnstorableEvent:
                refused.append(k)

    threads = [threading.Thread(target=good, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=poisoned, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(refused) == 8 * 20
    assert all(store.get(t.id).total == 20 for t in tallies)
    assert [r.kind for r in store.read()].count("Tally.Counted") == 8 * 20
    assert "Note.Created" not in {r.kind for r in store.read()}
    assert store.verify().intact


def _held_batch(committer: GroupCommitter, jobs: list, timeout_s: float = 30) -> tuple[dict, dict]:
    """Queue every job behind a writer that is busy, then write them all as one group commit."""
    results, failures = {}, {}
    with committer._queue_lock:
        committer._writing = True  # as if another command were writing now

    def submit(name: str, events: list) -> None:
        try:
            results[name] = committer.submit(events)
        except BaseException as e:  # noqa: BLE001
            failures[name] = e

    threads = [threading.Thread(target=submit, args=job) for job in jobs]
    deadline = time.monotonic() + timeout_s
    for n, t in enumerate(threads, 1):  # one at a time: the queue holds them in the jobs' order
        t.start()
        while len(committer._queue) < n:
            assert time.monotonic() < deadline, "the jobs did not queue"
            time.sleep(0.01)
    committer._lead()  # the busy writer finishes: the whole queue is one batch
    for t in threads:
        t.join()
    return results, failures


def test_a_batch_the_database_refuses_is_written_again_command_by_command(store, backend):
    """Events that got past the check but that the database itself refuses (here: a version over
    64 bits on SQLite, a NUL in the topic on PostgreSQL) fail their own command only."""
    good = [Tally.start(ctx(), label=str(i)) for i in range(5)]
    jobs = [(f"good{i}", stored_form(store.app.mapper, t.collect_events())) for i, t in enumerate(good)]
    bad = stored_form(store.app.mapper, Tally.start(ctx(), label="bad").collect_events())[0]
    if backend == "sqlite":
        bad = StoredEvent(bad.originator_id, 2**70, bad.topic, bad.state)
    else:
        bad = StoredEvent(bad.originator_id, bad.originator_version, bad.topic + "\x00", bad.state)
    jobs.insert(2, ("bad", [bad]))
    results, failures = _held_batch(store.committer, jobs)
    assert set(failures) == {"bad"}
    assert sorted(p for ps in results.values() for p in ps) == [1, 2, 3, 4, 5]
    assert [r.data["label"] for r in store.read()] == [str(i) for i in range(5)]
    assert store.verify().intact
    store.commit(Tally.start(ctx(), label="later"))  # the committer survived
    assert store.max_position() == 6


def test_stored_bytes_are_judged_by_the_same_rules_on_the_way_back():
    assert stored_problem(b'{"a":1}') is None
    assert "cannot read" in stored_problem(b'{"a":NaN}')
    assert "cannot read" in stored_problem(b"not json at all")
    assert "signed 64 bits" in stored_problem(b'{"a":%d}' % 2**70)
    assert "NUL" in stored_problem(b'{"a":"x\\u0000"}')
    assert "not a JSON object" in stored_problem(b"[1]")
    assert stored_problem(b'{"a":"\\\\u0000"}') is None  # a backslash and "u0000" is text, not NUL


def test_closing_waits_for_the_write_under_way_and_refuses_any_after():
    """The hub closes its store while a harness's last command may still be writing (the runtime's
    threads end as its machines stop): the store's database must not be closed under that write (a
    connection closed inside a writer's execute crashed the process), and a command after the close
    is a clear error."""

    class SlowRecorder:
        def __init__(self):
            self.inside, self.wrote = threading.Event(), []

        def insert_events(self, events):
            self.inside.set()
            time.sleep(0.3)
            self.wrote.append(len(events))
            return list(range(1, len(events) + 1))

    rec = SlowRecorder()
    committer = GroupCommitter(rec)
    out = {}
    writer = threading.Thread(target=lambda: out.setdefault("positions", committer.submit(["e1", "e2"])))
    writer.start()
    assert rec.inside.wait(10)
    committer.close()
    assert rec.wrote == [2], "close returned while the write was still inside the database"
    writer.join(10)
    assert out["positions"] == [1, 2]
    with pytest.raises(StoreClosed):
        committer.submit(["e3"])
    assert rec.wrote == [2]
