"""The board and conversations as agents use them, through their host tools in the hub (on SQLite and
PostgreSQL): a post's mentions reach the named agents' queues once (a sleeping one is woken first),
the read marker shows each agent what is new, pausing holds deliveries and resuming releases them
(across a hub restart), messages are kept in the pair's conversation, STOP ALL holds every agent
action, and the read models rebuilt from event 1 equal the live ones."""

from __future__ import annotations

import pytest
from support.sessions import session, tool

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import board as bc
from agentplaza.commands import plaza
from agentplaza.commands import tasks as tc
from agentplaza.projections import board as board_rm
from agentplaza.projections import conversations as conv_rm
from agentplaza.projections.agents import transcript


@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def queue(hub, cid):
    return ac.agent(hub.commands, cid).queue


def owner(hub):
    return hub.commands.context("owner")


def test_a_post_reaches_the_agents_it_names_once_and_the_marker_shows_what_is_new(hub):
    ann, s_ann = session(hub, "builder")
    bob, s_bob = session(hub, "reviewer")
    ac.rename(hub.commands, owner(hub), bob, "Bob")
    r = tool(s_ann, "plaza_board_post", text="Release notes drafted, @bob please look", task=None)
    assert "error" in r  # task null is not a string: the schema says so before the laws see it
    r = tool(s_ann, "plaza_board_post", text="Release notes drafted, @bob please look")["result"]
    assert (r["id"], r["mentions"], r["delivered"], r["held"]) == ("p1", [bob], [bob], False)
    told = [q for q in queue(hub, bob) if "p1" in q["text"]]
    assert len(told) == 1 and told[0]["from"] == f"agent:{ann}" and "please look" in told[0]["text"]
    assert queue(hub, ann) == []  # the author is never told its own post
    hub.read_models.catch_up()
    seen = tool(s_bob, "plaza_board_read")["result"]
    assert [p["id"] for p in seen["posts"]] == ["p1"] and seen["paused"] is False
    assert tool(s_bob, "plaza_board_read")["result"]["posts"] == []  # nothing new since
    tool(s_ann, "plaza_board_post", text="and the changelog")
    hub.read_models.catch_up()
    assert [p["id"] for p in tool(s_bob, "plaza_board_read")["result"]["posts"]] == ["p2"]
    assert [p["id"] for p in tool(s_bob, "plaza_board_read", all=True)["result"]["posts"]] == ["p1", "p2"]
    r = tool(s_bob, "plaza_board_post", text="@builder looks good", reply_to="p1")["result"]
    assert (r["reply"], r["delivered"]) == (1, [ann])
    hub.read_models.catch_up()
    one = tool(s_ann, "plaza_board_read", post="p1")["result"]
    assert one["replies"] == 1 and one["thread"][0]["text"] == "@builder looks good"
    assert bc.marker(hub.commands, bob) == 2 and board_rm.marker_of(hub.read_models, bob) == 2
    assert tool(s_bob, "plaza_board_post", text="x", reply_to="p9")["error"]["code"] == "no_post"


def test_a_mention_wakes_a_sleeping_agent_first(hub):
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "tester")
    ac.sleep(hub.commands, owner(hub), bob)
    assert ac.agent(hub.commands, bob).status == "asleep"
    tool(s_ann, "plaza_board_post", text="@tester the build is ready")
    a = ac.agent(hub.commands, bob)
    assert a.status != "asleep" and len(a.queue) == 1


def test_pausing_holds_mentions_and_resuming_delivers_each_once_across_a_restart(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    try:
        ann, _ = session(hub, "builder")
        bob, _ = session(hub, "writer")
        bc.pause(hub.commands, owner(hub), True)
        out = bc.post(hub.commands, owner(hub), "@all standup at ten").value
        assert (out["mentions"], out["delivered"], out["held"]) == ([ann, bob], [], True)
        assert queue(hub, ann) == [] and queue(hub, bob) == []
        hub.read_models.catch_up()
        assert board_rm.post_row(hub.read_models, "p1")["held"] is True
        assert board_rm.is_paused(hub.read_models, None)
    finally:
        hub.close()
    hub = Hub.open(folders, database_url=database_url)  # a restart: the held mentions are in the log
    try:
        released = bc.pause(hub.commands, owner(hub), False).value["released"]
        assert released == {"p1": [ann, bob]}
        assert [len(queue(hub, c)) for c in (ann, bob)] == [1, 1]
        with pytest.raises(Exception) as e:
            bc.pause(hub.commands, owner(hub), False)
        assert getattr(e.value, "code", None) == "no_change"
        assert [len(queue(hub, c)) for c in (ann, bob)] == [1, 1]  # never twice
        hub.read_models.catch_up()
        assert board_rm.post_row(hub.read_models, "p1")["held"] is False
        live = hub.read_models.live(["board", "conversations"])
        hub.read_models.rebuild("board")
        hub.read_models.rebuild("conversations")
        assert hub.read_models.live(["board", "conversations"]) == live
    finally:
        hub.close()


def test_a_message_is_kept_in_the_pairs_conversation_and_told_to_the_recipient(hub):
    ann, s_ann = session(hub, "builder")
    bob, s_bob = session(hub, "reviewer")
    import base64

    plan = s_ann.handle({"op": "share", "path": "notes/plan.md", "content": base64.b64encode(b"the plan").decode(),
                         "agents": [bob]})["name"]  # the message carries a shared file by its number
    r = tool(s_ann, "plaza_message", to=bob, text="Can you review t1?", file=plan)["result"]
    assert (r["sent"], r["conversation"], r["message"]) == (True, f"{ann}~{bob}", 1)
    assert "Can you review t1?" in queue(hub, bob)[0]["text"] and f"Shared file: {plan}" in queue(hub, bob)[0]["text"]
    r = tool(s_bob, "plaza_message", to=ann, text="Yes, after lunch")["result"]
    assert (r["conversation"], r["message"]) == (f"{ann}~{bob}", 2)
    assert tool(s_bob, "plaza_message", to=bob, text="me")["error"]["code"] == "message_to_self"
    assert tool(s_bob, "plaza_message", to=ann, text="x", file="../etc/passwd")["error"]["code"] == "no_shared_file"
    ac.tell(hub.commands, owner(hub), ann, "How is it going?")
    hub.read_models.catch_up()
    threads = {c["id"]: c for c in conv_rm.conversation_rows(hub.read_models, None, 10)}
    assert threads[f"{ann}~{bob}"]["messages"] == 2 and threads[f"owner~{ann}"]["messages"] == 1
    shown = conv_rm.conversation_row(hub.read_models, f"{ann}~{bob}", 10)["thread"]
    assert [(m["sender"], m["to"], m["file"]) for m in shown] == [(str(ann), str(bob), plan),
                                                                   (str(bob), str(ann), None)]


def test_stop_all_holds_every_agent_action_on_the_board_and_in_conversations(hub):
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "reviewer")
    plaza.stop_all(hub.commands, hub.commands.context("owner", "a test of STOP ALL"))
    for name, args in (("plaza_board_post", {"text": "@reviewer hello"}), ("plaza_board_read", {}),
                       ("plaza_message", {"to": bob, "text": "hi"})):
        r = tool(s_ann, name, **args)
        assert r["error"]["code"] == "refused", (name, r)
    assert queue(hub, bob) == []
    hub.read_models.catch_up()
    assert board_rm.post_rows(hub.read_models) == []
    assert conv_rm.conversation_rows(hub.read_models, None, 10) == []
    assert bc.marker(hub.commands, ann) == 0


def test_an_agent_posting_to_all_runs_and_is_recorded_under_s055(hub):
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "writer")
    r = tool(s_ann, "plaza_board_post", text="@all the release is out")
    assert r["result"]["delivered"] == [bob]
    tool(s_ann, "plaza_board_post", text="@writer the notes are out")
    hub.read_models.catch_up()
    calls = [e["detail"] for e in transcript(hub.read_models, ann, limit=10_000)
             if e["kind"] == "tool_call" and e["tool"] == "plaza_board_post"]
    assert [(c["effect"], c["violation"]) for c in calls] == [("allow", True), ("allow", False)]
    assert '"to": "@all"' in calls[0]["args"]  # the fact the hub read off the text


def test_an_agent_bids_on_an_open_call_for_its_role_with_plaza_bid(hub):
    ann, s_ann = session(hub, "builder")
    _, s_pen = session(hub, "writer")
    tc.create(hub.commands, owner(hub), "Write the notes", "All listed", 500, role="builder")
    assert tool(s_ann, "plaza_bid", task="t1", price=400)["result"]["bid"] == 400
    assert tool(s_ann, "plaza_bid", task="t1", price=900)["error"]["code"] == "bid_over_budget"
    assert tool(s_pen, "plaza_bid", task="t1", price=100)["error"]["code"] == "wrong_role"  # a call for builders
    assert tc.load(hub.commands, "t1").bids == {str(ann): 400}
