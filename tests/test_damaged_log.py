"""A log that holds an event nobody can read back does not brick the plaza.

Two ways such an event gets there: an older hub wrote it (``{"x":NaN}``, what
issue 16's request bricked hubs with), and a damaged disk changed the bytes of
one already folded.  Either way the hub starts and names it, every read model
steps over it (and still equals its rebuild), and the owner's way out,
``agentplaza log void``, works without editing the log.
"""

from __future__ import annotations

import uuid

from eventsourcing.persistence import StoredEvent
from support.agentside import AgentSide
from support.hubproc import HubProcess, cli, ok

from agentplaza.events.store import EventStore

NAN_STATE = (b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-11-29T12:00:00+00:00"},'
             b'"actor":"owner","reason":null,"correlation_id":"c","kind":"agent","title":"x","detail":{"x":NaN}}')


def write_as_an_older_hub(folders, database_url, state: bytes) -> int:
    """Store an event the way a hub without the store's check did: straight through the recorder."""
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        (position,) = store.app.recorder.insert_events(
            [StoredEvent(uuid.uuid4(), 1, "agentplaza.domain.approvals:Approval.Requested", state)])
        return position
    finally:
        store.close()


def damage_on_disk(folders, database_url, position: int) -> None:
    """Overwrite one stored event's bytes with something that is not JSON, in SQL, as a bad disk could."""
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        if store.backend == "sqlite":
            sql = f"UPDATE {store.events_table} SET state = CAST('{{\"a\":' AS BLOB) WHERE rowid = {position}"
        else:
            sql = f"UPDATE {store.events_table} SET state = '\\x7b2261223a'::bytea WHERE notification_id = {position}"
        with store.app.factory.datastore.transaction(commit=True) as c:
            c.execute(sql)
    finally:
        store.close()


def unreadable_in_overview(h: HubProcess) -> dict[int, dict]:
    with h.client() as c:
        return {u["position"]: u for u in ok(c.get("/v1/overview"))["log"]["unreadable"]}


def test_the_hub_starts_over_an_unreadable_event_names_it_and_goes_on(folders, database_url):
    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    with hub.client() as c:
        ok(c.post("/v1/plaza/stop", json={"reason": "before"}))
        ok(c.post("/v1/plaza/resume", json={}))
    hub.stop()
    bad = write_as_an_older_hub(folders, database_url, NAN_STATE)

    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        assert f"apid: the event at position {bad} cannot be read" in hub.output
        assert "A damaged event in the log" in hub.output
        listed = unreadable_in_overview(hub)
        assert list(listed) == [bad] and "cannot read" in listed[bad]["reason"] and listed[bad]["voided_at"] is None
        with hub.client() as c:
            ok(c.post("/v1/plaza/stop", json={"reason": "after"}))  # the plaza works on
            events = ok(c.get("/v1/events", params={"limit": 1000}))["events"]
            assert bad not in [m["data"]["position"] for m in events]
            assert events[-1]["data"]["reason"] == "after"
            info = ok(c.get("/v1/hub"))
            assert info["projections_at"] == info["position"]
            counts = ok(c.get("/v1/overview"))["events"]["total"]
            assert counts == len(events)  # every readable event folded once; the unreadable one not at all
            text = cli(hub, "overview")
            assert f"unreadable event at position {bad}" in text.stdout and "NOT voided" in text.stdout

            refused = cli(hub, "log", "void", "1", "--reason", "x", "--yes")
            assert refused.returncode != 0 and "event_readable" in refused.stderr
            done = cli(hub, "log", "void", str(bad), "--reason", "written by an older hub; nothing to restore",
                       "--yes")
            assert done.returncode == 0, done.stderr
            voided = unreadable_in_overview(hub)[bad]
            assert voided["voided_at"] > bad and voided["voided_by"] == "owner"
            again = cli(hub, "log", "void", str(bad), "--reason", "twice", "--yes")
            assert again.returncode != 0 and "already_voided" in again.stderr
    finally:
        hub.stop()

    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        assert "cannot be read" not in hub.output  # voided: seen and accepted, no more warning
        assert unreadable_in_overview(hub)[bad]["voided_at"] is not None
    finally:
        hub.stop()


def test_an_event_damaged_after_it_was_folded_is_named_by_a_rebuild_and_at_the_next_start(folders, database_url):
    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    with hub.client() as c, AgentSide(hub, database_url) as agent:
        assert agent.request_approval("project", "look", detail={"x": 1})
        target = ok(c.get("/v1/hub"))["position"]
        ok(c.post("/v1/plaza/stop", json={"reason": "later"}))
    hub.stop()
    damage_on_disk(folders, database_url, target)

    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        with hub.client() as c:
            rebuilt = ok(c.post("/v1/replay/rebuild", json={}))["rebuilt"]
            assert set(rebuilt.values()) == {ok(c.get("/v1/hub"))["position"]}
            assert "cannot read" in unreadable_in_overview(hub)[target]["reason"]
            assert ok(c.get("/v1/plaza"))["reason"] == "later"
            replay = ok(c.get("/v1/replay"))["read_models"]
            assert [u["position"] for u in replay["unreadable"]["rm_unreadable_events"]] == [target]
    finally:
        hub.stop()
    hub = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        assert f"apid: the event at position {target} cannot be read" in hub.output
    finally:
        hub.stop()
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        assert [u.position for u in store.unreadable()] == [target]
        assert not store.verify().intact  # the chain still shows where the bytes changed
    finally:
        store.close()
