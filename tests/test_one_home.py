"""The drifts the house issue names, each fixed on a real store (SQLite and PostgreSQL):

- a task for a role no agent can have is refused, naming the 17 roles, and writes nothing;
- "is the plaza held?" is one function, and every part that asks gets the same answer from it;
- the conduct alone keeps an agent's permission mode: the conduct route's change is what the hello
  offers and the roster shows; a spawn and a fork set it; agents recorded with a mode still replay.
"""

from __future__ import annotations

import uuid

import pytest

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import conduct as cc
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import scheduler
from agentplaza.commands import tasks as tk
from agentplaza.domain.agents import LOCAL_NODE, Agent, Node, Transcript, node_id
from agentplaza.domain.base import Refusal
from agentplaza.domain.conduct import mode_of
from agentplaza.domain.plaza import PLAZA_ID, held, require_running
from agentplaza.projections.agents import agents_table
from agentplaza.runtime.fleet import AgentRuntime, HarnessSession
from jhrl.catalog import ROLES

WRITE_TOOL = "vm.write_file"


@pytest.fixture
def hub(folders, database_url):
    h = Hub.open(folders, database_url=database_url)
    yield h
    h.close()


def owner(hub):
    return hub.commands.context("owner")


def roster(hub) -> dict:
    hub.read_models.catch_up()
    return {r["cid"]: r for r in hub.read_models.rows(agents_table)}


def hello(hub, cid: int) -> dict:
    return HarnessSession(AgentRuntime(hub, node="off"), cid, None).handle({"op": "hello"})


def refused(hub, code: str, fn, *args, **kw) -> Refusal:
    before = hub.store.max_position()
    with pytest.raises(Refusal) as e:
        fn(hub.commands, *args, **kw)
    assert e.value.code == code, e.value.message
    assert hub.store.max_position() == before  # a refusal changes nothing
    return e.value


# -- roles ---------------------------------------------------------------------------------------------

def test_a_task_for_a_role_no_agent_can_have_is_refused_naming_the_17_roles(hub):
    r = refused(hub, "unknown_role", tk.create, owner(hub), "Build it", "it builds", 500, role="buildr")
    assert all(role in r.message for role in ROLES)
    refused(hub, "invalid_role", tk.create, owner(hub), "Build it", "it builds", 500, role="builder\n")
    assert tk.create(hub.commands, owner(hub), "Build it", "it builds", 500, role="builder").value["role"] == "builder"


def test_a_worker_reporting_a_role_with_a_trailing_newline_is_refused(hub):
    refused(hub, "invalid_role", tk.worker_available, hub.commands.context("agent:7"), "7", "worker\n")
    refused(hub, "unknown_role", tk.worker_available, hub.commands.context("agent:7"), "7", "buildr")


# -- the hold ---------------------------------------------------------------------------------------------

def test_every_part_asks_held_the_same_way_and_gets_the_same_answer(hub):
    cmds = hub.commands
    rows = hub.read_models.states["plaza"].rows

    def answers() -> set:
        hub.read_models.catch_up()
        in_unit = cmds.run(lambda unit: held(unit.get)).value
        return {held(cmds.store.get), in_unit, held(lambda i: rows.get("rm_plaza", i.hex)),
                scheduler.held(cmds), AgentRuntime(hub, node="off").held()}

    assert answers() == {False}
    require_running(cmds.store.get)
    plaza_commands.stop_all(cmds, cmds.context("owner", "a test"))
    assert answers() == {True}
    with pytest.raises(Refusal) as e:
        require_running(cmds.store.get)
    assert e.value.code == "plaza_held"
    plaza_commands.resume(cmds, cmds.context("owner", "done"))
    assert answers() == {False}


def test_a_plaza_not_founded_yet_is_not_held():
    assert held(lambda _id: None) is False
    assert held({PLAZA_ID: {"held": True}}.get) is True


# -- the permission mode ------------------------------------------------------------------------------------

def test_the_conduct_route_sets_the_mode_the_hello_offers_and_the_roster_shows(hub):
    (cid,) = ac.spawn(hub.commands, owner(hub), "builder", 1).value
    assert WRITE_TOOL in hello(hub, cid)["tools"]
    cc.set_mode(hub.commands, owner(hub), str(cid), "read-only")  # POST /v1/conduct/{cid}/mode
    said = hello(hub, cid)
    assert said["permission_mode"] == "read-only" and WRITE_TOOL not in said["tools"]
    assert roster(hub)[cid]["permission_mode"] == "read-only"
    ac.update(hub.commands, owner(hub), cid, {"permission_mode": "ask"})  # PATCH /v1/agents/{cid}: the same home
    assert mode_of(hub.store.get, cid) == "ask" and roster(hub)[cid]["permission_mode"] == "ask"
    assert not hasattr(ac.agent(hub.commands, cid), "permission_mode")


def test_an_unchanged_mode_is_refused_by_the_conduct_route_and_no_change_by_patch(hub):
    (cid,) = ac.spawn(hub.commands, owner(hub), "builder", 1).value
    refused(hub, "mode_unchanged", cc.set_mode, owner(hub), str(cid), "autonomous")
    before = hub.store.max_position()
    ac.update(hub.commands, owner(hub), cid, {"permission_mode": "autonomous"})
    assert hub.store.max_position() == before
    refused(hub, "invalid_mode", ac.update, owner(hub), cid, {"permission_mode": "yolo"})


def test_a_new_agent_on_a_freed_cid_starts_autonomous_whatever_the_cid_had(hub):
    (cid,) = ac.spawn(hub.commands, owner(hub), "builder", 1).value
    ac.set_mode(hub.commands, owner(hub), cid, "read-only")
    ac.delete(hub.commands, owner(hub), cid)
    (again,) = ac.spawn(hub.commands, owner(hub), "tester", 1).value
    assert again == cid  # the lowest free CID: the deleted agent's
    assert mode_of(hub.store.get, cid) == "autonomous" and roster(hub)[cid]["permission_mode"] == "autonomous"
    assert WRITE_TOOL in hello(hub, cid)["tools"]


def test_a_fork_takes_its_sources_mode(hub):
    (src,) = ac.spawn(hub.commands, owner(hub), "builder", 1).value
    ac.set_mode(hub.commands, owner(hub), src, "ask")
    forks = ac.fork(hub.commands, owner(hub), src, 2, "cp1").value
    assert [mode_of(hub.store.get, f) for f in forks] == ["ask", "ask"]
    assert [roster(hub)[f]["permission_mode"] for f in forks] == ["ask", "ask"]


def test_an_agent_recorded_with_its_own_mode_still_replays_and_the_conduct_decides(hub):
    """Events from before the conduct alone kept the mode: ``Agent.Created`` with ``permission_mode``
    and ``Agent.ModeSet``. They load from the database, and change nothing of the agent's."""
    ctx = owner(hub)
    n = hub.store.get(node_id(LOCAL_NODE)) or Node.found_local(ctx)
    agent_id = uuid.UUID(hex=hub.commands.new_id())
    (cid,) = n.assign(ctx, [agent_id.hex])
    old = Agent.start(ctx, id=agent_id, cid=cid, role="builder", node="n0", model=None, permission_mode="read-only")
    old.record(Agent.ModeSet, ctx, permission_mode="ask")
    hub.store.commit(n, old, Transcript.open(ctx, agent_id, cid))
    with hub.store.fresh():
        loaded = ac.agent(hub.commands, cid)
    assert loaded.role == "builder" and loaded.version == 2 and not hasattr(loaded, "permission_mode")
    assert mode_of(hub.store.get, cid) == "autonomous" and roster(hub)[cid]["permission_mode"] == "autonomous"
    assert hello(hub, cid)["permission_mode"] == "autonomous"
