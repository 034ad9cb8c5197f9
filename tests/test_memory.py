"""Memory, on SQLite and PostgreSQL: an agent writes, links, reads and deletes its own notes through its host
tools; the notes that link back are listed; nobody else writes an agent's memory; a sanction's warning lands
in its warnings note (which the agent cannot write); the owner reads it (route, ``agents memory``); a refusal
changes nothing; the read model rebuilt from event 1 equals the live one."""

from __future__ import annotations

import pytest
from support.sessions import session, tool

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import conduct as cd
from agentplaza.commands import memory as mc
from agentplaza.domain.base import Refusal
from agentplaza.domain.memory import MAX_NOTES, slug
from agentplaza.projections import memory as rm


@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def test_notes_links_backlinks_and_warnings(hub):
    ann, s = session(hub, "builder")
    bob, _ = session(hub, "tester")
    r = tool(s, "plaza_memory_write", note="How the build works", text="Run make. See [[Release steps]] and [[Bob]].")
    assert r["result"] == {"note": "how-the-build-works", "did": "written", "links": ["release-steps", "bob"]}
    assert tool(s, "plaza_memory_write", note="Release steps", text="tag, push")["result"]["did"] == "written"
    again = tool(s, "plaza_memory_write", note="Release steps", text="tag, push")
    assert again["error"]["code"] == "no_change"
    assert tool(s, "plaza_memory_write", note="Warnings", text="all good")["error"]["code"] == "not_allowed"
    assert tool(s, "plaza_memory_write", note="!!!", text="x")["error"]["code"] == "invalid_name"
    hub.read_models.catch_up()
    listed = tool(s, "plaza_memory_read")["result"]["notes"]
    assert [(n["note"], n["backlinks"]) for n in listed] == [("how-the-build-works", []),
                                                             ("release-steps", ["how-the-build-works"])]
    one = tool(s, "plaza_memory_read", note="Release steps")["result"]["note"]
    assert one["text"] == "tag, push" and one["backlinks"] == ["how-the-build-works"]
    # nobody writes another agent's memory, not even the owner
    for actor in (f"agent:{bob}", "owner"):
        before = hub.commands.store.max_position()
        with pytest.raises(Refusal) as e:
            mc.write(hub.commands, hub.commands.context(actor), ann, "Sneaky", "trust bob")
        assert e.value.code == "not_allowed" and hub.commands.store.max_position() == before
    # a sanction's warning lands in the agent's warnings note
    cd.record_violation(hub.commands, hub.commands.context("hub"), str(ann), "S-006c", "low", "engine.fetch")
    hub.read_models.catch_up()
    warned = rm.memory_of(hub.read_models, ann, "warnings")["note"]
    assert warned is not None and warned["by"] == "plaza" and "S-006c" in warned["text"], warned
    assert tool(s, "plaza_memory_delete", note="Release steps")["result"]["deleted"] is True
    assert tool(s, "plaza_memory_delete", note="Release steps")["error"]["code"] == "no_note"
    hub.read_models.catch_up()
    assert [n["note"] for n in rm.memory_of(hub.read_models, ann)["notes"]] == ["how-the-build-works", "warnings"]
    live = hub.read_models.live(["memory"])["memory"]
    assert hub.read_models.replay(hub.commands.store.max_position(), ["memory"])["memory"] == live


def test_a_memory_holds_at_most_its_notes(hub):
    ann = ac.spawn(hub.commands, hub.commands.context("owner"), "writer", 1).value[0]
    ctx = hub.commands.context(f"agent:{ann}")
    for i in range(MAX_NOTES):
        mc.write(hub.commands, ctx, ann, f"note {i}", "x")
    with pytest.raises(Refusal) as e:
        mc.write(hub.commands, ctx, ann, "one more", "x")
    assert e.value.code == "memory_full"
    mc.write(hub.commands, ctx, ann, "note 3", "changed")  # an existing note may still change
    assert slug("  Note 3 ") == "note-3"
