"""A long rebuild splits its read models with a second process (``projections.parallel``), and what it
makes is what one process makes: every read model row for row, in one transaction, nothing left behind.

Here a rebuild takes a second process from 50 events, in pages of 40, so a log of a few hundred events
has a first page (weighed, then handed out) and many after it, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from test_read_model_memory import Plaza, a_round

from agentplaza.projections import parallel, runner
from agentplaza.projections.registry import all_projections


@pytest.fixture
def plaza(folders, database_url, monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_FROM", 50)
    monkeypatch.setattr(parallel, "cpus", lambda: 2)
    # (else a log this short is not worth a second process)
    monkeypatch.setattr(parallel, "IMPORT_S", 0.0)
    monkeypatch.setattr(parallel, "SETUP_S", {"sqlite": 0.0, "postgresql": 0.0})
    monkeypatch.setattr(runner, "REBUILD_PAGE", 40)
    p = Plaza(folders, database_url)
    for _ in range(3):
        a_round(p, tasks=8, entries=6)
    yield p
    p.close()


#: The read models both processes fold, each over the topics it reads, merged at the end (``Projection.merge``).
HALVES = {"event_counts", "unreadable"}


class Seconds(list):
    """Each rebuild's second process: the read models it was given (not the halves, which both processes fold),
    and whether its tables were brought in; ``halves``: the halves each folded too."""

    def __init__(self) -> None:
        super().__init__()
        self.halves: list[set[str]] = []


@pytest.fixture
def seconds(monkeypatch):
    seen = Seconds()
    finish = parallel.Second.finish

    def spy(self, conn, projections, upto):
        copied = finish(self, conn, projections, upto)
        seen.append((set(self.names), copied))
        seen.halves.append(set(self.halves))
        return copied

    monkeypatch.setattr(parallel.Second, "finish", spy)
    return seen


def leftovers(plaza: Plaza, folders) -> list[str]:
    """The second process's tables left behind: its SQLite files, or its PostgreSQL schemas."""
    if plaza.store.backend == "sqlite":
        return sorted(p.name for p in folders.state.iterdir() if ".rebuild-" in p.name)
    with plaza.rm.engine.connect() as conn:
        return list(conn.execute(sa.text(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"), {"p": f"{parallel.STAGING}%"}).scalars())


def test_a_rebuild_in_two_processes_makes_what_one_process_makes(plaza, seconds, folders):
    live = plaza.rm.live()
    kept = plaza.rows_in_memory()
    assert plaza.rm.rebuild() == {n: plaza.store.max_position() for n in plaza.rm.states}
    [(names, copied)] = seconds
    assert names and copied and names < set(plaza.rm.states)
    assert plaza.rm.live() == live
    assert plaza.rows_in_memory() == kept  # the second process's read models' rows kept in memory, read back
    assert leftovers(plaza, folders) == []
    # and the hub goes on from there
    a_round(plaza, tasks=3, entries=2)
    assert plaza.rm.live() == plaza.rm.replay()


@pytest.mark.parametrize("given", [
    {"agents"},  # few topics: the halves fold most of the log's topics in the first process
    {"work"},  # rows written and read back across pages
    "all but plaza",  # the second process reads every topic: the first folds into the halves what it alone reads
])
def test_whichever_read_models_the_second_process_folds_the_rebuild_is_the_same(plaza, seconds, monkeypatch, given):
    if given == "all but plaza":
        given = {p.name for p in all_projections()} - {"plaza"} - HALVES
    monkeypatch.setattr(parallel, "split", lambda w, mix, projections, movable, *_: set(given) & movable)
    live = plaza.rm.live()
    plaza.rm.rebuild()
    assert seconds == [(given, True)] and seconds.halves == [HALVES]
    assert plaza.rm.live() == live


def test_a_split_that_names_a_half_gives_it_to_both(plaza, seconds, monkeypatch):
    monkeypatch.setattr(parallel, "split", lambda w, mix, projections, movable, *_: {"event_counts", "work"})
    live = plaza.rm.live()
    plaza.rm.rebuild()
    assert seconds == [({"work"}, True)]
    assert plaza.rm.live() == live


def test_a_second_process_that_fails_leaves_its_read_models_to_the_first(plaza, seconds, monkeypatch, folders, caplog):
    start = parallel.SecondProcess.start
    monkeypatch.setattr(parallel.SecondProcess, "start",
                        lambda module, job, what: start("agentplaza.projections.no_such_module", job, what))
    live = plaza.rm.live()
    with caplog.at_level(logging.WARNING):
        plaza.rm.rebuild()
    # Given its read models and then found failed, or found dead already when it was to be given them.
    assert all(names and not copied for names, copied in seconds)
    assert "rebuild: the second process failed (exit 1: " in caplog.text
    assert plaza.rm.live() == live
    assert leftovers(plaza, folders) == []


def test_a_rebuild_that_fails_changes_nothing_and_stops_its_second_process(plaza, monkeypatch, folders):
    live = plaza.rm.live()
    positions = {n: st.position for n, st in plaza.rm.states.items()}
    started = []
    start = parallel.Second.start

    def kept(staging):
        second = start(staging)
        started.append(second.process.proc)
        return second

    def broken(self, conn, table, schema):
        if brought:  # the second table: one is in already (on PostgreSQL, moved in place of the read model's)
            raise RuntimeError("bringing a table in failed")
        brought.append(table.name)
        bring(self, conn, table, schema)

    monkeypatch.setattr(parallel.Second, "start", kept)
    brought: list[str] = []
    bring = parallel.Staging.bring_table
    monkeypatch.setattr(parallel.Staging, "bring_table", broken)
    monkeypatch.setattr(parallel, "split", lambda w, mix, projections, movable, *_: {"work", "treasury"})
    with pytest.raises(RuntimeError, match="bringing a table in failed"):
        plaza.rm.rebuild()
    assert started and all(proc.poll() is not None for proc in started) and brought
    assert plaza.rm.live() == live
    assert {n: st.position for n, st in plaza.rm.states.items()} == positions
    assert leftovers(plaza, folders) == []


def test_events_written_during_a_rebuild_are_folded_after_it(plaza, seconds, monkeypatch):
    """Both processes fold up to the log's last event when the rebuild began; what comes after, the next
    catch-up folds."""
    first_page = parallel.first_page

    def and_more(*args):
        after = first_page(*args)
        plaza.end(plaza.open_tasks(2))
        return after

    upto = plaza.store.max_position()
    monkeypatch.setattr(parallel, "first_page", and_more)
    assert plaza.rm.rebuild() == {n: upto for n in plaza.rm.states}
    assert seconds and seconds[0][1]
    assert plaza.store.max_position() > upto
    plaza.rm.catch_up()
    assert plaza.rm.position() == plaza.store.max_position()
    assert plaza.rm.live() == plaza.rm.replay()


def test_a_read_model_the_second_process_cannot_build_stays_in_the_first(plaza, seconds, monkeypatch):
    """Only the registry's read models, of the very class the hub runs, can go to the second process: offered
    every read model it can take, it folds the rest, and this one stays here."""
    from agentplaza.projections.plaza import EventCounts

    class Counting(EventCounts):
        pass

    rm = runner.ReadModels(plaza.rm.engine, plaza.store,
                           [p for p in all_projections() if p.name != "event_counts"] + [Counting()])
    rm.setup()
    monkeypatch.setattr(parallel, "split", lambda w, mix, projections, movable, *_: set(movable))
    live = rm.live()
    rm.rebuild()
    [(names, copied)] = seconds
    assert copied and "event_counts" not in names and "work" in names
    assert names == set(rm.states) - HALVES and seconds.halves == [{"unreadable"}]  # (its own event_counts: not one)
    assert rm.live() == live


def test_a_short_log_is_rebuilt_by_one_process(plaza, seconds, monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_FROM", plaza.store.max_position() + 1)
    live = plaza.rm.live()
    plaza.rm.rebuild()
    assert seconds == []
    assert plaza.rm.live() == live



@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # (a schema left on PostgreSQL may be another hub's)
def test_the_files_of_a_killed_rebuild_are_removed_by_the_next(plaza, folders, seconds):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    name = Path(plaza.rm.engine.url.database).name
    left = [folders.state / f"{name}.rebuild-{gone}-0a1b2c3d{suffix}" for suffix in ("", "-wal")]
    mine = folders.state / f"{name}.rebuild-{os.getpid()}-ffffffff"
    for f in [*left, mine]:
        f.write_bytes(b"")
    plaza.rm.rebuild()
    assert seconds and seconds[0][1]
    assert leftovers(plaza, folders) == [mine.name]  # a process still running keeps its file


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_where_no_schema_can_be_made_one_process_rebuilds(plaza, seconds, monkeypatch, folders):
    """A database role that may not create a schema (here: the name is taken) gets a rebuild in one process."""
    monkeypatch.setattr(parallel.secrets, "token_hex", lambda n: "deadbeef")
    with plaza.rm.engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{parallel.STAGING}_deadbeef"')
    live = plaza.rm.live()
    plaza.rm.rebuild()
    assert seconds == []
    assert plaza.rm.live() == live
    assert leftovers(plaza, folders) == [f"{parallel.STAGING}_deadbeef"]  # not ours: left as it was


def test_each_process_reads_only_the_events_its_read_models_take(plaza):
    """The topics of the log's mix that none of a process's read models takes are not read at all (``unread``);
    a topic the sample missed is read."""
    store = plaza.store
    work = [p for p in all_projections() if p.name == "work"]
    mix = parallel.mix_of(store, store.max_position())
    skip = parallel.unread(mix, work)
    assert skip and not any(parallel._takes(work[0], t) for t in skip)
    assert any(parallel._takes(work[0], t) for t in mix)
    everything = store.read_raw(0, 10**6)
    assert store.read_raw(0, 10**6, skip) == [r for r in everything if r[3] not in skip]
    assert store.read_raw(0, 7, skip) == [r for r in everything if r[3] not in skip][:7]
    middle = everything[len(everything) // 2][0]  # none after a position: the database stops there
    assert store.read_raw(0, 10**6, skip, middle) == [r for r in everything if r[3] not in skip and r[0] <= middle]
    assert store.read_raw(middle, 10**6, (), middle) == []
    assert parallel.unread({**mix, "no.such:Topic": 0.1}, work)[-1] == "no.such:Topic"
    assert parallel.unread(mix, all_projections()) == []  # event_counts takes every event


def test_the_split_weighs_when_the_second_process_can_begin_and_what_stepping_over_the_log_costs(plaza):
    """``split`` gives the second process nothing when it would end later than this process alone: when it
    begins too late (importing the code, making its tables), when stepping over the log (``Weights.scan``,
    which a process pays whatever it reads) costs more than the work it would take, or when this process has
    folded most of the log already."""
    projections = all_projections()
    movable = parallel.movable_names(projections)
    mix = parallel.mix_of(plaza.store, plaza.store.max_position())
    events = 1_000_000

    def weights(scan: float = 0.0) -> parallel.Weights:
        w = parallel.Weights(read=1e-6, check=1e-6, scan=scan)
        for t in mix:
            w.decode[t] = [2e-6, 1]
        for p in projections:
            w.spent[p.name] = {t: [1e-6, 1] for t in mix if parallel._takes(p, t)}
        return w

    alone = parallel.split(weights(), mix, projections, movable, events)
    assert alone and alone <= movable
    assert parallel.split(weights(), mix, projections, movable, events, begins=3_600.0) == set()
    assert parallel.split(weights(scan=1e-3), mix, projections, movable, events) == set()
    # what this process has folded already it need not fold again; the second process folds from event 1
    assert parallel.split(weights(), mix, projections, movable, events, begins=0.1) != set()
    assert parallel.split(weights(), mix, projections, movable, events, done=events * 99 // 100, begins=0.1) == set()


def test_events_that_cannot_be_read_are_listed_and_counted_as_one_process_does(plaza, seconds, monkeypatch, folders,
                                                                                 database_url):
    """The halves (``event_counts``, ``unreadable``) meet the events that cannot be read in both processes: one in a
    topic the second process reads (the treasury's), one in a topic only the first reads (a task's last event), and
    a voiding, which both read, of the one the second process meets."""
    from test_damaged_log import damage_on_disk

    from agentplaza.commands import log as log_commands
    from agentplaza.domain.base import Context

    rows = plaza.store.read_raw(0, 10**6)
    posted = [r[0] for r in rows if r[3].endswith(":Entry.Posted")][-1]
    ended = [r[0] for r in rows if ":Task." in r[3]][-1]
    for position in (posted, ended):
        damage_on_disk(folders, database_url, position)
    log_commands.void(plaza.cmds, Context(actor="owner", at=plaza.now(), correlation_id="c-void", reason="a bad disk"),
                      posted)
    monkeypatch.setattr(parallel, "PARALLEL_FROM", 10**9)
    plaza.rm.rebuild()
    one_process = plaza.rm.live()
    listed = {r["position"]: r for r in one_process["unreadable"]["rm_unreadable_events"]}
    assert set(listed) == {posted, ended} and listed[posted]["voided_at"] and not listed[ended]["voided_at"]
    counted = sum(r["count"] for r in one_process["event_counts"]["rm_event_counts"])
    assert counted == plaza.store.max_position() - 2

    monkeypatch.setattr(parallel, "PARALLEL_FROM", 50)
    monkeypatch.setattr(parallel, "split", lambda w, mix, projections, movable, *_: {"treasury"})
    plaza.rm.rebuild()
    assert seconds == [({"treasury"}, True)] and seconds.halves == [HALVES]
    assert plaza.rm.live() == one_process
