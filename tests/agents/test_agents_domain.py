"""The agent lifecycle on the store: spawn with CIDs from n0's range, rename, model, mode, tell, stop,
restart, wipe, retire, delete, and the read models that follow them (on SQLite and Postgres)."""

from __future__ import annotations

import ast
import datetime as dt
import tempfile
from pathlib import Path

import pytest
from support.source import parsed
from support.storeplaza import plaza_on_store

from agentplaza.commands import agents as ac
from agentplaza.commands.unit import Commands
from agentplaza.domain import agents as agents_domain
from agentplaza.domain.agents import CID_RANGE_SIZE, LOCAL_CID_FIRST, Agent
from agentplaza.domain.base import Refusal
from agentplaza.domain.conduct import mode_of
from agentplaza.domain.refusals import Kind
from agentplaza.events.store import EventStore
from agentplaza.projections.agents import agents_table, transcript

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def plaza(folders, database_url):
    with plaza_on_store(folders, database_url, T0) as plaza:
        yield plaza


def owner(cmds, reason=None):
    return cmds.context("owner", reason)


def roster(rm):
    rm.catch_up()
    return {r["cid"]: r for r in rm.rows(agents_table)}


def test_spawn_takes_the_lowest_free_cids_of_n0_and_the_roster_shows_them(plaza):
    cmds, rm = plaza
    cids = ac.spawn(cmds, owner(cmds), "builder", 2).value
    assert cids == [LOCAL_CID_FIRST, LOCAL_CID_FIRST + 1]
    more = ac.spawn(cmds, owner(cmds), "reviewer", 1, model="anthropic/claude-haiku-5-5").value
    assert more == [LOCAL_CID_FIRST + 2]
    r = roster(rm)
    assert [r[c]["role"] for c in sorted(r)] == ["builder", "builder", "reviewer"]
    assert all(x["status"] == "offline" and x["run"] == "running" and x["node"] == "n0" for x in r.values())
    assert r[more[0]]["model"] == "anthropic/claude-haiku-5-5" and r[cids[0]]["model"] is None
    assert r[cids[0]]["permission_mode"] == "autonomous"
    node = ac.node(cmds)
    assert (node.name, node.cid_first, node.cid_last, len(node.cids)) == ("n0", 3, 102, 3)
    wallets = [(r.data["cid"], r.data["role"]) for r in cmds.store.read(0) if r.kind == "Wallet.Created"]
    assert wallets == [("3", "builder"), ("4", "builder"), ("5", "reviewer")]  # each spawn opens a wallet


@pytest.mark.parametrize("role,count,model,code", [
    ("builder", 0, None, "invalid_count"), ("builder", 17, None, "invalid_count"),
    ("wizard", 1, None, "unknown_role"), ("builder", 1, "haiku", "invalid_model"),
])
def test_spawn_refusals_change_nothing(plaza, role, count, model, code):
    cmds, rm = plaza
    before = cmds.store.max_position()
    with pytest.raises(Refusal) as e:
        ac.spawn(cmds, owner(cmds), role, count, model)
    assert e.value.code == code
    assert cmds.store.max_position() == before


def test_only_the_owner_spawns(plaza):
    cmds, _ = plaza
    with pytest.raises(Refusal) as e:
        ac.spawn(cmds, cmds.context("agent:3"), "builder", 1)
    assert e.value.code == "owner_only"


def test_the_range_holds_100_and_a_deleted_agents_cid_is_free_again(plaza):
    cmds, rm = plaza
    for _ in range(CID_RANGE_SIZE // 16):
        ac.spawn(cmds, owner(cmds), "writer", 16)
    ac.spawn(cmds, owner(cmds), "writer", CID_RANGE_SIZE % 16)
    with pytest.raises(Refusal) as e:
        ac.spawn(cmds, owner(cmds), "writer", 1)
    assert e.value.code == "no_free_cid"
    ac.delete(cmds, owner(cmds), 7)
    assert 7 not in roster(rm)
    assert ac.spawn(cmds, owner(cmds), "tester", 1).value == [7]
    r = roster(rm)
    assert r[7]["role"] == "tester" and r[7]["name"] is None


def test_name_once_then_only_the_owner_renames(plaza):
    cmds, rm = plaza
    (cid,) = ac.spawn(cmds, owner(cmds), "researcher", 1).value
    ac.name_self(cmds, cmds.context(f"agent:{cid}"), cid, "Ada")
    with pytest.raises(Refusal) as e:
        ac.name_self(cmds, cmds.context(f"agent:{cid}"), cid, "Queen")
    assert e.value.code == "already_named"
    ac.rename(cmds, owner(cmds), cid, "Ada L.")
    assert roster(rm)[cid]["name"] == "Ada L."
    with pytest.raises(Refusal):
        ac.rename(cmds, owner(cmds), cid, "  ")


def test_model_and_mode_per_agent(plaza):
    cmds, rm = plaza
    (cid,) = ac.spawn(cmds, owner(cmds), "builder", 1).value
    ac.update(cmds, owner(cmds), cid, {"model": "openai/gpt-5-mini", "permission_mode": "ask"})
    r = roster(rm)[cid]
    assert (r["model"], r["permission_mode"]) == ("openai/gpt-5-mini", "ask")
    ac.set_model(cmds, owner(cmds), cid, None)
    assert roster(rm)[cid]["model"] is None
    with pytest.raises(Refusal) as e:
        ac.set_mode(cmds, owner(cmds), cid, "yolo")
    assert e.value.code == "invalid_mode"


def test_work_flows_through_statuses_and_the_transcript(plaza):
    cmds, rm = plaza
    (cid,) = ac.spawn(cmds, owner(cmds), "builder", 1).value
    agent = cmds.context(f"agent:{cid}")
    ac.connected(cmds, agent, cid)
    assert roster(rm)[cid]["status"] == "idle"
    item = ac.tell(cmds, owner(cmds), cid, "Introduce yourself in one line.").value
    assert roster(rm)[cid]["queue"] == 1
    got = ac.take_work(cmds, agent, cid).value
    assert got == {"item": item, "kind": "tell", "from": "owner", "text": "Introduce yourself in one line."}
    assert ac.take_work(cmds, agent, cid).value is None  # one item at a time
    assert roster(rm)[cid]["status"] == "working"
    ac.add_entry(cmds, agent, cid, "tool_call", tool="vm.shell", detail={"effect": "allow"})
    ac.finish_work(cmds, agent, cid, item, "done", "I am a builder.")
    r = roster(rm)[cid]
    assert (r["status"], r["queue"], r["working_on"], r["entries"]) == ("idle", 0, None, 3)
    kinds = [(t["kind"], t["actor"]) for t in transcript(rm, cid)]
    assert kinds == [("told", "owner"), ("tool_call", f"agent:{cid}"), ("done", f"agent:{cid}")]
    ac.disconnected(cmds, cmds.context("node:n0"), cid, "channel closed")
    assert roster(rm)[cid]["status"] == "offline"


def test_stop_restart_wipe_retire_delete(plaza):
    cmds, rm = plaza
    (cid,) = ac.spawn(cmds, owner(cmds), "builder", 1).value
    ac.stop(cmds, owner(cmds), cid)
    with pytest.raises(Refusal) as e:
        ac.stop(cmds, owner(cmds), cid)
    assert e.value.code == "agent_stopped"
    with pytest.raises(Refusal) as e:
        ac.tell(cmds, owner(cmds), cid, "hello")
    assert e.value.code == "agent_stopped"
    ac.restart(cmds, owner(cmds), cid)
    assert (roster(rm)[cid]["run"], roster(rm)[cid]["generation"]) == ("running", 1)
    ac.tell(cmds, owner(cmds), cid, "queued")
    ac.wipe(cmds, owner(cmds), cid)
    r = roster(rm)[cid]
    assert (r["run"], r["generation"], r["queue"]) == ("running", 2, 0)
    ac.retire(cmds, owner(cmds, "done with it"), cid)
    for act in (ac.stop, ac.restart, ac.wipe, ac.retire):
        with pytest.raises(Refusal) as e:
            act(cmds, owner(cmds), cid)
        assert e.value.code == "agent_retired"
    assert roster(rm)[cid]["run"] == "retired"
    ac.delete(cmds, owner(cmds), cid)
    assert cid not in roster(rm)
    with pytest.raises(Refusal) as e:
        ac.stop(cmds, owner(cmds), cid)
    assert (e.value.code, e.value.kind) == ("unknown_agent", Kind.NOT_FOUND)


def test_read_models_rebuild_to_the_same_roster(plaza):
    cmds, rm = plaza
    (a, b) = ac.spawn(cmds, owner(cmds), "builder", 2).value
    ac.tell(cmds, owner(cmds), a, "x")
    ac.delete(cmds, owner(cmds), b)
    ac.spawn(cmds, owner(cmds), "writer", 1)
    rm.catch_up()
    live = rm.live(["agents", "transcript"])
    rm.rebuild()
    assert rm.live(["agents", "transcript"]) == live


#: What a pure decision may not reach: a clock, chance, the disk, a process, the network.
IMPURE_MODULES = {"os", "sys", "time", "random", "secrets", "socket", "subprocess", "shutil", "pathlib",
                  "threading", "asyncio", "anyio", "trio", "httpx", "sqlalchemy", "psycopg", "io", "tempfile"}
IMPURE_METHODS = {"now", "utcnow", "today", "uuid1", "uuid4", "getenv", "urandom"}
IMPURE_BUILTINS = {"open", "print", "input", "exec", "eval"}


def impurities(path: Path) -> list[str]:
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in IMPURE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if (node.module or "").split(".")[0] in IMPURE_MODULES:
                found.append(f"from {node.module}")
        elif isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in IMPURE_METHODS) or (
                    isinstance(f, ast.Name) and f.id in IMPURE_BUILTINS):
                found.append(f"{ast.unparse(f).rsplit('.', 1)[-1]}() at line {node.lineno}")
    return found


def test_agent_aggregate_is_pure():
    """The agents' domain (and every domain module) decides from its arguments alone: the context
    brings the time and the caller; ids come from the command; nothing reads a clock, chance, a file,
    a process or the network."""
    domain = Path(agents_domain.__file__).parent
    assert Agent.__module__ == agents_domain.__name__
    found = {p.name: bad for p in sorted(domain.glob("*.py")) if (bad := impurities(p))}
    assert found == {}
    assert impurities_of_source("import time\nx = uuid.uuid4()\n") == ["import time", "uuid4() at line 2"]


def impurities_of_source(text: str) -> list[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    try:
        return impurities(Path(f.name))
    finally:
        Path(f.name).unlink()


def test_node_and_agent_load_the_same_from_a_snapshot(plaza, folders, database_url):
    cmds, rm = plaza
    for _ in range(60):  # 120 node events: node n0 is snapshotted on the way
        (cid,) = ac.spawn(cmds, owner(cmds), "builder", 1).value
        ac.delete(cmds, owner(cmds), cid)
    (cid,) = ac.spawn(cmds, owner(cmds), "builder", 1).value
    for i in range(105):  # the agent and its conduct are snapshotted on the way
        ac.rename(cmds, owner(cmds), cid, f"name {i}")
        ac.set_mode(cmds, owner(cmds), cid, ("ask", "autonomous")[i % 2])
    ac.tell(cmds, owner(cmds), cid, "after the snapshot")
    fresh = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        cold = Commands(fresh)
        a = ac.agent(cold, cid)
        assert (a.cid, a.name, a.queue[0]["text"]) == (cid, "name 104", "after the snapshot")
        assert mode_of(cold.store.get, cid) == "ask"
        assert ac.node(cold).free_cids()[0] == LOCAL_CID_FIRST + 1
    finally:
        fresh.close()


def test_sleep_only_when_idle_and_work_wakes_it(plaza):
    cmds, rm = plaza
    (cid,) = ac.spawn(cmds, owner(cmds), "builder", 1).value
    with pytest.raises(Refusal) as e:
        ac.sleep(cmds, owner(cmds), cid)
    assert e.value.code == "agent_offline"
    ac.connected(cmds, cmds.context(f"agent:{cid}"), cid)
    ac.tell(cmds, owner(cmds), cid, "queued")
    with pytest.raises(Refusal) as e:
        ac.sleep(cmds, owner(cmds), cid)
    assert e.value.code == "agent_busy"
    item = ac.take_work(cmds, cmds.context(f"agent:{cid}"), cid).value["item"]
    ac.finish_work(cmds, cmds.context(f"agent:{cid}"), cid, item, "done")
    ac.sleep(cmds, owner(cmds), cid)
    assert roster(rm)[cid]["status"] == "asleep"
    ac.disconnected(cmds, cmds.context("node:n0"), cid, "the harness stream ended with the VM")
    assert roster(rm)[cid]["status"] == "asleep"
    with pytest.raises(Refusal) as e:
        ac.sleep(cmds, owner(cmds), cid)
    assert e.value.code == "agent_asleep"
    ac.tell(cmds, owner(cmds), cid, "wake up")
    r = roster(rm)[cid]
    assert (r["status"], r["queue"]) == ("idle", 1)
    with pytest.raises(Refusal) as e:
        ac.wake(cmds, owner(cmds), cid)
    assert e.value.code == "agent_awake"
