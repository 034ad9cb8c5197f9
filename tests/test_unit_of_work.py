"""The unit of work: one object per aggregate in a unit, everything added saved in one commit,
and a decision's value given back with the positions it wrote."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from support.tally import Tally
from support.treasury import Plaza

from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import treasury as treasury_commands
from agentplaza.commands.unit import Commands, Done, Look
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.plaza import PLAZA_ID
from agentplaza.domain.plaza import held as plaza_held
from agentplaza.events.store import EventStore

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def ctx() -> Context:
    return Context(actor="owner", at=T0, correlation_id="c")


@pytest.fixture
def cmds(folders, database_url):
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    yield Commands(store, clock=lambda: T0)
    store.close()


def test_a_decision_gives_its_value_and_the_positions_of_one_commit(cmds):
    tid = uuid.uuid4()

    def decide(unit):
        t = Tally.start(ctx(), id=tid, label="a")
        t.count(ctx(), by=2)
        unit.add(t)
        return "made"

    done = cmds.run(decide)
    assert isinstance(done, Done) and done.value == "made" and done.positions == [1, 2]


def test_an_aggregate_made_after_it_was_looked_for_is_the_one_the_unit_gives(cmds):
    """Two steps of one decision that each look for a thing and make it when it is missing (a number
    sequence, a conduct) share one object, so the commit holds one copy of it."""
    tid = uuid.uuid4()

    def step(unit):
        t = unit.get(tid) or Tally.start(ctx(), id=tid, label="seq")
        t.count(ctx())
        unit.add(t)

    def decide(unit):
        step(unit)
        step(unit)

    assert cmds.run(decide).positions == [1, 2, 3]
    assert cmds.store.get(tid).total == 2


def test_two_copies_of_one_aggregate_in_a_unit_are_refused_before_anything_is_written(cmds):
    tid = uuid.uuid4()
    cmds.run(lambda unit: unit.add(Tally.start(ctx(), id=tid, label="x")))

    def decide(unit):
        unit.get(tid).count(ctx())
        stale = cmds.store.get(tid)  # a copy from outside the unit
        unit.add(unit.get(tid), stale)

    with pytest.raises(ValueError, match="two copies"):
        cmds.run(decide)
    assert cmds.store.max_position() == 1


def test_a_look_reads_the_cached_aggregates_themselves_and_can_change_nothing(cmds):
    """The gateway's payer check runs on every model call in a ``Look``: no private copy of each account
    is made, the plaza (a guard) is still read as the database holds it, and nothing can be added."""
    tid = uuid.uuid4()
    cmds.run(lambda unit: unit.add(Tally.start(ctx(), id=tid, label="x")))
    look, other = Look(cmds.store), Look(cmds.store)
    assert look.get(tid) is other.get(tid) is cmds.store.peek(tid)  # one cached object, no copies
    assert cmds.store.get(tid) is not look.get(tid)  # a unit's get still gives a private copy
    assert look.get(uuid.uuid4()) is None
    with pytest.raises(TypeError, match="changes nothing"):
        look.add(look.get(tid))
    cmds.run(lambda unit: unit.add(unit.get(tid).count(ctx()) or unit.get(tid)))
    assert Look(cmds.store).get(tid).total == 1  # a commit's new state is what the next look reads
    assert look.get(tid).total == 0  # a look, like a unit, keeps what it loaded


def test_a_hold_made_through_another_store_handle_holds_the_next_command_here(folders, database_url):
    """Two hubs on one database: hub A has the plaza cached as running; hub B holds it. A command on A
    that only READS the plaza (a transfer) must see the hold at once: no save of the plaza would
    conflict, so the plaza is a guard, read from the database by every unit."""
    a = Plaza(folders.state, database_url)
    store_b = EventStore.open(state_dir=folders.state, database_url=database_url)
    b = Commands(store_b, clock=a.clock)
    try:
        for cid in ("3", "4"):
            a.wallet(cid)
        a.earn("3", 100, task="start")
        assert not plaza_held(a.store.get)  # A's cache holds the running plaza
        plaza_commands.stop_all(b, b.context("owner", "from the other hub"))
        before = a.store.max_position()
        with pytest.raises(Refusal) as held:
            treasury_commands.transfer(a.cmds, a.ctx("agent:3"), "3", "4", 10, "a transfer", None)
        assert held.value.code == "plaza_held" and a.store.max_position() == before
    finally:
        a.close()
        store_b.close()


def test_a_hold_made_through_another_handle_refuses_the_next_model_call_after_checks_that_passed(
        folders, database_url):
    """The gateway's payer check reads the plaza's hold on every call.  A's checks pass (on SQLite A then
    knows that nothing was committed since it found its copy the newest, and skips the read); B holds
    the plaza; A's very next check refuses."""
    a = Plaza(folders.state, database_url)
    store_b = EventStore.open(state_dir=folders.state, database_url=database_url)
    b = Commands(store_b, clock=a.clock)
    try:
        a.wallet("3")
        a.earn("3", 100, task="start")
        for _ in range(3):
            treasury_commands.quick_check_gateway_call(a.cmds, "3", None)
        plaza_commands.stop_all(b, b.context("owner", "from the other hub"))
        with pytest.raises(Refusal) as held:
            treasury_commands.quick_check_gateway_call(a.cmds, "3", None)
        assert held.value.code == "plaza_held"
        plaza_commands.resume(b, b.context("owner", "resumed on the other hub"))
        treasury_commands.quick_check_gateway_call(a.cmds, "3", None)
    finally:
        a.close()
        store_b.close()


def test_a_guard_read_fresh_skips_the_database_only_while_nothing_was_committed(folders):
    """SQLite's data_version (the state folder's store; PostgreSQL has no such number, so there every
    fresh read asks the database): while no connection committed anything, a fresh read of the plaza
    gives the copy found newest without a read of the log; any commit (here another handle's, to
    another aggregate) makes the next fresh read ask the database again."""
    a = Plaza(folders.state)
    store_b = EventStore.open(state_dir=folders.state)
    reads = []   # every read of the log: the recorder's, and the watch's read of a newest version
    select = a.store.app.recorder.select_events
    a.store.app.recorder.select_events = lambda *args, **kw: reads.append(args) or select(*args, **kw)
    newest = a.store._watch.newest_version
    a.store._watch.newest_version = lambda *args: reads.append(args) or newest(*args)
    try:
        first = a.store.get(PLAZA_ID, fresh=True)
        assert len(reads) == 1
        assert a.store.get(PLAZA_ID, fresh=True).version == first.version and len(reads) == 1
        store_b.commit(Tally.start(ctx(), label="elsewhere"))
        assert a.store.get(PLAZA_ID, fresh=True).version == first.version and len(reads) == 2
        assert newest(a.store.events_table, PLAZA_ID.hex) == first.version   # the index's answer
        assert newest(a.store.events_table, uuid.uuid4().hex) is None
        plaza_commands.stop_all(Commands(store_b), ctx())                    # the guard itself moves on
        assert a.store.get(PLAZA_ID, fresh=True).version == first.version + 1
        assert a.store.get(PLAZA_ID, fresh=True) is not a.store.get(PLAZA_ID, fresh=True)  # private copies
        assert len(reads) == 4
    finally:
        a.close()
        store_b.close()


def test_a_follower_drops_the_copies_another_writer_moved_on(folders, database_url):
    store_a = EventStore.open(state_dir=folders.state, database_url=database_url)
    store_b = EventStore.open(state_dir=folders.state, database_url=database_url)
    a, b = Commands(store_a, clock=lambda: T0), Commands(store_b, clock=lambda: T0)
    try:
        tally = Tally.start(ctx(), label="x")
        store_a.commit(tally)

        def count(unit):
            t = unit.get(tally.id)
            t.count(ctx(), by=1)
            unit.add(t)

        b.run(count)
        assert store_a.get(tally.id).total == 0  # A's copy is stale until A reads the log
        assert store_a.forget_moved(store_a.read()) == 1
        assert store_a.get(tally.id).total == 1
        assert store_a.forget_moved(store_a.read()) == 0  # its copy is current now
        a.run(count)
        assert store_b.get(tally.id, fresh=True).total == 2
    finally:
        store_a.close()
        store_b.close()
