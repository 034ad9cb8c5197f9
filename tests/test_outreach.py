"""Outreach, on SQLite and PostgreSQL, with an injected clock: "An idle agent with nothing to do goes
looking for people to work with. By default it does this at most once every 20 minutes. The setting
is outreach_minutes, and 0 turns outreach off." STOP ALL holds it; it never wakes a sleeping agent;
a restarted hub (or a second one) sends nobody twice in one interval."""

from __future__ import annotations

import datetime as dt

import pytest
from support.sessions import session

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import hiring as hc
from agentplaza.commands import outreach as oc
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import tasks as tc
from agentplaza.domain import outreach as o
from agentplaza.domain.base import Refusal
from agentplaza.projections import hiring as hiring_rm
from agentplaza.projections.outreach import outreach_of
from agentplaza.runtime.fleet import AgentRuntime

START = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def plaza(folders, database_url):
    now = [START]
    h = Hub.open(folders, database_url=database_url, clock=lambda: now[0])
    yield h, now
    h.close()


def owner(hub):
    return hub.commands.context("owner")


def later(hub, now, **delta):
    now[0] += dt.timedelta(**delta)
    hub.read_models.catch_up()


def outreach_items(hub, cid):
    return [q for q in ac.agent(hub.commands, cid).queue if q["text"].startswith("You have nothing to do")]


def finish(s):
    """The agent runs the item it was given and is idle again."""
    item = s.handle({"op": "next", "wait": 0})["item"]
    assert item is not None
    s.handle({"op": "done", "item": item["item"], "outcome": "done"})
    return item


def test_an_idle_agent_goes_looking_at_most_once_every_outreach_minutes(plaza):
    hub, now = plaza
    orch, _ = session(hub, "orchestrator")
    ann, s_ann = session(hub, "builder")
    bob, s_bob = session(hub, "tester")
    cy, _ = session(hub, "writer")
    assert "error" not in s_ann.handle({"op": "tool", "tool": "plaza_message", "args": {"to": bob, "text": "hi"}})
    finish(s_bob)  # bob reads ann's message and is idle again
    busy = tc.create(hub.commands, owner(hub), "a", "a", 300, role="writer").value["id"]
    tc.assign(hub.commands, owner(hub), busy, str(cy))  # cy holds a task: it has something to do
    rt = s_ann.rt
    later(hub, now, seconds=30)
    assert rt.reach_out() == []  # idle, but for less than IDLE_BEFORE_OUTREACH_S
    later(hub, now, seconds=o.IDLE_BEFORE_OUTREACH_S)
    assert sorted(rt.reach_out()) == sorted([ann, bob])  # not the orchestrator, not cy with its task
    hub.read_models.catch_up()
    [item] = outreach_items(hub, ann)
    assert "Go looking for people to work with" in item["text"] and f"agent {bob}, tester" in item["text"]
    assert "plaza_board_read" in item["text"] and "plaza_message" in item["text"]
    assert outreach_items(hub, orch) == [] and outreach_items(hub, cy) == []
    assert outreach_of(hub.read_models, ann)["count"] == 1
    # the agent works on it, and is idle again: not again before the interval is over
    finish(s_ann)
    later(hub, now, minutes=10)
    assert rt.reach_out() == []  # ann went 10 minutes ago; bob has not taken its item yet
    assert outreach_items(hub, ann) == []
    restarted = AgentRuntime(hub, node="off")  # a new hub process plans on the log, not its memory
    assert ann not in restarted.reach_out()
    with pytest.raises(Refusal) as e:  # the command checks on the stored state
        oc.reach_out(hub.commands, hub.commands.context("hub"), ann, "look around")
    assert e.value.code == "outreach_not_due"
    later(hub, now, minutes=o.DEFAULT_OUTREACH_MINUTES - 10)
    assert ann in restarted.reach_out()
    hub.read_models.catch_up()
    assert outreach_of(hub.read_models, ann)["count"] == 2


def test_outreach_never_wakes_a_sleeping_agent_and_stop_all_holds_it(plaza):
    hub, now = plaza
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "tester")
    ac.sleep(hub.commands, owner(hub), bob)
    later(hub, now, minutes=30)
    plaza_commands.stop_all(hub.commands, hub.commands.context("owner", "a look at the laws"))
    hub.read_models.catch_up()
    rt = s_ann.rt
    assert rt.reach_out() == []  # STOP ALL: no outreach
    with pytest.raises(Refusal) as e:
        oc.reach_out(hub.commands, hub.commands.context("hub"), ann, "look around")
    assert e.value.code == "plaza_held"
    plaza_commands.resume(hub.commands, owner(hub))
    hub.read_models.catch_up()
    assert rt.reach_out() == [ann]  # bob sleeps on: outreach never wakes an agent on its own
    hub.read_models.catch_up()
    assert ac.agent(hub.commands, bob).status == "asleep" and outreach_items(hub, bob) == []
    with pytest.raises(Refusal) as e:
        oc.reach_out(hub.commands, hub.commands.context("hub"), bob, "look around")
    assert e.value.code == "agent_not_idle"
    assert ac.agent(hub.commands, bob).status == "asleep"


def test_outreach_minutes_is_the_owners_setting_and_0_turns_it_off(plaza):
    hub, now = plaza
    ann, s_ann = session(hub, "builder")
    hub.read_models.catch_up()
    assert hiring_rm.settings_view(hub.read_models)["society"] == {"outreach_minutes": 20}
    for ctx, value, code in ((hub.commands.context(f"agent:{ann}"), 5, "owner_only"), (owner(hub), -1, "invalid_value"),
                             (owner(hub), o.MAX_OUTREACH_MINUTES + 1, "invalid_value"),
                             (owner(hub), "5", "invalid_value"), (owner(hub), 20, "no_change")):
        with pytest.raises(Refusal) as e:
            hc.set_outreach_minutes(hub.commands, ctx, value)
        assert e.value.code == code
    hc.set_outreach_minutes(hub.commands, owner(hub), 0)
    later(hub, now, hours=5)
    assert hiring_rm.settings_view(hub.read_models)["society"] == {"outreach_minutes": 0}
    assert s_ann.rt.reach_out() == []
    with pytest.raises(Refusal) as e:
        oc.reach_out(hub.commands, hub.commands.context("hub"), ann, "look around")
    assert e.value.code == "outreach_off"
    hc.set_outreach_minutes(hub.commands, owner(hub), 5)
    hub.read_models.catch_up()
    assert s_ann.rt.reach_out() == [ann]
    finish(s_ann)
    later(hub, now, minutes=5)
    assert s_ann.rt.reach_out() == [ann]  # every 5 minutes now
    # rebuilt from event 1, the read models show the same
    hub.read_models.catch_up()
    live = (hiring_rm.settings_view(hub.read_models), outreach_of(hub.read_models, ann))
    hub.read_models.rebuild()
    assert (hiring_rm.settings_view(hub.read_models), outreach_of(hub.read_models, ann)) == live
