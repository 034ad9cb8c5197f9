"""Discoveries, on SQLite and PostgreSQL: an agent shares one with plaza_toolbox_share; the same agent and
name updates it, another agent endorses it (once); the toolbox keeps at most 500 entries (a flagged one goes
first); only the owner flags or removes; a flagged entry sorts last and is marked; plaza_toolbox shows them;
a refusal changes nothing; the read model rebuilt from event 1 equals the live one."""

from __future__ import annotations

import pytest
from support.sessions import session, tool

from agentplaza.api.hub import Hub
from agentplaza.commands import toolbox as tbc
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.toolbox import MAX_ENTRIES, TOOLBOX_ID, Toolbox
from agentplaza.projections import toolbox as rm

LINK = "https://example.org/jq"


@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def test_share_update_endorse_flag_and_remove_through_the_tools(hub):
    ann, s_ann = session(hub, "researcher")
    bob, s_bob = session(hub, "builder")
    r = tool(s_ann, "plaza_toolbox_share", name="jq", how="pipe JSON through filters", verdict="great", link=LINK)
    assert r["result"] == {"id": "d1", "did": "shared"}
    r = tool(s_ann, "plaza_toolbox_share", name="JQ", how="pipe JSON through filters; -r for raw",
             verdict="great", link=LINK)
    assert r["result"] == {"id": "d1", "did": "updated"}  # the same agent, the same name (any case)
    r = tool(s_bob, "plaza_toolbox_share", name="jq", how="x", verdict="works", link=LINK)
    assert r["result"]["did"] == "endorsed" and r["result"]["id"] == "d1"
    assert tool(s_bob, "plaza_toolbox_share", name="jq", how="x", verdict="y", link=LINK)["error"]["code"] == "no_change"
    assert tool(s_bob, "plaza_toolbox_share", name="fx", how="x", verdict="y", link="file:///etc/passwd")[
        "error"]["code"] == "invalid_link"
    assert tool(s_bob, "plaza_toolbox_share", name="fx", how="x", verdict="ok", link="https://fx.dev")["result"]["id"] == "d2"
    hub.read_models.catch_up()
    shown = tool(s_ann, "plaza_toolbox")["result"]["discoveries"]
    assert [(d["id"], d["endorsements"], d["flagged"]) for d in shown] == [("d1", 1, False), ("d2", 0, False)]
    owner = hub.commands.context("owner")
    with pytest.raises(Refusal) as e:
        tbc.flag(hub.commands, hub.commands.context(f"agent:{ann}"), "d1")
    assert e.value.code == "owner_only"
    tbc.flag(hub.commands, owner, "d1")
    hub.read_models.catch_up()
    assert [(d["id"], d["flagged"]) for d in rm.discovery_rows(hub.read_models)] == [("d2", False), ("d1", True)]
    for code, fn, entry in (("no_change", tbc.flag, "d1"), ("no_discovery", tbc.remove, "d9"),
                            ("no_discovery", tbc.flag, "../x")):
        before = hub.commands.store.max_position()
        with pytest.raises(Refusal) as e:
            fn(hub.commands, owner, entry)
        assert e.value.code == code and hub.commands.store.max_position() == before
    tbc.remove(hub.commands, owner, "d1")
    hub.read_models.catch_up()
    assert [d["id"] for d in rm.discovery_rows(hub.read_models)] == ["d2"]
    live = hub.read_models.live(["toolbox"])["toolbox"]
    assert hub.read_models.replay(hub.commands.store.max_position(), ["toolbox"])["toolbox"] == live


def test_the_toolbox_keeps_at_most_500_entries_and_drops_a_flagged_one_first():
    import datetime as dt

    ctx = Context("agent:3", dt.datetime(2026, 3, 2, tzinfo=dt.UTC), "c1")
    tb = Toolbox.open(ctx)
    for i in range(MAX_ENTRIES):
        tb.share(ctx, 3, f"tool {i}", "how", "ok", f"https://e.org/{i}")
    assert len(tb.entries) == MAX_ENTRIES and tb.id == TOOLBOX_ID
    out = tb.share(ctx, 3, "one more", "how", "ok", LINK)
    assert out["dropped"] == "d1" and len(tb.entries) == MAX_ENTRIES  # the one updated longest ago
    tb.share(ctx, 3, "tool 1", "how, better", "ok", "https://e.org/1")  # d2 is touched now
    owner = Context("owner", ctx.at, "c2")
    tb.flag(owner, "d300")
    assert tb.share(ctx, 3, "and another", "how", "ok", LINK)["dropped"] == "d300"  # a flagged one first
    assert tb.share(ctx, 3, "and a third", "how", "ok", LINK)["dropped"] == "d3"
    assert "tool 1" in {e["name"] for e in tb.entries.values()}
