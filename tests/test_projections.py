"""Read models: caught up live, rebuilt from event 1, replayed to any position."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa
from support.checked_thread import CheckedThread
from support.tally import Tally

from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands.unit import Commands
from agentplaza.events.records import EventRecord
from agentplaza.events.store import EventStore
from agentplaza.projections.framework import Projection, Rows, metadata
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)

seen_table = sa.Table(
    "rm_test_seen", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("total", sa.BigInteger, nullable=False),
)


class SeenPositions(Projection):
    """Records every Tally event's position: a gap or a double shows at once."""

    name = "test_seen"
    tables = (seen_table,)

    def on_Tally_Counted(self, e: EventRecord, rows: Rows) -> None:
        assert rows.get("rm_test_seen", e.position) is None, "applied twice"
        rows.put("rm_test_seen", {"position": e.position, "total": e.data["by"]})


def open_all(folders, database_url):
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    rm = ReadModels(engine, store, all_projections() + [SeenPositions()])
    rm.setup()
    return store, rm


@pytest.fixture
def plaza(folders, database_url):
    store, rm = open_all(folders, database_url)
    clock = iter(T0 + dt.timedelta(minutes=i) for i in range(10_000))
    cmds = Commands(store, clock=lambda: next(clock))
    plaza_commands.ensure_founded(cmds)
    yield store, rm, cmds
    store.close()
    rm.engine.dispose()


def test_live_read_models_follow_the_log(plaza):
    store, rm, cmds = plaza
    plaza_commands.stop_all(cmds, cmds.context("owner", "checking the new law"))
    rm.catch_up()
    live = rm.live()
    state = live["plaza"]["rm_plaza"][0]
    assert state["held"] is True and state["reason"] == "checking the new law" and state["by"] == "owner"
    counts = {r["kind"]: r["count"] for r in live["event_counts"]["rm_event_counts"]}
    assert {k: n for k, n in counts.items() if k.startswith("Plaza.")} == {"Plaza.Created": 1, "Plaza.Held": 1}


def test_rebuild_from_event_one_equals_live(plaza):
    store, rm, cmds = plaza
    for i in range(5):
        plaza_commands.stop_all(cmds, cmds.context("owner", f"round {i}"))
        plaza_commands.resume(cmds, cmds.context("owner"))
    rm.catch_up()
    before = rm.live()
    assert rm.rebuild() == {n: store.max_position() for n in rm.states}
    assert rm.live() == before
    assert rm.replay() == before


def test_replay_upto_shows_the_past(plaza):
    store, rm, cmds = plaza
    plaza_commands.stop_all(cmds, cmds.context("owner", "first"))
    rm.catch_up()
    then = rm.live()
    position = store.max_position()
    plaza_commands.resume(cmds, cmds.context("owner"))
    rm.catch_up()
    assert rm.replay(position) == then
    assert rm.replay(position)["plaza"]["rm_plaza"][0]["held"] is True
    at = then["plaza"]["rm_plaza"][0]["since"]
    assert store.position_at(at) == position


def test_a_changed_projection_version_is_rebuilt_at_start(folders, database_url):
    store, rm = open_all(folders, database_url)
    cmds = Commands(store, clock=lambda: T0)
    plaza_commands.ensure_founded(cmds)
    rm.catch_up()
    with rm.engine.begin() as conn:  # as if an older code version wrote it
        conn.execute(sa.text("UPDATE rm_positions SET version = 0 WHERE name = 'plaza'"))
        conn.execute(sa.text("DELETE FROM rm_plaza"))
    store.close()
    store, rm = open_all(folders, database_url)
    assert rm.live()["plaza"]["rm_plaza"][0]["name"] == "plaza"
    store.close()


def test_concurrent_writers_no_event_skipped_or_applied_twice(folders, database_url):
    """Writers race while the follower reads: every event is folded exactly once."""
    store, rm = open_all(folders, database_url)
    cmds = Commands(store, clock=lambda: T0)
    tallies = [Tally.start(cmds.context("owner"), label=str(i)) for i in range(8)]
    store.commit(*tallies)
    stop = threading.Event()

    def follow():
        while not stop.is_set():
            rm.catch_up()

    def write(t):
        for _ in range(40):
            def decide(unit, t=t):
                x = unit.get(t.id)
                x.count(cmds.context("owner"), by=1)
                unit.add(x)
            cmds.run(decide)

    follower = CheckedThread(follow, name="follower")
    follower.start()
    writers = [CheckedThread(write, t, name=f"writer {t.label}") for t in tallies]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
    stop.set()
    follower.join(120)
    rm.catch_up()
    counted = [r.position for r in store.read() if r.kind == "Tally.Counted"]
    seen = [r["position"] for r in rm.live(["test_seen"])["test_seen"]["rm_test_seen"]]
    assert sorted(seen) == counted and len(counted) == 8 * 40
    assert rm.live(["event_counts"]) == rm.replay(names=["event_counts"])
    store.close()


def test_two_followers_share_one_read_model_without_double_counting(folders, database_url, backend):
    """Two hubs on one database both follow the log; the compare-and-set keeps one fold."""
    store_a, rm_a = open_all(folders, database_url)
    store_b, rm_b = open_all(folders, database_url)
    cmds = Commands(store_a, clock=lambda: T0)
    tally = Tally.start(cmds.context("owner"), label="x")
    for _ in range(50):
        tally.count(cmds.context("owner"))
    store_a.commit(tally)
    threads = [CheckedThread(rm.catch_up, name="catch up") for rm in (rm_a, rm_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    rm_a.catch_up()
    rm_b.catch_up()
    seen = rm_b.live(["test_seen"])["test_seen"]["rm_test_seen"]
    assert len(seen) == 50
    counts = {r["kind"]: r["count"] for r in rm_a.live(["event_counts"])["event_counts"]["rm_event_counts"]}
    assert counts["Tally.Counted"] == 50
    store_a.close()
    store_b.close()


def test_append_only_tables_do_not_stay_in_memory(plaza):
    store, rm, cmds = plaza
    for i in range(3):
        plaza_commands.stop_all(cmds, cmds.context("owner", f"r{i}"))
        plaza_commands.resume(cmds, cmds.context("owner"))
    rm.catch_up()
    st = rm.states["plaza"]
    assert "rm_plaza_holds" in st.rows.append_only
    assert st.rows.data["rm_plaza_holds"] == {}  # written, then dropped from memory
    assert len(rm.live(["plaza"])["plaza"]["rm_plaza_holds"]) == 6
    assert rm.live() == rm.replay()


labels_table = sa.Table(
    "rm_test_labels", metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("detail", sa.JSON, nullable=False),
)


class Labels(Projection):
    """Each tally's label and counts in a JSON column (kept in memory, loaded back from SQL at start)."""

    name = "test_labels"
    tables = (labels_table,)

    def on_Tally_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_test_labels", {"id": e.originator_id, "detail": {"label": e.data["label"], "counts": []}})

    def on_Tally_Counted(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_test_labels", e.originator_id)
        detail = {**row["detail"], "counts": [*row["detail"]["counts"], e.data["by"]]}
        rows.put("rm_test_labels", {**row, "detail": detail})


def test_json_columns_written_by_the_standard_library_read_back_after_the_change(folders, database_url, monkeypatch):
    """Read models made before JSON columns were written by orjson (json.dumps's text: spaces, \\u escapes)
    load, fold on and equal a rebuild."""
    import json

    from agentplaza.projections import runner

    def open_labels():
        monkeypatch.setattr(runner, "_insert_plans", {})  # each table's plan holds its engine's serializer
        store = EventStore.open(state_dir=folders.state, database_url=database_url)
        engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
        rm = ReadModels(engine, store, [Labels()])
        rm.setup()
        return store, rm

    with monkeypatch.context() as m:
        m.setattr(runner, "json_text", json.dumps)  # as the read models were written before
        store, rm = open_labels()
        cmds = Commands(store, clock=lambda: T0)
        tally = Tally.start(cmds.context("owner"), label="café ✓ \"quoted\"")
        tally.count(cmds.context("owner"), by=2)
        store.commit(tally)
        rm.catch_up()
        with rm.engine.connect() as conn:
            old_text = conn.execute(sa.text("SELECT CAST(detail AS TEXT) FROM rm_test_labels")).scalar()
        store.close()
        rm.engine.dispose()
    assert old_text == json.dumps({"label": "café ✓ \"quoted\"", "counts": [2]})  # the old text, as stored

    store, rm = open_labels()
    assert rm.states["test_labels"].rows.get("rm_test_labels", tally.id.hex)["detail"]["counts"] == [2]
    cmds = Commands(store, clock=lambda: T0)
    def count(unit):
        x = unit.get(tally.id)
        x.count(cmds.context("owner"), by=3)
        unit.add(x)
    cmds.run(count)
    rm.catch_up()
    live = rm.live()
    assert live["test_labels"]["rm_test_labels"] == [
        {"id": tally.id.hex, "detail": {"label": "café ✓ \"quoted\"", "counts": [2, 3]}}]
    assert rm.replay() == live
    rm.rebuild()
    assert rm.live() == live
    store.close()
    rm.engine.dispose()
