"""apid over a log its read models are far behind (a first start over a long log, a read model whose version
changed) listens at once and catches up while it listens (``START_CATCH_UP_MAX``): the goal is to listen within
2 s whatever the log's length, and folding tens of thousands of events first took longer than that.  It says
so when it starts, and again once the read models have caught up, with what it could only say then: the
events nobody can read back.  Within ``START_CATCH_UP_MAX`` events of its head it starts as before."""

from __future__ import annotations

import datetime as dt
import uuid

from support.deadline import until
from support.hubproc import HubProcess, ok
from test_damaged_log import NAN_STATE, write_as_an_older_hub

from agentplaza.api.hub import START_CATCH_UP_MAX
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Context
from agentplaza.domain.tasks import Task
from agentplaza.events.store import EventStore

BEHIND = "events behind the log; they catch up while the hub listens"
CAUGHT_UP = "apid: the read models have caught up with the log"


def write_tasks(folders, database_url, first: int, count: int) -> int:
    """``count`` open tasks, written in bulk as one hub would have written them one by one; the log's head."""
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        plaza_commands.ensure_founded(Commands(store))
        at = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
        for start in range(first, first + count, 1_000):
            tasks = [Task.create(Context(actor="owner", at=at, correlation_id=uuid.uuid4().hex), f"t{n}",
                                 title=f"task {n}", acceptance="tests pass", budget=10)
                     for n in range(start, min(start + 1_000, first + count))]
            store.commit_direct(*tasks)
        return store.max_position()
    finally:
        store.close()


def caught_up(hub: HubProcess, position: int) -> dict:
    """``/v1/hub`` once the read models include ``position``."""
    with hub.client() as c:
        return until(f"the read models at {position}",
                     lambda: (info := ok(c.get("/v1/hub")))["projections_at"] >= position and info, 60, every=0.1)


def test_a_first_start_over_a_long_log_listens_then_catches_up_and_names_what_it_could_not_read(folders,
                                                                                                 database_url):
    write_tasks(folders, database_url, 1, START_CATCH_UP_MAX // 2)
    bad = write_as_an_older_hub(folders, database_url, NAN_STATE)
    head = write_tasks(folders, database_url, START_CATCH_UP_MAX // 2 + 1, START_CATCH_UP_MAX)
    assert head > START_CATCH_UP_MAX + 1

    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        assert BEHIND in hub.output
        assert "cannot be read" not in hub.output.split("apid: listening on")[0]  # not known yet
        info = caught_up(hub, head)
        info = caught_up(hub, info["position"])  # (the hub's own events at its start too)
        until("the caught-up note", lambda: CAUGHT_UP in hub.output, 30, every=0.1)
        until("the unreadable event named", lambda: f"apid: the event at position {bad} cannot be read" in hub.output,
              30, every=0.1)
        with hub.client() as c:
            last = f"t{START_CATCH_UP_MAX // 2 + START_CATCH_UP_MAX}"
            assert ok(c.get(f"/v1/tasks/{last}"))["title"] == f"task {last[1:]}"
            counts = ok(c.get("/v1/overview"))["events"]["total"]
            assert counts == info["position"] - 1  # every readable event folded once; the unreadable one not at all
    finally:
        hub.stop()
    assert hub.output.count(CAUGHT_UP) == 1

    # Its read models current, the next start folds nothing first and names the unreadable event at once.
    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        assert BEHIND not in hub.output and CAUGHT_UP not in hub.output
        assert f"apid: the event at position {bad} cannot be read" in hub.output
    finally:
        hub.stop()


def test_a_start_within_the_limit_folds_first_and_says_nothing_of_catching_up(folders, database_url):
    head = write_tasks(folders, database_url, 1, START_CATCH_UP_MAX // 2)
    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        assert BEHIND not in hub.output
        with hub.client() as c:
            info = ok(c.get("/v1/hub"))  # caught up before it listened
            assert info["projections_at"] == info["position"] >= head
    finally:
        hub.stop()
    assert CAUGHT_UP not in hub.output
