"""Every read model equals its rebuild from the log after a kill -9, and after a failed save.

A read model and its position are written in one transaction, so what a
killed hub leaves must be, table by table, the fold of the log up to that
read model's position.  And a read model whose fold or save fails must not
keep in memory what it did not save: ``event_counts`` counts, so folding the
same events a second time would count them twice.
"""

from __future__ import annotations

import random
import threading
import time

import httpx
import pytest
import sqlalchemy as sa
from support.hubproc import HubProcess
from test_crash_and_two_hubs import hammer as hold_and_resume

from agentplaza.commands import approvals
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands.unit import Commands
from agentplaza.events.store import EventStore
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url

#: Kills of the hub per test run, each at a random point of the writers' burst.
KILLS = 3
#: The longest a burst runs before its kill.
BURST_S_MAX = 1.5


def create_work(url: str, tag: str, acked: list, stop: threading.Event, errors: list) -> None:
    """Tasks as fast as the hub answers: events for the work and treasury models."""
    with httpx.Client(base_url=url, timeout=10) as c:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                r = c.post("/v1/tasks", json={"title": f"{tag}-{i}", "acceptance": "done", "budget": 10})
                if r.status_code >= 500:
                    errors.append(r.text)
                elif r.status_code == 200:
                    acked.append(f"{tag}-{i}")
            except httpx.TransportError:
                return


def request_approvals(folders, database_url, tag: str, acked: list, stop: threading.Event, errors: list) -> None:
    """Approvals as other areas make them, by a second writer on the hub's store (the hub follows the log)."""
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    cmds = Commands(store)
    try:
        i = 0
        while not stop.is_set():
            i += 1
            approvals.request(cmds, cmds.context("hub"), "project", f"{tag}-{i}", detail={"i": i})
            acked.append(f"{tag}-{i}")
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))
    finally:
        store.close()


def open_read_models(folders, database_url) -> tuple[EventStore, ReadModels]:
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    rm = ReadModels(make_engine(read_model_url(state_dir=folders.state, database_url=database_url)),
                    store, all_projections())
    rm.setup()
    return store, rm


def assert_each_equals_its_rebuild(rm: ReadModels) -> None:
    for name, st in rm.states.items():
        assert rm.live([name]) == rm.replay(st.position, [name]), f"{name} differs from its rebuild at {st.position}"


def test_after_kill_9_at_random_points_every_read_model_equals_its_rebuild(folders, database_url):
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for round_ in range(KILLS):
        hub = HubProcess(folders, database_url, args=("--node", "off")).start()
        acked, errors, stop = [], [], threading.Event()
        writers = [threading.Thread(target=w, args=(hub.url, f"r{round_}w{i}", acked, stop, errors))
                   for i, w in enumerate([hold_and_resume] * 3 + [create_work] * 3)]
        writers.append(threading.Thread(target=request_approvals,
                                        args=(folders, database_url, f"r{round_}a", acked, stop, errors)))
        for t in writers:
            t.start()
        time.sleep(rng.uniform(0.3, BURST_S_MAX))
        hub.kill()
        stop.set()
        for t in writers:
            t.join()
        assert errors == [], f"seed {seed}"
        store, rm = open_read_models(folders, database_url)
        try:
            assert len(rm.states) == len(all_projections())
            assert_each_equals_its_rebuild(rm)  # what the killed hub left, before anyone catches up
        finally:
            store.close()
            rm.engine.dispose()
    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    hub.stop()  # it catches up at start
    store, rm = open_read_models(folders, database_url)
    try:
        assert {st.position for st in rm.states.values()} == {store.max_position()}
        assert rm.live() == rm.replay(), f"seed {seed}"
        every_table = {t for tables in rm.live().values() for t in tables}
        assert "rm_event_counts" in every_table and len(every_table) > 30
    finally:
        store.close()
        rm.engine.dispose()


def assert_every_event_counted_once(rm: ReadModels, store: EventStore) -> None:
    """The read models as a replay from event 1 has them, and ``event_counts`` counting each event once."""
    assert rm.live() == rm.replay()
    total = sum(r["count"] for r in rm.live(["event_counts"])["event_counts"]["rm_event_counts"])
    assert total == store.max_position()


def test_the_read_models_are_saved_in_one_transaction_and_alone_when_it_fails(folders, database_url, monkeypatch):
    """A page folded is saved for every read model in one transaction (one commit, not one a read model); when
    that transaction fails, nothing of it stays and each read model is saved alone: a failure that has passed
    by then leaves no read model behind."""
    store, rm = open_read_models(folders, database_url)
    try:
        cmds = Commands(store)
        plaza_commands.ensure_founded(cmds)
        rm.catch_up()
        commits = []
        sa.event.listen(rm.engine, "commit", commits.append)
        plaza_commands.stop_all(cmds, cmds.context("owner", "one"))
        rm.catch_up()
        assert len(commits) == 1
        assert {st.position for st in rm.states.values()} == {store.max_position()}

        counts = rm.states["event_counts"]
        real, tries = rm._write_rows, []

        def broken_once(conn, rows, **kw):
            if rows is counts.rows and not tries:
                tries.append(rows)
                raise sa.exc.OperationalError("INSERT", {}, Exception("the disk was full"))
            return real(conn, rows, **kw)

        monkeypatch.setattr(rm, "_write_rows", broken_once)
        plaza_commands.resume(cmds, cmds.context("owner"))
        commits.clear()
        rm.catch_up()
        assert tries and rm.failing == {}
        assert len(commits) == len(rm.states)  # the failed one rolled back, then each alone
        assert {st.position for st in rm.states.values()} == {store.max_position()}
        assert_every_event_counted_once(rm, store)
    finally:
        store.close()
        rm.engine.dispose()


@pytest.mark.parametrize("fails_in", ["save", "fold"])
def test_a_read_model_whose_catch_up_fails_does_not_fold_the_same_events_twice(folders, database_url, fails_in,
                                                                                 monkeypatch):
    store, rm = open_read_models(folders, database_url)
    try:
        cmds = Commands(store)
        plaza_commands.ensure_founded(cmds)
        rm.catch_up()
        plaza_commands.stop_all(cmds, cmds.context("owner", "one"))
        plaza_commands.resume(cmds, cmds.context("owner"))
        counts = rm.states["event_counts"]
        full = []
        if fails_in == "save":
            real = rm._write_rows

            def broken_while_full(conn, rows, **kw):
                if rows is counts.rows and full:
                    full.append(rows)
                    raise sa.exc.OperationalError("INSERT", {}, Exception("the disk is full"))
                return real(conn, rows, **kw)

            full.append("the disk is full")
            monkeypatch.setattr(rm, "_write_rows", broken_while_full)
        else:
            real_on_any = counts.projection.fallback
            calls = []

            def on_any_broken_on_the_second(e, rows):
                calls.append(e.position)
                if len(calls) == 2:
                    raise RuntimeError("a bug in a handler")
                real_on_any(e, rows)

            counts.projection.fallback = on_any_broken_on_the_second
        rm.catch_up()  # event_counts fails; the others go on
        assert "event_counts" in rm.failing
        assert counts.position < store.max_position()
        assert rm.states["plaza"].position == store.max_position()
        if fails_in == "fold":
            counts.projection.fallback = real_on_any
        else:  # tried in the read models' one transaction, then alone (``ReadModels._save_together``)
            assert len(full) == 3
            full.clear()
        rm.catch_up()  # the failure has passed
        assert rm.failing == {}
        assert counts.position == store.max_position()
        assert_every_event_counted_once(rm, store)
    finally:
        store.close()
        rm.engine.dispose()
