"""The unit of work: one object per aggregate in a unit, everything added saved in one commit,
and a decision's value given back with the positions it wrote."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from support.tally import Tally

from agentplaza.commands.unit import Commands, Done
from agentplaza.domain.base import Context
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
