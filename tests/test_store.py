"""The store: append, read in order, group commit, conflicts, the chain, upcasting."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from support.tally import Tally

from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.plaza import PLAZA_ID, Plaza
from agentplaza.events.committer import CommitConflict
from agentplaza.events.store import EventStore

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def ctx(reason: str | None = "test", actor: str = "owner") -> Context:
    return Context(actor=actor, at=T0, correlation_id="c-1", reason=reason)


@pytest.fixture
def store(folders, database_url):
    s = EventStore.open(state_dir=folders.state, database_url=database_url)
    yield s
    s.close()


def test_events_carry_who_when_why_and_read_back_in_order(store):
    plaza = Plaza.found(ctx("first start", "hub"))
    plaza.stop_all(ctx("checking the new law"))
    assert store.commit(plaza) == [1, 2]
    recs = list(store.read())
    assert [r.kind for r in recs] == ["Plaza.Created", "Plaza.Held"]
    held = recs[1]
    assert (held.actor, held.reason, held.correlation_id, held.family) == ("owner", "checking the new law", "c-1", "plaza")
    assert held.at == T0.isoformat()
    assert store.get(PLAZA_ID).held is True


def test_payloads_are_validated_before_anything_is_recorded(store):
    plaza = Plaza.found(ctx())
    with pytest.raises(Exception, match="Extra inputs"):
        plaza.record(Plaza.Held, ctx(), unexpected=1)
    tally = Tally.start(ctx(), label="x")
    with pytest.raises(Exception, match="valid integer"):
        tally.count(ctx(), by="3")
    assert len(tally.pending_events) == 1  # only Created


def test_a_refusal_changes_nothing(store):
    cmds = Commands(store, clock=lambda: T0)
    plaza = Plaza.found(ctx())
    store.commit(plaza)
    plaza = store.get(PLAZA_ID)
    with pytest.raises(Refusal) as e:
        plaza.resume(ctx())
    assert e.value.code == "plaza_running"
    assert store.commit(plaza) == []
    assert store.max_position() == 1
    assert cmds.store is store


def test_several_aggregates_are_saved_in_one_transaction(store):
    a, b = Tally.start(ctx(), label="a"), Tally.start(ctx(), label="b")
    store.commit(a, b)
    a2, b2 = store.get(a.id), store.get(b.id)
    a2.count(ctx())
    b2.count(ctx())
    stale_b = store.get(b.id)
    stale_b.count(ctx())
    store.commit(stale_b)
    with pytest.raises(CommitConflict):
        store.commit(a2, b2)  # b2 lost the race, so a2 is not stored either
    assert store.get(a.id).total == 0
    assert store.max_position() == 3


def test_group_commit_many_threads_no_event_lost(store):
    cmds = Commands(store, clock=lambda: T0)
    tallies = [Tally.start(ctx(), label=str(i)) for i in range(20)]
    store.commit(*tallies)
    errors = []

    def worker(i: int) -> None:
        try:
            for _ in range(25):
                def decide(unit, i=i):
                    t = unit.get(tallies[i].id)
                    t.count(ctx())
                    unit.add(t)
                cmds.run(decide)
                # and one shared aggregate that every thread fights over
                def shared(unit):
                    t = unit.get(tallies[0].id)
                    t.count(ctx(), by=1000)
                    unit.add(t)
                cmds.run(shared)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.get(tallies[0].id).total == 25 + 20 * 25 * 1000
    assert all(store.get(t.id).total == 25 for t in tallies[1:])
    positions = [r.position for r in store.read()]
    assert len(positions) == 20 + 20 * 25 * 2
    assert positions == sorted(positions)
    assert store.verify().intact


def test_audit_verify_names_the_first_tampered_position(store, backend):
    tally = Tally.start(ctx(), label="t")
    for _ in range(9):
        tally.count(ctx())
    store.commit(tally)
    v = store.verify()
    assert v.intact and v.count == 10 and v.head != bytes(32)
    _tamper(store, backend, "UPDATE stored_events SET state = {flip} WHERE {id} = 6")
    v = store.verify()
    assert not v.intact and v.broken_at == 6 and "does not match" in v.problem


def test_audit_verify_names_a_removed_event(store, backend):
    tally = Tally.start(ctx(), label="t")
    for _ in range(5):
        tally.count(ctx())
    store.commit(tally)
    _tamper(store, backend, "DELETE FROM stored_events WHERE {id} = 3")
    v = store.verify()
    assert not v.intact and v.broken_at == 3 and "removed" in v.problem


def test_audit_verify_notices_the_last_event_removed(store, backend):
    tally = Tally.start(ctx(), label="t")
    tally.count(ctx())
    store.commit(tally)
    _tamper(store, backend, "DELETE FROM stored_events WHERE {id} = 2")
    v = store.verify()
    assert not v.intact and v.broken_at == 2


def _tamper(store, backend, sql: str) -> None:
    if backend == "sqlite":
        flip = "CAST(substr(state,1,10) || 'X' || substr(state,12) AS BLOB)"
        sql = sql.format(flip=flip, id="rowid")
    else:
        flip = "overlay(state placing '\\x58'::bytea from 11 for 1)"
        sql = sql.format(flip=flip, id="notification_id")
    sql = sql.replace("stored_events", store.events_table)
    with store.app.factory.datastore.transaction(commit=True) as c:
        c.execute(sql)


class Renamed(Plaza):
    """A later schema of the plaza: Created gained a `motto` in version 2."""

    class Created(Plaza.Created):
        class_version = 2
        motto: str

        @staticmethod
        def upcast_v1_v2(state: dict) -> None:
            state["motto"] = "agents under laws"

    def __init__(self, name: str, motto: str):
        super().__init__(name)
        self.motto = motto


def test_an_old_event_is_upcast_on_load_and_on_read(store):
    # Version 1 of the event, as an older plaza stored it.
    old = Plaza.found(ctx())
    event = old.pending_events[0]
    stored = store.app.mapper.to_stored_event(event)
    stored = type(stored)(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=f"{Renamed.__module__}:Renamed.Created",
        state=stored.state.replace(b'"agentplaza.domain.plaza:Plaza"', f'"{Renamed.__module__}:Renamed"'.encode()),
    )
    assert b"motto" not in stored.state
    store.app.recorder.insert_events([stored])
    loaded = store.get(PLAZA_ID)
    assert isinstance(loaded, Renamed) and loaded.motto == "agents under laws"
    (rec,) = list(store.read())
    assert rec.data["motto"] == "agents under laws"
    assert store.verify().intact


def test_long_lived_aggregates_are_snapshotted_and_load_the_same(store, folders, database_url):
    from agentplaza.events.store import SNAPSHOT_EVERY

    tally = Tally.start(ctx(), label="busy")
    store.commit(tally)
    for i in range(SNAPSHOT_EVERY * 2 + 5):
        t = store.get(tally.id)
        t.count(ctx(), by=i)
        store.commit(t)
    snaps = list(store.app.snapshots.get(tally.id))
    assert [s.originator_version for s in snaps] == [SNAPSHOT_EVERY, SNAPSHOT_EVERY * 2]
    other = EventStore.open(state_dir=folders.state, database_url=database_url)  # a cold cache
    try:
        loaded = other.get(tally.id)
        assert loaded.total == sum(range(SNAPSHOT_EVERY * 2 + 5)) and loaded.version == SNAPSHOT_EVERY * 2 + 6
    finally:
        other.close()


def test_verify_while_others_commit_never_reads_a_false_break(store):
    """Events and their chain rows are read up to one head, so a commit during the walk is not a break."""
    tally = Tally.start(ctx(), label="busy")
    store.commit(tally)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            t = store.get(tally.id)
            t.count(ctx(), by=1)
            try:
                store.commit(t)
            except CommitConflict:
                pass

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        verdicts = [store.verify() for _ in range(30)]
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert all(v.intact for v in verdicts), [v.as_dict() for v in verdicts if not v.intact][:1]
    assert store.verify().intact
