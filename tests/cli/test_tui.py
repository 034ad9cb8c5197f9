"""The terminal screen driven as a person would: keys through prompt-toolkit's pipe input, against a
real hub; what it shows is read off the screen it drew (``Screen.last_text``)."""

from __future__ import annotations

import threading

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from support.deadline import until
from support.hubproc import HubProcess, cli, ok

from agentplaza.cli.client import Client
from agentplaza.cli.tui.app import Screen

#: How long the screen may take to show what the hub says (a real hub, a real socket).
SHOWN_S = 20.0
TAB, SHIFT_TAB, ENTER, ESC = "\t", "\x1b[Z", "\r", "\x1b"


@pytest.fixture
def hub(folders):
    h = HubProcess(folders)
    h.env["APZ_NODE"] = "off"  # the agents are records here: nothing boots
    h.start()
    yield h
    h.stop()


class Person:
    """A person at the terminal: types keys, reads the screen."""

    def __init__(self, hub):
        self.pipe_cm = create_pipe_input()
        self.pipe = self.pipe_cm.__enter__()
        self.screen = Screen(Client(hub.url), input=self.pipe, output=DummyOutput())
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.screen.run()
        except BaseException as e:  # noqa: BLE001 - the test reports it
            self.error = e
        finally:
            self.done.set()

    def press(self, keys: str) -> None:
        self.pipe.send_text(keys)

    def sees(self, *texts: str, timeout: float = SHOWN_S) -> str:
        """The screen once it shows every one of ``texts`` (a text wrapped over lines counts)."""
        def shown() -> str | None:
            screen = self.screen.last_text
            flat = " ".join(screen.split())
            return screen if all(t in screen or " ".join(t.split()) in flat for t in texts) else None

        return until(f"the screen shows {texts}", shown, timeout)

    def live(self) -> None:
        self.sees("[live]")

    def close(self) -> None:
        if not self.done.is_set():
            self.press("q")
            self.done.wait(10)
        self.pipe_cm.__exit__(None, None, None)
        assert self.error is None, self.error


@pytest.fixture
def person(hub):
    p = Person(hub)
    yield p
    p.close()


def test_tabs_by_number_and_tab_and_shift_tab(hub, person):
    person.live()
    person.sees("[1 Floor]", "The floor is empty")
    person.press("2")
    person.sees("[2 Overview]", "approvals 0 pending")
    person.press(TAB)
    person.sees("[3 Agents]", "Enter opens the agent")
    person.press(TAB)
    person.sees("[4 Tasks]", "(none)")
    person.press(SHIFT_TAB)
    person.sees("[3 Agents]")
    person.press("6")
    person.sees("[6 Board]", "(none)", "t writes a post")
    person.press("7")
    person.sees("[7 Conversations]", "(none)", "Enter opens a conversation")
    person.press("8")
    person.sees("[8 Nodes]", "n0")
    person.press("0")
    person.sees("Workspace]", "Agents, by role")
    person.press(TAB)  # from the last tab round to the first
    person.sees("[1 Floor]")


def test_approve_with_a_and_confirm_and_deny_with_d(hub, person):
    with hub.client() as c:
        ok(c.post("/v1/conduct/7/mode", json={"mode": "ask"}))
        for path in ("a.py", "b.py"):
            ok(c.post("/v1/conduct/calls", json={"agent": 7, "role": "builder", "tool": "engine.edit",
                                                 "args": {"path": path}}))
    person.live()
    person.press("5")
    person.sees("a1", "a2", "7 asks to run engine.edit")
    person.press("a")
    person.sees("Approve a1", "y/n")
    person.press("n")  # a no changes nothing
    person.sees("not confirmed")
    with hub.client() as c:
        assert ok(c.get("/v1/approvals/a1"))["status"] == "pending"
    person.press("a")
    person.sees("Approve a1")
    person.press("y")
    person.sees("a1 approved")
    with hub.client() as c:
        assert ok(c.get("/v1/approvals/a1"))["status"] == "approved"
    shown = person.sees("> a2")
    assert not [line for line in shown.splitlines() if line[:4] in ("> a1", "  a1")]  # it left the pending list
    person.press("d")
    person.sees("Deny a2")
    person.press("y")
    person.sees("a2 denied")
    with hub.client() as c:
        assert ok(c.get("/v1/approvals/a2"))["status"] == "denied"


def test_s_and_confirm_holds_the_plaza_and_the_banner_shows_on_every_tab(hub, person):
    person.live()
    person.press("s")
    person.sees("STOP ALL holds the whole plaza", "y/n")
    person.press("y")
    person.sees("PLAZA HELD (STOP ALL)", "by owner", "STOP ALL from the terminal screen")
    with hub.client() as c:
        plaza = ok(c.get("/v1/plaza"))
    assert plaza["held"] is True and plaza["reason"] == "STOP ALL from the terminal screen"
    for k in "234567890":
        person.press(k)
        person.sees("PLAZA HELD (STOP ALL)", "s resumes")
    person.press("s")
    person.sees("Resume the plaza?")
    person.press("y")
    person.sees("the plaza is running again")
    with hub.client() as c:
        assert ok(c.get("/v1/plaza"))["held"] is False
    assert "PLAZA HELD" not in person.screen.last_text


def test_a_new_task_appears_on_the_tasks_tab_without_r(hub, person):
    person.live()
    person.press("4")
    person.sees("[4 Tasks]", "(none)")
    with hub.client() as c:
        ok(c.post("/v1/tasks", json={"title": "Write the release notes", "acceptance": "x", "budget": 50,
                                     "role": "builder"}))
    person.sees("t1", "Write the release notes", "open")
    with hub.client() as c:  # and one made while the screen shows another tab is there when it comes back
        person.press("2")
        person.sees("[2 Overview]")
        ok(c.post("/v1/tasks", json={"title": "Second", "acceptance": "x", "budget": 50, "role": "builder"}))
        person.sees("open 2")
    person.press("4")
    person.sees("t2", "Second")


def test_agents_detail_and_a_message_with_t(hub, person):
    with hub.client() as c:
        ok(c.post("/v1/agents", json={"role": "builder", "count": 2}))
        ok(c.patch("/v1/agents/3", json={"name": "Bob"}))
    person.live()
    person.sees("Bob", "offline")  # the floor: a robot for each agent
    person.press("3")
    person.sees("> 3", "Bob", "builder")
    person.press("j")
    person.sees("> 4")
    person.press("k")
    person.press(ENTER)
    person.sees("Bob  (cid 3, builder)", "transcript")
    person.press(ENTER)
    until("the detail closes", lambda: "(cid 3, builder)" not in person.screen.last_text, SHOWN_S)
    person.press("t")
    person.sees("message to Bob")
    person.press("Introduce yourself")
    person.sees("Introduce yourself_")
    person.press(ENTER)
    person.sees("message sent to Bob")
    with hub.client() as c:
        logs = ok(c.get("/v1/agents/3/logs"))["transcript"]
    assert [(e["kind"], e["text"]) for e in logs] == [("told", "Introduce yourself")]
    person.press("t")
    person.press("never sent")
    person.press(ESC)
    person.sees("message not sent")


def test_the_board_tab_follows_the_board_live_opens_a_thread_posts_and_replies(hub, person):
    with hub.client() as c:
        ok(c.post("/v1/board", json={"text": "The survey starts today"}))
    person.live()
    person.press("6")
    person.sees("[6 Board]", "p1", "owner", "The survey starts today")
    with hub.client() as c:  # a post made anywhere shows without r
        ok(c.post("/v1/board", json={"text": "Who takes the chart?"}))
    person.sees("p2", "Who takes the chart?")
    person.press("t")
    person.sees("post to the board (Enter sends")
    person.press("Posted from the terminal")
    person.press(ENTER)
    person.sees("posted", "p3", "Posted from the terminal")
    person.press("j")  # newest first: p3, p2, p1
    person.press("j")
    person.sees("> p1")
    person.press(ENTER)
    person.sees("p1 by owner", "(no replies yet)", "t replies to this post")
    person.press("t")
    person.sees("reply to p1")
    person.press("On it")
    person.press(ENTER)
    person.sees("replied to p1", "p1.r1 owner", "On it")
    with hub.client() as c:
        thread = ok(c.get("/v1/board/p1"))["thread"]
        assert [(r["author"], r["text"]) for r in thread] == [("owner", "On it")]
        ok(c.post("/v1/board/pause", json={"on": True}))
    person.sees("PAUSED: deliveries are paused")
    person.press(ENTER)
    until("the thread closes", lambda: "p1 by owner" not in person.screen.last_text, SHOWN_S)


def test_the_conversations_tab_shows_threads_live_and_t_writes_to_the_agent(hub, person):
    with hub.client() as c:
        cid = ok(c.post("/v1/agents", json={"role": "builder", "count": 1}))["agents"][0]["cid"]
    person.live()
    person.press("7")
    person.sees("[7 Conversations]", "(none)")
    with hub.client() as c:
        ok(c.post(f"/v1/agents/{cid}/tell", json={"text": "Please read the brief"}))
    person.sees(f"owner~{cid}", "Please read the brief")
    person.press(ENTER)
    person.sees(f"owner~{cid}: 1 messages", f"owner to {cid}")
    person.press("t")
    person.sees(f"message to {cid}")
    person.press("And then the survey")
    person.press(ENTER)
    person.sees(f"message sent to {cid}", f"owner~{cid}: 2 messages", "And then the survey")
    with hub.client() as c:
        thread = ok(c.get(f"/v1/conversations/owner~{cid}"))["thread"]
    assert [m["text"] for m in thread] == ["Please read the brief", "And then the survey"]


def test_without_a_terminal_the_command_says_so(hub):
    r = cli(hub, "tui")
    assert r.returncode == 1 and "(not_a_terminal)" in r.stderr and "agentplaza overview --json" in r.stderr
