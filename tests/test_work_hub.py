"""Work and conduct over HTTP and the command line, against a real hub (its scheduler running)."""

from __future__ import annotations

import contextlib
import json

import pytest
from support.agentside import AgentSide
from support.conduct import record_violation, wait_seen
from support.hubproc import cli, ok
from support.treasury import Teller

from agentplaza.api.errors import status_of
from agentplaza.domain.base import Refusal


def error(r, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text
    return r.json()["error"]["message"]


@contextlib.contextmanager
def refused(status: int, code: str):
    """An agent's action refused, with the status the hub gives that refusal."""
    with pytest.raises(Refusal) as e:
        yield
    assert (status_of(e.value), e.value.code) == (status, code), e.value


def test_a_task_from_creation_to_payment_over_http(hub):
    with hub.client() as c, Teller(hub) as teller, AgentSide(hub) as agent:
        teller.wallet(7, "ann", "builder")
        agent.available(7, "builder")
        agent.available(9, "reviewer")
        t = ok(c.post("/v1/tasks", json={"title": "Write the release notes", "budget": 500, "role": "builder",
                                         "acceptance": "Every change since 0.0.8 is listed"}))
        assert (t["id"], t["state"], t["budget"]) == ("t1", "open", 500)
        ok(c.post("/v1/tasks/schedule", json={}))  # the hub's own scheduler may have been first: the same worker either way
        assert ok(c.get("/v1/tasks/t1"))["worker"] == "7"
        teller.charge(7, "t1", route="gateway", reported_cost=100)
        agent.report("t1", 7, "Listed them", ["NOTES.md"], "Compared with git log")
        assert ok(c.get("/v1/tasks/t1"))["phase"] == "review"
        ok(c.post("/v1/tasks/schedule", json={}))
        assert ok(c.get("/v1/tasks/t1"))["reviewer"] == "9"
        with refused(403, "own_work"):
            agent.review("t1", 7, True, "mine")
        agent.review("t1", 9, True, "All there")
        assert ok(c.get("/v1/tasks/t1"))["state"] == "done"
        assert ok(c.get("/v1/treasury/wallets"))["wallets"][0]["balance"] == 20
        tl = ok(c.get("/v1/tasks/t1/timeline"))["timeline"]
        assert [x["event"] for x in tl] == ["Created", "Claimed", "Reported", "ReviewerAssigned", "Passed"]
        error(c.post("/v1/tasks/t1/withdraw", json={}), 409, "task_ended")
        error(c.get("/v1/tasks/t99"), 404, "no_task")
        error(c.post("/v1/tasks", json={"title": "Huge", "acceptance": "x", "budget": 10**6}), 409, "insufficient_budget")
        with refused(422, "budget_too_small"):
            agent.create(3, "Agent's", "x", 100)
        assert ok(c.get("/v1/overview"))["tasks"]["done"] == 1


def test_bids_awards_and_held_plaza_over_http(hub):
    with hub.client() as c, AgentSide(hub) as agent:
        ok(c.post("/v1/tasks", json={"title": "Logo", "acceptance": "SVG", "budget": 900, "role": "designer"}))
        agent.bid("t1", 4, "designer", 700)
        with refused(403, "wrong_role"):
            agent.bid("t1", 5, "builder", 700)
        assert [b["worker"] for b in ok(c.get("/v1/tasks/t1/bids"))["bids"]] == ["4"]
        ok(c.post("/v1/plaza/stop", json={"reason": "audit"}))
        error(c.post("/v1/tasks/t1/award", json={"worker": 4}), 409, "plaza_held")
        assert ok(c.post("/v1/tasks/schedule", json={}))["held"] is True
        ok(c.post("/v1/plaza/resume", json={}))
        t = ok(c.post("/v1/tasks/t1/award", json={"worker": 4}))
        assert (t["state"], t["worker"]) == ("claimed", "4")
        t = ok(c.post("/v1/tasks/t1/withdraw", json={"reason": "not needed"}))
        assert t["state"] == "withdrawn"


def test_approvals_and_conduct_over_http(hub, folders, database_url):
    with hub.client() as c:
        ok(c.post("/v1/conduct/7/mode", json={"mode": "ask"}))
        call = {"agent": 7, "role": "builder", "tool": "engine.edit", "args": {"path": "a.py"}}
        held = ok(c.post("/v1/conduct/calls", json=call))
        assert (held["decision"], held["approval"]) == ("ask", "a1")
        pending = ok(c.get("/v1/approvals", params={"pending": "true"}))["approvals"]
        assert [(a["id"], a["kind"]) for a in pending] == [("a1", "call")]
        out = ok(c.post("/v1/approvals/a1/approve", json={"reason": "Checked the diff"}))
        assert out["approval"]["status"] == "approved" and out["approval"]["decision_reason"] == "Checked the diff"
        error(c.post("/v1/approvals/a1/deny", json={}), 409, "approval_decided")
        ran = ok(c.post("/v1/conduct/calls", json=call))
        assert (ran["decision"], ran["approved_by"]) == ("allow", "a1")
        assert ok(c.post("/v1/conduct/calls", json=call))["decision"] == "ask"
        v = record_violation(folders, database_url, 7, "S-006c", "high", "engine.fetch")
        assert v["steps"] == ["fine 150", "probation 24h"]
        wait_seen(c, v["position"])
        show = ok(c.get("/v1/conduct/7"))
        assert [s["suspension"] for s in show["in_force"]] == ["s1"] and show["mode"] == "ask"
        show = ok(c.post("/v1/conduct/7/suspensions/s1/lift", json={"reason": "enough"}))
        assert show["in_force"] == []
        error(c.get("/v1/approvals/a77"), 404, "no_approval")
        error(c.post("/v1/conduct/7/mode", json={"mode": "yolo"}), 422, "invalid_mode")


def test_held_payments_are_approvals_and_the_old_routes_still_decide(hub):
    with hub.client() as c, Teller(hub) as teller:
        for cid in (7, 8):
            teller.wallet(cid, f"a{cid}", "builder")
        teller.escrow("e1", 6000)
        teller.charge(7, "e1", route="gateway", reported_cost=5000)
        teller.settle("e1", True, worker=7)
        teller.pay(7, 8, 501, "one")
        held = teller.pay(7, 8, 502, "two")
        pending = ok(c.get("/v1/approvals", params={"status": "pending", "kind": "payment"}))["approvals"]
        assert [(a["id"], a["detail"]["amount"]) for a in pending] == [("a1", 501), ("a2", 502)]
        out = ok(c.post("/v1/approvals/a1/approve", json={"reason": "agreed"}))
        assert out["payment"]["status"] == "approved" and out["entries"][0]["kind"] == "Transfer"
        out = ok(c.post(f"/v1/treasury/payments/{held['payment']['id']}/deny", json={"reason": "no"}))
        assert out["payment"]["status"] == "denied"
        assert ok(c.get("/v1/approvals/a2"))["status"] == "denied"


def test_the_command_line(hub):
    with AgentSide(hub) as agent:
        agent.available(7, "builder")
        agent.busy(7, "chatting")  # the scheduler skips a busy worker; the owner may still assign to it
    r = cli(hub, "tasks", "create", "Write the release notes", "--acceptance", "Every change since 0.0.8 is listed",
            "--role", "builder", "--budget", "500")
    assert r.returncode == 0 and "t1" in r.stdout, r.stderr
    r = cli(hub, "tasks", "create", "Huge", "--acceptance", "x", "--budget", "1000000")
    assert r.returncode == 1 and "insufficient_budget" in r.stderr and r.stdout == ""
    r = cli(hub, "tasks", "assign", "t1", "7")
    assert r.returncode == 0, r.stderr
    assert "assigned" in cli(hub, "tasks", "timeline", "t1").stdout
    assert json.loads(cli(hub, "--json", "tasks", "show", "t1").stdout)["worker"] == "7"
    assert "Claimed" in cli(hub, "tasks", "timeline", "t1").stdout
    assert "t1" in cli(hub, "tasks", "list").stdout
    assert "builder" in cli(hub, "tasks", "workers").stdout
    r = cli(hub, "tasks", "withdraw", "t1", "--reason", "changed my mind")
    assert r.returncode == 0 and "withdrawn" in r.stdout
    assert cli(hub, "conduct", "mode", "7", "ask").returncode == 0
    with hub.client() as c:
        ok(c.post("/v1/conduct/calls", json={"agent": 7, "role": "builder", "tool": "engine.edit", "args": {"p": 1}}))
    assert "a1" in cli(hub, "approvals", "list", "--pending").stdout
    assert "engine.edit" in cli(hub, "approvals", "show", "a1").stdout
    r = cli(hub, "approvals", "deny", "a1", "--reason", "Not this month")
    assert r.returncode == 0 and "denied" in r.stdout
    r = cli(hub, "approvals", "approve", "a1", "--reason", "again")
    assert r.returncode == 1 and "approval_decided" in r.stderr
    assert "ask" in cli(hub, "conduct", "show", "7").stdout
