"""The agents' own loop, in process (no VM): a harness's model turn goes through the hub's model
gateway on the route "loop", called in process (no HTTP: the gateway's in-process entry point, as
``api.main`` hands it to the runtime), and is charged as the guide's "The agent's own loop" says.

- A call with no task (the orchestrator planning) is not charged: a new agent starts at zero and
  still thinks.
- A call on a task is Spend from that task's escrow: the owner's price plus one credit, rounded up.
- A call the escrow cannot cover fails with "budget exhausted": the reply is discarded and not
  charged, and the work item is cancelled.
"""

from __future__ import annotations

import warnings

import pytest

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.api.main import gateway_call
from agentplaza.commands import agents as ac
from agentplaza.commands import tasks as tc
from agentplaza.commands import treasury as treasury_commands
from agentplaza.domain.treasury import own_loop_charge
from agentplaza.projections.agents import transcript
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MOCK = "mock/echo"


@pytest.fixture
def plaza(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        assert c.post("/v1/models/providers", json={"id": "mock"}).status_code == 200
        r = c.patch("/v1/models/policy", json={"worker": [MOCK], "orchestrator": [MOCK], "default_model": MOCK,
                                               "orchestrator_model": MOCK})
        assert r.status_code == 200, r.text
        c.hub = hub
        yield c
    hub.close()


def session(c, role: str) -> tuple[int, HarnessSession]:
    hub = c.hub
    cid = ac.spawn(hub.commands, hub.commands.context("owner"), role, 1).value[0]
    rt = AgentRuntime(hub, node="off", gateway=gateway_call(c.app, c.portal))  # the app's own loop, as apid's
    s = HarnessSession(rt, cid, None)
    assert "error" not in s.handle({"op": "hello"})
    return cid, s


def take_item(hub, s: HarnessSession, cid: int) -> str:
    ac.tell(hub.commands, hub.commands.context("owner"), cid, "work")
    return s.handle({"op": "next", "wait": 0})["item"]["item"]


def turn(s: HarnessSession, item: str, text: str) -> dict:
    return s.handle({"op": "model", "item": item, "messages": [{"role": "user", "content": text}], "tools": []})


def journal(c, **params) -> list[dict]:
    c.hub.read_models.catch_up()
    return c.get("/v1/treasury/journal", params=dict(params, limit=500)).json()["entries"]


def usage(c) -> list[dict]:
    c.hub.read_models.catch_up()
    return c.get("/v1/usage/calls").json()["calls"]


def given_task(c, cid: int, budget: int) -> str:
    cmds = c.hub.commands
    number = tc.create(cmds, cmds.context("owner"), "Write a.txt", "a.txt holds a line", budget).value["id"]
    tc.claim(cmds, cmds.context(f"agent:{cid}"), number, str(cid), "builder")
    return number


def test_a_call_with_no_task_is_not_charged(plaza):
    cid, s = session(plaza, "orchestrator")
    item = take_item(plaza.hub, s, cid)
    r = turn(s, item, "plan the day")
    assert "error" not in r and r["reply"]["text"] == "plan the day"
    (call,) = usage(plaza)
    assert (call["route"], call["task"], call["charged"], call["payer"]) == ("loop", None, 0, None)
    assert journal(plaza, kind="Spend") == []
    assert treasury_commands.wallet(plaza.hub.commands, str(cid)).balance == 0


def test_a_call_on_a_task_is_spend_from_its_escrow_at_the_owners_price_plus_one(plaza):
    assert plaza.patch("/v1/models/policy", json={"prices": {MOCK: [300_000, 700_000]}}).status_code == 200
    cid, s = session(plaza, "builder")
    task = given_task(plaza, cid, 500)
    item = take_item(plaza.hub, s, cid)
    r = turn(s, item, "one two three [mock:tokens 10 20]")
    assert "error" not in r
    cost = own_loop_charge(10, 20, (300_000, 700_000))
    assert cost == 3 + 14 + 1
    (spend,) = journal(plaza, kind="Spend")
    assert spend["task"] == task and spend["amount"] == cost and spend["agents"] == [str(cid)]
    (call,) = usage(plaza)
    assert (call["route"], call["task"], call["charged"], call["payer"], call["entry"]) == \
        ("loop", task, cost, f"escrow:{task}", spend["id"])
    assert treasury_commands.escrow(plaza.hub.commands, task).balance == 500 - cost
    assert journal(plaza, kind="Model call") == []  # the own loop is never listed as a gateway charge


def test_an_escrow_that_cannot_cover_the_call_ends_the_item_budget_exhausted(plaza):
    # 1 credit per token: a call of 300 tokens costs 301, more than the escrow's 200
    assert plaza.patch("/v1/models/policy", json={"prices": {MOCK: [1_000_000, 1_000_000]}}).status_code == 200
    cid, s = session(plaza, "builder")
    task = given_task(plaza, cid, 200)
    item = take_item(plaza.hub, s, cid)
    r = turn(s, item, "a long answer [mock:tokens 200 100]")
    assert r["error"]["code"] == "budget_exhausted"
    assert r["error"]["message"] == "budget exhausted" and "reply" not in r  # the reply is discarded
    assert journal(plaza, kind="Spend") == []
    assert treasury_commands.escrow(plaza.hub.commands, task).balance == 200
    (call,) = usage(plaza)
    assert (call["route"], call["charged"], call["status"]) == ("loop", 0, "error")
    # the work on that task is cancelled: the item ended, and the harness's next step is told so
    after = s.handle({"op": "model", "item": item, "messages": [], "tools": []})
    assert after["error"]["code"] == "item_cancelled" and "budget exhausted" in after["error"]["message"]
    plaza.hub.read_models.catch_up()
    done = [e for e in transcript(plaza.hub.read_models, cid, limit=10_000) if e["kind"] == "done"]
    assert done[-1]["detail"]["outcome"] == "cancelled"


def test_an_escrow_with_nothing_left_refuses_before_the_call(plaza):
    cid, s = session(plaza, "builder")
    task = given_task(plaza, cid, 200)
    cmds = plaza.hub.commands
    for _ in range(200):  # the escrow spent to the last credit by earlier calls (one credit each)
        treasury_commands.charge_own_loop(cmds, cmds.context(f"agent:{cid}"), str(cid), task, 0, 0, None, None)
    assert treasury_commands.escrow(cmds, task).balance == 0
    item = take_item(plaza.hub, s, cid)
    r = turn(s, item, "anything")
    assert r["error"]["code"] == "budget_exhausted"
    assert usage(plaza) == []  # refused before the call: nothing reached the provider
