"""The runtime follows events: a STOP ALL written by ANY hub process cancels the work items running on
this one, within its follower's poll, with no route of this hub called (the hub's follower publishes
what it reads to the bus; the runtime follows the bus)."""

from __future__ import annotations

import time
import warnings

import pytest
from support.hubproc import HubProcess, ok

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.config import Folders
from agentplaza.projections.agents import transcript
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: How long the test waits for this hub to see the other hub's hold (it polls the store).
SEEN_WAIT_S = 30.0


def test_a_hold_written_by_another_hub_process_cancels_a_running_item_here(folders, database_url, tmp_path):
    hub = Hub.open(folders, database_url=database_url)
    try:
        with TestClient(create_app(hub)):  # this hub's app runs: its follower reads the store and feeds the bus
            rt = hub.runtime = AgentRuntime(hub, node="off").follow()
            cid = ac.spawn(hub.commands, hub.commands.context("owner"), "builder", 1).value[0]
            s = HarnessSession(rt, cid, None)
            s.handle({"op": "hello"})
            ac.tell(hub.commands, hub.commands.context("owner"), cid, "a long job")
            item = s.handle({"op": "next", "wait": 0})["item"]["item"]

            # Another hub process on the same store (SQLite: the same state folder; Postgres: its own folders).
            theirs = folders if database_url is None else \
                Folders(tmp_path / "b-state", tmp_path / "b-config", tmp_path / "b-data").make()
            other = HubProcess(theirs, database_url).start()
            try:
                with other.client() as c:
                    ok(c.post("/v1/plaza/stop", json={"reason": "stopped on the other hub"}))
            finally:
                other.stop()

            deadline = time.monotonic() + SEEN_WAIT_S
            while s.cancelled != item:  # no request of this hub, no call of the harness: the runtime reacted
                assert time.monotonic() < deadline, "the other hub's hold never cancelled the item"
                time.sleep(0.05)
            assert s.taken is None
            hub.read_models.catch_up()
            done = [r for r in transcript(hub.read_models, cid, limit=10_000) if r["kind"] == "done"]
            assert [(d["detail"]["item"], d["detail"]["outcome"]) for d in done] == [(item, "cancelled")]
            after = s.handle({"op": "decide", "tool": "vm.read_file", "args": {"path": "a"}})
            assert after["error"]["code"] == "item_cancelled" and after["item"] == item
            rt.close()
    finally:
        hub.close()
