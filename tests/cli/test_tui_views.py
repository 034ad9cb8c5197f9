"""The terminal screen's state and drawing, without a terminal or a hub (both are pure)."""

from __future__ import annotations

from agentplaza.cli.tui import model as state
from agentplaza.cli.tui import views

AGENTS = {"agents": [
    {"cid": 3, "name": "Ann", "role": "builder", "status": "idle", "resolved_model": "m", "working_on": None},
    {"cid": 4, "name": "Bob", "role": "builder", "status": "working", "resolved_model": "m", "working_on": "t1"},
    {"cid": 5, "name": "Cy", "role": "researcher", "status": "asleep", "resolved_model": "m", "working_on": None},
    {"cid": 6, "name": "Di", "role": "researcher", "status": "offline", "resolved_model": "m", "working_on": None},
]}
HELD = {"held": True, "state": "held", "by": "owner", "since": "2026-12-01T16:00:52.1+00:00", "reason": "audit"}


def drawn(m: state.Model, width: int = 100, height: int = 40, colour: bool = True) -> str:
    return views.text(views.screen(m, width, height, colour))


def test_the_floor_draws_each_agent_as_a_robot_with_its_status():
    m = state.Model()
    m.loaded("agents", AGENTS)
    screen = drawn(m)
    for face, name, status in (("[o.o]", "Ann", "idle"), ("[>.<]", "Bob", "working"), ("[-.-]", "Cy", "asleep"),
                               ("[x.x]", "Di", "offline")):
        assert face in screen and name in screen and status in screen
    assert "> [o.o]" in screen  # the selected robot is marked


def test_a_narrow_floor_wraps_its_robots_onto_rows():
    m = state.Model()
    m.loaded("agents", {"agents": AGENTS["agents"] + [dict(AGENTS["agents"][0], cid=7, name="Ed")]})
    lines = drawn(m, width=60).splitlines()
    faces = [i for i, line in enumerate(lines) if "[o.o]" in line or "[-.-]" in line]
    assert len(faces) == 2  # five robots of 14 columns in 60: four on the first row, one on the next


def test_a_held_plaza_shows_the_banner_on_every_tab_who_since_and_why():
    m = state.Model()
    m.loaded("plaza", HELD)
    for k in "123456780":
        state.key(m, k)
        screen = drawn(m)
        assert "PLAZA HELD (STOP ALL) since 2026-12-01 16:00:52 by owner" in screen and "Why: audit" in screen


def test_the_board_tab_draws_the_posts_the_paused_banner_and_an_open_thread():
    m = state.Model()
    state.key(m, "6")
    assert state.key(m, "enter") == []  # nothing to open yet
    m.loaded("board", {"paused": True, "posts": [
        {"id": "p2", "author": "3", "at": "2026-12-01T16:00:52+00:00", "replies": 0, "held": True, "text": "held one"},
        {"id": "p1", "author": "owner", "at": "2026-12-01T15:00:00+00:00", "replies": 1, "held": False, "text": "hello"}]})
    screen = drawn(m)
    assert "PAUSED: deliveries are paused" in screen and "> p2" in screen and "held" in screen
    state.key(m, "j")
    assert state.key(m, "enter") == [state.Load(("plaza", "board", "post:p1"))]
    assert "post:p1: loading ..." in drawn(m)
    m.loaded("post:p1", {"id": "p1", "author": "owner", "at": "2026-12-01T15:00:00+00:00", "text": "hello",
                         "thread": [{"post": "p1", "reply": 1, "author": "4", "at": "2026-12-01T15:10:00+00:00",
                                     "text": "a reply\x1b[31m"}]})
    screen = drawn(m)
    assert "p1 by owner" in screen and "p1.r1 4" in screen and "a reply" in screen and "\x1b" not in screen
    state.key(m, "t")
    assert m.composer is not None and m.composer.prompt == "reply to p1"
    m.composer.text = "thanks"
    [send] = state.key(m, "enter")
    assert (send.path, send.body) == ("/v1/board/p1/replies", {"text": "thanks"})
    assert state.event(m, {"event": "board", "data": {}}) == [state.Load(("board", "post:p1"))]
    state.key(m, "enter")  # closes the thread: a new post next
    state.key(m, "t")
    m.composer.text = "news"
    [send] = state.key(m, "enter")
    assert (send.path, send.body) == ("/v1/board", {"text": "news"})


def test_the_conversations_tab_writes_only_in_the_owners_own_threads():
    m = state.Model()
    state.key(m, "7")
    m.loaded("conversations", {"conversations": [
        {"id": "3~5", "a": "3", "b": "5", "messages": 2, "last_at": None, "last_text": "between agents"},
        {"id": "owner~3", "a": "owner", "b": "3", "messages": 1, "last_at": None, "last_text": "mine"}]})
    state.key(m, "t")
    assert m.composer is None and "you read it" in m.note
    state.key(m, "j")
    state.key(m, "t")
    m.composer.text = "hi"
    [send] = state.key(m, "enter")
    assert (send.path, send.body) == ("/v1/agents/3/tell", {"text": "hi"})
    assert "conversation:owner~3" in send.reload
    # the owner's messages are Agent.Told: an agent event reloads the list on screen
    assert "conversations" in state.event(m, {"event": "agent", "data": {}})[0].resources


def test_a_terminal_too_small_gets_one_clear_message():
    m = state.Model()
    screen = drawn(m, width=40, height=10)
    assert " ".join(screen.split()).startswith("The terminal is too small for agentplaza tui: 40x10; it needs at "
                                               "least 60x16. Make the window larger")
    assert all(len(line) <= 40 for line in screen.splitlines()) and "[1 Floor]" not in screen


def test_without_colours_every_fragment_is_plain_and_the_marks_stay():
    m = state.Model()
    m.loaded("agents", AGENTS)
    state.key(m, "3")
    lines = views.screen(m, 100, 40, colour=False)
    assert all(style == "" for line in lines for style, _ in line)
    text = views.text(lines)
    assert "[3 Agents]" in text and "> 3" in text and "[no colours]" in text


def test_the_screen_never_draws_more_lines_than_the_terminal_has():
    m = state.Model()
    m.loaded("tasks", {"tasks": [{"id": f"t{i}", "state": "open", "title": "x"} for i in range(100)]})
    state.key(m, "4")
    assert len(drawn(m, height=20).splitlines()) == 20
    assert "more below" in drawn(m, height=20)


def test_a_hub_value_cannot_smuggle_terminal_escapes():
    m = state.Model()
    m.loaded("tasks", {"tasks": [{"id": "t1", "state": "open", "title": "evil \x1b]0;owned\x07 title"}]})
    state.key(m, "4")
    assert "\x1b" not in drawn(m) and "\x07" not in drawn(m)


def test_keys_move_the_selection_and_open_the_detail():
    m = state.Model()
    m.loaded("agents", AGENTS)
    state.key(m, "3")
    assert state.key(m, "j") == [] and m.chosen()["cid"] == 4
    state.key(m, "down"), state.key(m, "down"), state.key(m, "down")
    assert m.chosen()["cid"] == 6  # stops at the last
    state.key(m, "up")
    assert state.key(m, "enter") == [state.Load(("plaza", "agents", "agent:5"))]
    assert m.detail == 5
    state.key(m, "enter")
    assert m.detail is None


def test_a_confirm_asks_first_and_only_yes_sends():
    m = state.Model()
    m.loaded("plaza", {"held": False})
    assert state.key(m, "s") == [] and m.confirm is not None
    assert state.key(m, "n") == [] and m.confirm is None and "not confirmed" in m.note
    state.key(m, "s")
    [send] = state.key(m, "y")
    assert (send.method, send.path, send.body) == ("POST", "/v1/plaza/stop", {"reason": state.STOP_REASON})
    m.loaded("plaza", HELD)
    state.key(m, "s")
    [send] = state.key(m, "y")
    assert send.path == "/v1/plaza/resume"


def test_the_hubs_answer_to_resume_lifts_the_banner_in_the_frame_that_says_so():
    m = state.Model()
    m.loaded("plaza", HELD)
    state.key(m, "s")
    [send] = state.key(m, "y")
    assert "PLAZA HELD" in drawn(m)
    [load] = state.sent(m, send, {"held": False, "state": "running"})  # resume answers the plaza's state
    screen = drawn(m)
    assert "the plaza is running again" in screen and "PLAZA HELD" not in screen
    assert "plaza" not in load.resources and "overview" in load.resources


def test_approve_and_deny_name_the_selected_pending_approval():
    m = state.Model()
    m.loaded("approvals", {"approvals": [{"id": "a1", "kind": "call", "status": "pending", "title": "x"},
                                         {"id": "a2", "kind": "call", "status": "pending", "title": "y"}]})
    state.key(m, "5")
    state.key(m, "a")  # away from the Approvals tab a and d do nothing; here they ask first
    assert m.confirm.question.startswith("Approve a1")
    state.key(m, "escape")
    state.key(m, "j")
    state.key(m, "d")
    [send] = state.key(m, "enter")
    assert send.path == "/v1/approvals/a2/deny"


def test_a_live_event_reloads_what_the_tab_shows_and_marks_the_rest_stale():
    m = state.Model()
    state.key(m, "4")
    assert state.event(m, {"event": "tasks", "data": {}}) == [state.Load(("tasks",))]
    m.loaded("tasks", {"tasks": []})
    assert state.event(m, {"event": "approvals", "data": {}}) == []  # the Tasks tab does not draw approvals
    assert "approvals" in m.stale
    assert state.event(m, {"event": "plaza", "data": {}}) == [state.Load(("plaza",))]  # the banner, on every tab


def test_q_and_escape_quit_but_escape_in_the_composer_only_closes_it():
    m = state.Model()
    m.loaded("agents", AGENTS)
    state.key(m, "3")
    state.key(m, "t")
    assert m.composer is not None
    for ch in "hi":
        state.key(m, ch, ch)
    assert m.composer.text == "hi" and not m.quit  # q, typed, is text
    assert state.key(m, "escape") == [] and m.composer is None and not m.quit
    assert state.key(m, "q") == [state.Quit()] and m.quit
