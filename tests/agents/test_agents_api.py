"""The agents' routes and commands through a real hub process (no node: nothing boots here)."""

from __future__ import annotations

import pytest
from support.hubproc import HubProcess, cli


@pytest.fixture
def hub(folders, database_url):
    h = HubProcess(folders, database_url)
    h.env["APZ_NODE"] = "off"
    h.start()
    yield h
    h.stop()


def test_spawn_list_show_patch_tell_and_the_lifecycle_over_http(hub):
    with hub.client() as c:
        r = c.post("/v1/agents", json={"role": "builder", "count": 2})
        assert r.status_code == 200, r.text
        cids = [a["cid"] for a in r.json()["agents"]]
        assert cids == [3, 4]
        assert c.post("/v1/agents", json={"role": "builder", "count": 17}).json()["error"]["code"] == "invalid_count"
        assert c.post("/v1/agents", json={"role": "king"}).status_code == 422
        assert c.post("/v1/agents", json={"role": "builder", "role2": 1}).status_code == 422
        roster = c.get("/v1/agents", params={"role": "builder"}).json()["agents"]
        assert [a["status"] for a in roster] == ["offline", "offline"]
        page = c.patch("/v1/agents/3", json={"name": "Bob", "model": "openai/gpt-5-mini", "permission_mode": "ask"}).json()
        a = page["agent"]
        assert (a["name"], a["model"], a["model_source"], a["permission_mode"]) == ("Bob", "openai/gpt-5-mini", "agent", "ask")
        a = c.patch("/v1/agents/3", json={"model": None}).json()["agent"]
        assert (a["model"], a["model_source"]) == (None, "default")
        told = c.post("/v1/agents/3/tell", json={"text": "Introduce yourself in one line."}).json()
        assert told["agent"]["queue"] == 1
        logs = c.get("/v1/agents/3/logs").json()["transcript"]
        assert [(e["kind"], e["text"]) for e in logs] == [("told", "Introduce yourself in one line.")]
        for n in range(3):
            c.post("/v1/agents/3/tell", json={"text": f"and then {n}"})
        texts = lambda **q: [e["text"] for e in c.get("/v1/agents/3/logs", params=q).json()["transcript"]]  # noqa: E731
        assert texts(limit=2) == ["Introduce yourself in one line.", "and then 0"]
        assert texts(limit=2, tail="1") == ["and then 1", "and then 2"]      # the last ones, oldest first
        assert texts(tail="false", limit=1) == ["Introduce yourself in one line."]
        for bad in ({"tail": "maybe"}, {"tail": "1", "after": 1}):
            r = c.get("/v1/agents/3/logs", params=bad)
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
        assert c.post("/v1/agents/3/stop", json={}).json()["agent"]["run"] == "stopped"
        again = c.post("/v1/agents/3/stop", json={})
        assert again.status_code == 409 and again.json()["error"]["code"] == "agent_stopped"
        assert c.post("/v1/agents/3/restart", json={}).json()["agent"]["run"] == "running"
        assert c.post("/v1/agents/3/wipe", json={}).json()["agent"]["generation"] == 2
        assert c.post("/v1/agents/4/retire", json={"reason": "enough"}).json()["agent"]["run"] == "retired"
        assert c.post("/v1/agents/4/tell", json={"text": "hi"}).json()["error"]["code"] == "agent_retired"
        assert c.delete("/v1/agents/4").json() == {"deleted": 4}
        assert c.get("/v1/agents/4").status_code == 404
        assert c.get("/v1/agents/x").status_code == 422
        assert c.get("/v1/overview").json()["agents"]["total"] == 1
        assert [(n["name"], n["agents"], n["online"]) for n in c.get("/v1/nodes").json()["nodes"]] == [("n0", 1, False)]
        roles = c.get("/v1/society/roles").json()["roles"]
        assert len(roles) == 17 and roles[0]["role"] == "orchestrator" and roles[0]["tier"] == "orchestrator"


def test_the_cli_spawns_lists_and_asks_before_stopping(hub):
    r = cli(hub, "agents", "create", "--role", "researcher", "--count", "2")
    assert r.returncode == 0 and "researcher" in r.stdout, r.stderr
    r = cli(hub, "agents", "list", "--role", "researcher")
    assert r.stdout.count("researcher") == 2
    r = cli(hub, "agents", "tell", "3", "--text", "Introduce yourself in one line.")
    assert r.returncode == 0 and "told agent 3" in r.stdout
    r = cli(hub, "agents", "stop", "3", stdin="")
    assert r.returncode == 1 and "not confirmed" in r.stderr
    r = cli(hub, "agents", "stop", "3", "--yes")
    assert r.returncode == 0 and "stopped" in r.stdout
    r = cli(hub, "agents", "model", "4", "anthropic/claude-haiku-5-5")
    assert "anthropic/claude-haiku-5-5 (agent)" in r.stdout
    r = cli(hub, "agents", "model", "4", "default")
    assert " (default)" in r.stdout and "- (default)" not in r.stdout  # the model it thinks with, and where from
    r = cli(hub, "agents", "logs", "3")
    assert "told" in r.stdout and "Introduce yourself" in r.stdout
    r = cli(hub, "agents", "delete", "4", "--yes")
    assert r.returncode == 0 and "deleted agent 4" in r.stdout
    r = cli(hub, "agents", "show", "4")
    assert r.returncode == 1 and "no agent with cid 4" in r.stderr
    r = cli(hub, "society", "roles")
    assert r.returncode == 0 and r.stdout.count("\n") == 18 and "sandbox" in r.stdout


def test_checkpoints_need_a_node(hub):
    r = cli(hub, "agents", "create", "--role", "builder")
    assert r.returncode == 0, r.stderr
    r = cli(hub, "agents", "checkpoint", "3", "--name", "x")
    assert r.returncode == 1 and "without a node" in r.stderr
    r = cli(hub, "agents", "rollback", "3", "x", stdin="")
    assert r.returncode == 1 and "not confirmed" in r.stderr
    with hub.client() as c:
        assert c.get("/v1/agents/3/checkpoints").json()["error"]["code"] == "no_node"


def test_nodes_list_and_show(hub):
    r = cli(hub, "nodes", "list")
    assert r.returncode == 0 and "n0" in r.stdout and "3-102" in r.stdout
    shown = cli(hub, "--json", "nodes", "show", "n0")
    assert shown.returncode == 0 and '"cid_first": 3' in shown.stdout
    missing = cli(hub, "nodes", "show", "n9")
    assert missing.returncode == 1 and "no node 'n9'" in missing.stderr
    with hub.client() as c:
        assert c.get("/v1/nodes/n9").json()["error"]["code"] == "unknown_node"
        assert c.get("/v1/nodes/n0").json()["node"]["cid_last"] == 102
