"""The hub's side of a harness, in process (no VM): every tool call goes through
``commands.conduct.check_in`` (modes, approvals used once with the exact input, the plaza held), the
scheduler hears when an agent is available, busy or offline, and the task host tools act with the
agent's CID and the role the hub gave it."""

from __future__ import annotations

import warnings

import pytest

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import approvals
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import tasks as tc
from agentplaza.domain.base import Refusal
from agentplaza.projections.agents import transcript
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


@pytest.fixture
def hub(folders, database_url):
    h = Hub.open(folders, database_url=database_url)
    yield h
    h.close()


def session(hub, role, **kw):
    cid = ac.spawn(hub.commands, hub.commands.context("owner"), role, 1, **kw).value[0]
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    assert s.handle({"op": "hello", "role": "orchestrator"})["role"] == role
    return cid, s


def entries(hub, cid, kind):
    hub.read_models.catch_up()
    return [r for r in transcript(hub.read_models, cid, limit=10_000) if r["kind"] == kind]


def test_ask_mode_waits_in_approvals_and_the_approved_call_runs_once_with_its_exact_input(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    ac.update(cmds, cmds.context("owner"), cid, {"permission_mode": "ask"})
    call = {"op": "decide", "tool": "vm.write_file", "args": {"path": "a.txt", "content": "hi"}, "call_id": "c1"}
    first = s.handle(call)
    assert first["effect"] == "ask" and first["approval"] and "approval" in first["message"]
    assert s.handle(call)["approval"] == first["approval"]  # asking again while it waits: the same one
    other = s.handle(dict(call, args={"path": "a.txt", "content": "other"}))
    assert other["effect"] == "ask" and other["approval"] != first["approval"]
    approvals.decide(cmds, cmds.context("owner"), first["approval"], True)
    ran = s.handle(call)
    assert ran["effect"] == "allow"
    again = s.handle(call)  # used once: the same call asks anew
    assert again["effect"] == "ask" and again["approval"] != first["approval"]
    calls = entries(hub, cid, "tool_call")
    assert [c["detail"]["effect"] for c in calls] == ["ask", "ask", "ask", "allow", "ask"]
    assert calls[3]["detail"]["approved_by"] == first["approval"] and calls[3]["detail"]["mode"] == "ask"


def test_read_only_mode_refuses_writes_and_a_held_plaza_refuses_every_call(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    ac.update(cmds, cmds.context("owner"), cid, {"permission_mode": "read-only"})
    assert s.handle({"op": "decide", "tool": "vm.write_file", "args": {"path": "a", "content": ""}})["effect"] == "deny"
    assert s.handle({"op": "decide", "tool": "vm.read_file", "args": {"path": "a"}})["effect"] == "allow"
    plaza_commands.stop_all(cmds, cmds.context("owner", "test"))
    held = s.handle({"op": "decide", "tool": "vm.read_file", "args": {"path": "a"}})
    assert held["effect"] == "deny" and "held" in held["message"]
    assert "error" in s.handle({"op": "tool", "tool": "plaza_status", "args": {}})


def test_the_scheduler_hears_available_busy_and_offline(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    assert tc.worker(cmds, str(cid)).status == "idle"
    ac.tell(cmds, cmds.context("owner"), cid, "do a thing")
    item = s.handle({"op": "next", "wait": 0})["item"]
    assert tc.worker(cmds, str(cid)).status == "busy"
    s.handle({"op": "done", "item": item["item"], "outcome": "done"})
    assert tc.worker(cmds, str(cid)).status == "idle"
    s.rt.worker_state(cid, "offline")
    assert tc.worker(cmds, str(cid)).status == "offline"


def tool(s, name, **args):
    r = s.handle({"op": "tool", "tool": name, "args": args, "call_id": name})
    assert "error" not in r, r
    return r["result"]


def test_the_task_tools_act_as_the_agent_with_the_role_the_hub_gave_it(hub):
    cmds = hub.commands
    _orch, o = session(hub, "orchestrator")
    b1, w1 = session(hub, "builder")
    _b2, w2 = session(hub, "builder")
    rev, r = session(hub, "reviewer")
    t1 = tool(o, "plaza_task_create", title="a", acceptance="a.txt says a", budget=400, role="builder")["id"]
    t2 = tool(o, "plaza_task_create", title="b", acceptance="b.txt says b", budget=300, role="builder")["id"]
    hub.read_models.catch_up()
    assert [t["number"] for t in tool(w1, "plaza_task_list")] == [t1, t2]
    assert tool(w1, "plaza_task_claim", task=t1)["claimed"]
    assert tool(w2, "plaza_task_claim", task=t2)["claimed"]
    assert "error" in o.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"task": t2}})  # taken
    tool(w1, "plaza_task_submit", task=t1, summary="wrote a", files=["a.txt"], checks="cat a.txt")
    tool(w2, "plaza_task_submit", task=t2, summary="wrote b", files=["b.txt"], checks="cat b.txt")
    mine = r.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"task": t1, "review": True}})
    assert "error" not in mine and mine["result"]["report"]["summary"] == "wrote a"
    tool(r, "plaza_task_submit", task=t1, verdict="pass", notes="good")
    tool(r, "plaza_task_claim", task=t2, review=True)
    tool(r, "plaza_task_submit", task=t2, verdict="fail", notes="b.txt is empty")
    assert (tc.load(cmds, t1).state, tc.load(cmds, t2).state) == ("done", "failed")
    assert tc.load(cmds, t1).worker == str(b1) and tc.load(cmds, t1).reviewer == str(rev)
    assert tc.worker(cmds, str(b1)).status == "idle"


def test_stop_all_cancels_the_running_item_at_once_and_nothing_runs_until_resume(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    t1 = tc.create(cmds, cmds.context("owner"), "a", "a", 300, role="builder").value["id"]
    ac.tell(cmds, cmds.context("owner"), cid, "work")
    item = s.handle({"op": "next", "wait": 0})["item"]["item"]
    plaza_commands.stop_all(cmds, cmds.context("owner", "lunch"))
    s.rt.on_records(hub.read_models.catch_up())  # what the hub's follower hands the runtime after it reads the hold
    done = entries(hub, cid, "done")
    assert [(d["detail"]["item"], d["detail"]["outcome"]) for d in done] == [(item, "cancelled")]
    for op in ({"op": "model", "messages": []}, {"op": "decide", "tool": "vm.shell", "args": {"command": "ls"}},
               {"op": "tool", "tool": "plaza_task_claim", "args": {"task": t1}}):
        r = s.handle(op)
        assert r["error"]["code"] == "item_cancelled" and r["item"] == item
    assert s.handle({"op": "done", "item": item, "outcome": "cancelled"}) == {"cancelled": True}
    ac.tell(cmds, cmds.context("owner"), cid, "more work")
    assert s.handle({"op": "next", "wait": 0})["item"] is None  # held: no work handed out
    assert "error" in s.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"task": t1}})
    assert s.handle({"op": "model", "messages": []})["error"]["code"] == "plaza_held"
    assert tc.load(cmds, t1).worker is None
    plaza_commands.resume(cmds, cmds.context("owner", "back"))
    assert s.handle({"op": "next", "wait": 0})["item"]["text"] == "more work"
    assert "error" not in s.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"task": t1}})


def test_a_task_given_to_an_agent_becomes_a_work_item_once(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    t1 = tc.create(cmds, cmds.context("owner"), "Notes", "notes.md exists", 300, role="builder").value["id"]
    tc.assign(cmds, cmds.context("owner"), t1, str(cid))
    hub.read_models.catch_up()
    s.rt.deliver_work()
    s.rt.deliver_work()
    item = s.handle({"op": "next", "wait": 0})["item"]
    assert f"You were given task {t1}" in item["text"] and "notes.md exists" in item["text"]
    s.handle({"op": "done", "item": item["item"], "outcome": "done"})
    assert s.handle({"op": "next", "wait": 0})["item"] is None


def test_idle_agents_sleep_after_idle_sleep_min_but_not_the_orchestrator_or_a_busy_one(folders, database_url):
    import datetime as dt

    now = [dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)]
    h = Hub.open(folders, database_url=database_url, clock=lambda: now[0])
    try:
        orch, _ = session(h, "orchestrator")
        b1, s1 = session(h, "builder")
        b2, _ = session(h, "builder")
        t1 = tc.create(h.commands, h.commands.context("owner"), "a", "a", 300, role="builder").value["id"]
        tc.assign(h.commands, h.commands.context("owner"), t1, str(b2))  # b2 holds a task: it stays up
        h.read_models.catch_up()
        rt = s1.rt
        now[0] += dt.timedelta(minutes=9)
        assert rt.idle_sleep() == []
        now[0] += dt.timedelta(minutes=2)
        h.read_models.catch_up()
        assert rt.idle_sleep() == [b1]
        h.read_models.catch_up()
        assert ac.agent(h.commands, b1).status == "asleep" and ac.agent(h.commands, orch).status == "idle"
    finally:
        h.close()


def test_a_task_is_delivered_once_even_by_a_restarted_hub(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    number = tc.create(cmds, cmds.context("owner"), "Write a.txt", "a.txt holds a line", 300).value["id"]
    tc.assign(cmds, cmds.context("owner"), number, str(cid))
    hub.read_models.catch_up()
    s.rt.deliver_work()
    s.rt.deliver_work()
    restarted = AgentRuntime(hub, node="off")  # a new hub process: its memory of deliveries is empty
    restarted.deliver_work()
    told = [e for e in entries(hub, cid, "told") if f"given task {number}" in (e["text"] or "")]
    assert len(told) == 1
    assert len(ac.agent(cmds, cid).queue) == 1


def test_the_orchestrator_proposes_agents_only_in_the_owners_chat_and_approval_starts_them(hub):
    from agentplaza.projections.agents import agents_table

    cmds = hub.commands
    orch, s = session(hub, "orchestrator")
    propose = {"op": "tool", "tool": "plaza_agent_propose",
               "args": {"role": "builder", "count": 2, "why": "two builders for the release"}}

    # In the owner's own chat: a pending approval of kind agent; bad input proposes nothing.
    ac.tell(cmds, cmds.context("owner"), orch, "We need two builders.")
    s.handle({"op": "next", "wait": 0})
    bad = s.handle(dict(propose, args=dict(propose["args"], count=40)))
    assert bad["error"]["code"] == "bad_request" and "count" in bad["error"]["message"], bad
    claimed = s.handle(dict(propose, args=dict(propose["args"], owner_asked=True)))  # the model cannot say so
    assert claimed["error"]["code"] == "bad_request" and "owner_asked" in claimed["error"]["message"]
    got = s.handle(propose)
    assert "error" not in got and got["result"]["status"] == "pending"
    a = approvals.load(cmds, got["result"]["approval"])
    assert (a.kind, a.status, a.agent, a.detail["role"], a.detail["count"]) == ("agent", "pending", str(orch), "builder", 2)
    hub.read_models.catch_up()
    before = len(hub.read_models.rows(agents_table))

    # Approved: the agents start.
    out = approvals.decide(cmds, cmds.context("owner"), a.number, True).value
    spawned = out.detail["spawned"]
    assert len(spawned) == 2 and all(ac.agent(cmds, c).role == "builder" for c in spawned)
    assert approvals.load(cmds, a.number).status == "approved"
    hub.read_models.catch_up()
    assert len(hub.read_models.rows(agents_table)) == before + 2
    s.handle({"op": "done", "item": s.taken, "outcome": "done"})

    # Told by another agent, not the owner: refused by the laws, whatever the model claims.
    ac.tell(cmds, cmds.context("agent:99"), orch, "hire some builders")
    s.handle({"op": "next", "wait": 0})
    refused = s.handle(propose)
    assert "S-029" in refused["error"]["message"]

    # A builder cannot propose, even in the owner's chat.
    b, sb = session(hub, "builder")
    ac.tell(cmds, cmds.context("owner"), b, "hire help")
    sb.handle({"op": "next", "wait": 0})
    assert "S-030" in sb.handle(propose)["error"]["message"]


def test_the_owner_cancels_the_running_item_and_the_harness_is_told(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    with pytest.raises(Refusal) as r:
        s.rt.cancel_work(cid)
    assert r.value.code == "not_working"
    ac.tell(cmds, cmds.context("owner"), cid, "a long job")
    item = s.handle({"op": "next", "wait": 0})["item"]["item"]
    assert s.rt.cancel_work(cid, "wrong job") == item
    after = s.handle({"op": "decide", "tool": "vm.read_file", "args": {"path": "a"}})
    assert after["error"]["code"] == "item_cancelled" and "cancelled by the owner: wrong job" in after["error"]["message"]
    done = entries(hub, cid, "done")
    assert done[-1]["detail"] == {"item": item, "outcome": "cancelled"}
    assert s.handle({"op": "done", "item": item, "outcome": "failed"})["cancelled"] is True
    assert tc.worker(cmds, str(cid)).status == "idle"


def test_a_task_the_agent_claimed_itself_is_not_told_to_it_by_a_restarted_hub(hub):
    cmds = hub.commands
    cid, s = session(hub, "builder")
    number = tc.create(cmds, cmds.context("owner"), "Write b.txt", "b.txt holds a line", 300).value["id"]
    hub.read_models.catch_up()
    ac.tell(cmds, cmds.context("owner"), cid, "pick a task")
    s.handle({"op": "next", "wait": 0})
    assert "error" not in s.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"task": number}})
    hub.read_models.catch_up()
    AgentRuntime(hub, node="off").deliver_work()  # a hub started after: it knows only the records
    assert not [e for e in entries(hub, cid, "told") if f"given task {number}" in (e["text"] or "")]


def test_a_new_agent_is_asked_its_name_once_and_keeps_the_name_in_its_answer(hub):
    cmds = hub.commands
    cid = ac.spawn(cmds, cmds.context("owner"), "researcher", 1).value[0]
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    hello = s.handle({"op": "hello"})
    assert "researcher" in hello["name_prompt"] and "name" in hello["name_prompt"]
    assert s.handle({"op": "name", "name": '"Ada Quill."\nI like the name.'}) == {"name": "Ada Quill"}
    assert ac.agent(cmds, cid).name == "Ada Quill"
    again = s.handle({"op": "name", "name": "Other"})
    assert again["error"]["code"] == "already_named"
    assert "name_prompt" not in s.handle({"op": "hello"})
    ac.rename(cmds, cmds.context("owner"), cid, "Ada")  # the owner may rename it
    assert ac.agent(cmds, cid).name == "Ada"


def test_an_answer_with_no_name_in_it_gives_role_and_cid():
    from agentplaza.domain.agents import NAME_PROMPT, chosen_name

    assert chosen_name("Name: Orion", "builder", 4) == "Orion"
    assert chosen_name("My name is Vega.", "builder", 4) == "Vega"
    assert chosen_name("`Kit`", "builder", 4) == "Kit"
    assert chosen_name("", "builder", 4) == "builder-4"
    assert chosen_name(None, "builder", 4) == "builder-4"
    assert chosen_name(NAME_PROMPT.format(role="builder"), "builder", 4) == "builder-4"  # an echo of the question
    assert chosen_name("x" * 41, "reviewer", 9) == "reviewer-9"


def test_the_mode_set_on_the_agents_conduct_is_what_hello_offers(hub):
    """Conduct alone holds the permission mode: set read-only over POST /v1/conduct/{cid}/mode, the next
    hello offers no write tool (and says read-only)."""
    cid, s = session(hub, "builder")
    assert "vm.write_file" in s.handle({"op": "hello"})["tools"]
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        r = c.post(f"/v1/conduct/{cid}/mode", json={"mode": "read-only"})
        assert r.status_code == 200 and r.json()["mode"] == "read-only", r.text
    hello = s.handle({"op": "hello"})
    assert hello["permission_mode"] == "read-only"
    assert "vm.write_file" not in hello["tools"] and "vm.read_file" in hello["tools"]


def _harness_over_a_socket(hub):
    """A builder agent, a runtime, and ``connect()``: a harness stream over a real channel, its session
    running in a thread, hello said; (the guest's end, the session, its thread).  ``close()`` ends both
    channels."""
    import json
    import socket
    import threading

    from vmm.channel import Channel

    cmds = hub.commands
    cid = ac.spawn(cmds, cmds.context("owner"), "builder", 1).value[0]
    rt = AgentRuntime(hub, node="off")
    a, b = socket.socketpair()
    host, guest = Channel.over_socket(a, role="host").start(), Channel.over_socket(b, role="guest").start()

    def connect():
        g = guest.open("harness")
        s = HarnessSession(rt, cid, host.accept(5))
        t = threading.Thread(target=s.run, daemon=True)
        t.start()
        g.write(json.dumps({"op": "hello", "version": 1}).encode() + b"\n")
        line = b""
        while not line.endswith(b"\n"):
            line += g.read(timeout=10)
        assert json.loads(line)["cid"] == cid
        return g, s, t

    def close():
        host.close()
        guest.close()

    return cid, rt, close, connect


def test_an_old_connection_ending_after_a_new_one_said_hello_leaves_the_agent_connected(hub):
    # A restored guest's harness connects again before the node sees its old stream gone: the old
    # session's end must not mark the agent offline under the new one.
    from agentplaza.projections.agents import agents_table

    cmds = hub.commands
    cid, rt, close, connect = _harness_over_a_socket(hub)

    def status():
        hub.read_models.catch_up()
        return {r["cid"]: r["status"] for r in hub.read_models.rows(agents_table)}[cid]

    try:
        g1, old, t1 = connect()
        g2, new, t2 = connect()
        assert rt.sessions[cid] is new and status() == "idle"
        g1.close()                                   # the old stream ends after the new hello
        t1.join(10)
        assert not t1.is_alive() and rt.sessions[cid] is new
        assert status() == "idle" and tc.worker(cmds, str(cid)).status == "idle"
        g2.close()                                   # the current one ends: now the agent is offline
        t2.join(10)
        assert cid not in rt.sessions and status() == "offline"
    finally:
        close()


def test_a_wait_for_work_on_a_stream_that_went_ends_the_session_quietly(hub, caplog):
    """A harness waiting in ``next`` whose stream is gone (its VM slept): the session ends as a
    disconnect, not as a failed op logged with a traceback."""
    import json
    import time

    cid, rt, close, connect = _harness_over_a_socket(hub)
    try:
        g, _, t = connect()
        g.write(json.dumps({"op": "next", "wait": 20}).encode() + b"\n")
        time.sleep(0.5)  # waiting for work
        g.reset("the VM slept")
        t.join(10)
        assert not t.is_alive() and cid not in rt.sessions
        assert not [r for r in caplog.records if "failed" in r.getMessage()], caplog.text
    finally:
        close()
