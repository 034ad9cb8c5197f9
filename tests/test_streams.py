"""What is read from an aggregate's own stream in the log, not from a read model's table: a transcript
(``agents.entries``) and a task's timeline (``work.timeline_rows``), through ``EventStore.stream``; and a hub
whose read models were made by the versions that still copied them into tables, upgraded at its start."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
import sqlalchemy as sa
from support.tamper import rewrite

from agentplaza.commands import agents as ac
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands.unit import Commands
from agentplaza.domain.agents import transcript_id
from agentplaza.domain.base import Refusal
from agentplaza.events.store import EventStore
from agentplaza.projections import agents as agents_rm
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url

T0 = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
ENTRIES = 23  # over a few of the small pages below


def open_all(folders, database_url):
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    rm = ReadModels(engine, store, all_projections())
    rm.setup()
    return store, rm


@pytest.fixture
def plaza(folders, database_url):
    store, rm = open_all(folders, database_url)
    cmds = Commands(store, clock=lambda: T0)
    plaza_commands.ensure_founded(cmds)
    (cid, other) = ac.spawn(cmds, cmds.context("owner"), "builder", 2).value
    agent = cmds.context(f"agent:{cid}")
    for n in range(1, ENTRIES + 1):
        ac.add_entry(cmds, agent, cid, "note", text=f"line {n}", detail={"n": n})
        ac.add_entry(cmds, cmds.context(f"agent:{other}"), other, "note", text=f"other {n}")  # interleaved
    rm.catch_up()
    yield store, rm, cmds, cid
    store.close()


def texts(page: list[dict]) -> list[str]:
    return [e["text"] for e in page]


def test_a_stream_reads_one_aggregates_events_in_pages_either_way(plaza):
    store, rm, _, cid = plaza
    tid = transcript_id(uuid.UUID(hex=agents_rm.agent_row(rm, cid)["agent_id"]))
    whole = list(store.stream(tid))
    assert [r.version for r in whole] == list(range(1, ENTRIES + 2))  # opened, then one event an entry
    assert {r.originator_id for r in whole} == {tid.hex}
    assert [r.position for r in whole] == sorted(r.position for r in whole)
    for page in (1, 3, ENTRIES + 1, 500):  # a page boundary anywhere gives the same events
        assert [r.position for r in store.stream(tid, page=page)] == [r.position for r in whole]
        assert [r.position for r in store.stream(tid, newest_first=True, page=page)] == [r.position for r in whole][::-1]
        assert [r.version for r in store.stream(tid, 20, page=page)] == list(range(21, ENTRIES + 2))
    assert list(store.stream(tid, ENTRIES + 1)) == []
    with pytest.raises(ValueError):
        list(store.stream(tid, 3, newest_first=True))
    assert list(store.stream(uuid.uuid4())) == []


@pytest.mark.parametrize("limit", [1, 2, 5, ENTRIES, 200])
def test_a_transcript_page_is_read_from_its_stream(plaza, limit):
    _, rm, _, cid = plaza
    every = [f"line {n}" for n in range(1, ENTRIES + 1)]
    assert texts(agents_rm.transcript(rm, cid, limit=limit)) == every[:limit]
    assert texts(agents_rm.transcript(rm, cid, after=7, limit=limit)) == every[7:7 + limit]
    assert texts(agents_rm.transcript(rm, cid, limit=limit, tail=True)) == every[-limit:]
    assert agents_rm.transcript(rm, cid, after=ENTRIES, limit=limit) == []
    assert agents_rm.transcript(rm, cid, limit=0) == []
    first = agents_rm.transcript(rm, cid, limit=1)[0]
    assert first == {"seq": 1, "at": first["at"], "actor": f"agent:{cid}", "kind": "note", "tool": None,
                     "text": "line 1", "detail": {"n": 1}}
    assert first["at"].startswith("2026-12-06T12:00")


def test_a_transcript_shows_what_its_read_model_has_folded_and_a_stream_stops_at_upto(plaza):
    store, rm, cmds, cid = plaza
    ac.add_entry(cmds, cmds.context(f"agent:{cid}"), cid, "note", text="not folded yet")
    last = texts(agents_rm.transcript(rm, cid, limit=1, tail=True))
    assert last == [f"line {ENTRIES}"]  # the read models have not folded it: not shown beside them yet
    assert texts(agents_rm.transcript(rm, cid, after=ENTRIES)) == []
    rm.catch_up()
    assert texts(agents_rm.transcript(rm, cid, limit=1, tail=True)) == ["not folded yet"]
    assert texts(agents_rm.transcript(rm, cid, after=ENTRIES)) == ["not folded yet"]
    tid = transcript_id(uuid.UUID(hex=agents_rm.agent_row(rm, cid)["agent_id"]))
    whole = list(store.stream(tid))
    cut = whole[10].position
    for page in (1, 4, 100):
        assert [r.position for r in store.stream(tid, upto=cut, page=page)] == [r.position for r in whole[:11]]
        assert [r.position for r in store.stream(tid, upto=cut, newest_first=True, page=page)] == [
            r.position for r in whole[:11]][::-1]
        assert [r.version for r in store.stream(tid, 5, upto=cut, page=page)] == [6, 7, 8, 9, 10, 11]


def test_an_entry_that_cannot_be_read_is_stepped_over_as_a_fold_steps_over_it(plaza):
    store, rm, _, cid = plaza
    page = agents_rm.transcript(rm, cid, limit=ENTRIES)
    tid = transcript_id(uuid.UUID(hex=agents_rm.agent_row(rm, cid)["agent_id"]))
    fifth = next(r.position for r in store.stream(tid) if r.kind == "Transcript.Entry" and r.data["seq"] == 5)
    rewrite(store, fifth, lambda state: state[:-1])  # no longer JSON
    assert store.unreadable_at(fifth)
    assert texts(agents_rm.transcript(rm, cid, limit=ENTRIES)) == [e["text"] for e in page if e["seq"] != 5]
    assert texts(agents_rm.transcript(rm, cid, after=3, limit=2)) == ["line 4", "line 6"]
    readable = [f"line {n}" for n in range(1, ENTRIES + 1) if n != 5]
    assert texts(agents_rm.transcript(rm, cid, limit=ENTRIES - 3, tail=True)) == readable[-(ENTRIES - 3):]


def test_an_unknown_agent_has_no_transcript_and_the_largest_after_reads_nothing(plaza):
    _, rm, _, cid = plaza
    with pytest.raises(Refusal) as e:
        agents_rm.transcript(rm, 999)
    assert e.value.code == "unknown_agent"
    assert agents_rm.transcript(rm, cid, after=2**63 - 1) == []  # the route's bound: no sum past 64 bits


def test_read_models_of_the_versions_that_copied_transcripts_and_timelines_are_upgraded_at_start(folders, database_url):
    store, rm = open_all(folders, database_url)
    cmds = Commands(store, clock=lambda: T0)
    plaza_commands.ensure_founded(cmds)
    (cid,) = ac.spawn(cmds, cmds.context("owner"), "builder", 1).value
    agent = cmds.context(f"agent:{cid}")
    ac.add_entry(cmds, agent, cid, "egress", text="example.org:443 allowed",
                 detail={"verdict": "allowed", "host": "example.org", "port": 443})
    ac.add_entry(cmds, agent, cid, "egress", text="odd", detail={"verdict": {"not": "a verdict"}})
    rm.catch_up()
    with rm.engine.begin() as conn:  # as the versions before wrote them: their tables, their version numbers
        conn.execute(sa.text("CREATE TABLE rm_transcript (transcript_id VARCHAR(36), seq INTEGER, text TEXT)"))
        conn.execute(sa.text("CREATE TABLE rm_task_timeline (position BIGINT PRIMARY KEY, task VARCHAR(24))"))
        conn.execute(sa.text("UPDATE rm_positions SET version = 2 WHERE name = 'transcript'"))
        conn.execute(sa.text("UPDATE rm_positions SET version = 3 WHERE name = 'work'"))
        conn.execute(sa.text("DELETE FROM rm_egress"))
    store.close()
    store, rm = open_all(folders, database_url)
    try:
        names = set(sa.inspect(rm.engine).get_table_names())
        assert "rm_transcript" not in names and "rm_task_timeline" not in names and "rm_egress" in names
        audit = agents_rm.egress_audit(rm)
        assert [(e["verdict"], e["host"], e["port"], e["cid"]) for e in audit] == [
            (None, None, None, cid), ("allowed", "example.org", 443, cid)]
        assert [e["text"] for e in agents_rm.egress_audit(rm, verdict="allowed")] == ["example.org:443 allowed"]
        assert agents_rm.egress_audit(rm, verdict="refused") == []
        assert json.dumps(audit)  # what the route sends
    finally:
        store.close()
