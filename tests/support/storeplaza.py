"""A plaza on the store alone (no hub process): the event store, the read models and the commands, with a
clock that ticks one second a command from ``t0``, founded as the hub founds it. For tests of the
commands and projections that want no HTTP in between."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands.unit import Commands
from agentplaza.events.store import EventStore
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url

#: How many ticks the clock has: more commands than any test gives.
CLOCK_TICKS = 100_000


def open_plaza(folders, database_url, t0: dt.datetime) -> tuple[EventStore, ReadModels, Commands]:
    """The store, read models and commands over ``folders.state`` (or ``database_url``); the caller closes
    the store and disposes ``rm.engine`` (or uses :func:`plaza_on_store`)."""
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    rm = ReadModels(engine, store, all_projections())
    rm.setup()
    clock = iter(t0 + dt.timedelta(seconds=i) for i in range(CLOCK_TICKS))
    cmds = Commands(store, clock=lambda: next(clock))
    plaza_commands.ensure_founded(cmds)
    return store, rm, cmds


@contextmanager
def plaza_on_store(folders, database_url, t0: dt.datetime) -> Iterator[tuple[Commands, ReadModels]]:
    """:func:`open_plaza` as a context: ``(cmds, rm)``, closed after."""
    store, rm, cmds = open_plaza(folders, database_url, t0)
    try:
        yield cmds, rm
    finally:
        store.close()
        rm.engine.dispose()
