"""Editors over ACP: the ``agent-client-protocol`` package's own client drives ``agentplaza acp`` as its
subprocess, against a hub served on a real socket in this process; the agent's harness is the guest's
own loop (``vmm.guest.harness``) on the hub's side of the contract (``HarnessSession``), in process and
with no VM, and its model is the mock provider."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
import trio
from acp import helpers as h
from acp.exceptions import RequestError
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse
from acp.stdio import spawn_agent_process
from anyio.from_thread import BlockingPortal
from hypercorn.config import Config
from hypercorn.trio import serve
from support.hubproc import ROOT, free_port

from agentplaza.api import acp_door
from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.api.main import gateway_call
from agentplaza.api.mcp_tools import SCOPE_OF
from agentplaza.commands import agents as ac
from agentplaza.commands import approvals as approval_commands
from agentplaza.commands import hub_mcp as mcp_commands
from agentplaza.domain.acp import MAX_ATTACHMENT_BYTES, prompt_text, slash_command
from agentplaza.domain.base import Refusal
from agentplaza.projections import agents as agents_rm
from agentplaza.runtime import steering
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession
from vmm.guest import contract
from vmm.guest import harness as guest

MOCK = "mock/echo"
WAIT_S = 60
#: The most one editor session of a test may take: a lost answer fails the test instead of hanging the run.
SESSION_S = 300


def within(session):
    return asyncio.run(asyncio.wait_for(session, SESSION_S))


class LiveHub:
    """The hub on a real socket (Hypercorn, trio, as apid serves it), in a thread of this process."""

    def __init__(self, folders, database_url):
        self.folders, self.database_url, self.port = folders, database_url, free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> LiveHub:
        self.hub = Hub.open(self.folders, database_url=self.database_url)
        self.hub.address = self.url
        self.owner = (self.folders.state / "owner-token").read_text().strip()
        app = create_app(self.hub)
        ready = threading.Event()

        def run() -> None:
            async def main() -> None:
                async with BlockingPortal() as portal:
                    self.portal, self.stop_event = portal, trio.Event()
                    config = Config()
                    config.bind = [f"127.0.0.1:{self.port}"]
                    config.accesslog, config.loglevel = None, "WARNING"
                    config.websocket_max_message_size = acp_door.MESSAGE_BYTES_MAX
                    async with trio.open_nursery() as n:
                        await n.start(lambda task_status: serve(app, config, shutdown_trigger=self.stop_event.wait,
                                                                task_status=task_status))
                        ready.set()
                        await self.stop_event.wait()
                        n.cancel_scope.cancel()
                    await portal.stop(cancel_remaining=True)

            trio.run(main)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(30)
        self.hub.runtime = AgentRuntime(self.hub, node="off", gateway=gateway_call(app, self.portal))
        return self

    def stop(self) -> None:
        self.portal.call(self.stop_event.set)
        self.thread.join(30)
        self.hub.close()

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.owner}"}, timeout=30)

    def token(self, scope: str, tools=()) -> str:
        c = self.hub.commands
        value = mcp_commands.create_token(c, c.context("owner"), f"editor-{scope}-{len(tools)}", scope, list(tools),
                                          None, SCOPE_OF).value["token"]
        self.hub.read_models.catch_up()  # as the route does before it answers
        return value

    def env(self) -> dict:
        env = dict(os.environ, APZ_STATE_DIR=str(self.folders.state), APZ_CONFIG_DIR=str(self.folders.config),
                   APZ_DATA_DIR=str(self.folders.data), APZ_HUB=self.url)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("APZ_TOKEN", None)
        return env


class Harness:
    """The guest's own loop against the hub's side of the contract, in a thread (no VM)."""

    def __init__(self, live: LiveHub, cid: int):
        self.s = HarnessSession(live.hub.runtime, cid, None)
        assert "error" not in self.s.handle({"op": "hello"})
        self.live = live

    def call(self, op: str, **fields) -> dict:  # guest.Hub's one method
        return self.s.handle(dict(fields, op=op))

    def next_item(self) -> dict:
        item = self.call("next", wait=WAIT_S)["item"]
        assert item is not None
        return item

    def reply(self) -> threading.Thread:
        """One prompt, answered by the model (the guest's own ``run_item``)."""
        t = threading.Thread(target=lambda: guest.run_item(self, self.next_item(), []), daemon=True)
        t.start()
        return t

    def write_after_approval(self) -> threading.Thread:
        """One prompt whose work waits on an approval for vm.write_file, then makes the same call again."""

        def work() -> None:
            item = self.next_item()["item"]
            self.call("model", item=item, messages=[{"role": "user", "content": "writing"}], tools=[])
            args = {"path": "a.txt", "content": "hi"}
            first = self.call("decide", tool="vm.write_file", args=args, call_id="w1")
            assert first["effect"] == "ask", first
            cmds, deadline = self.live.hub.commands, time.monotonic() + WAIT_S
            while approval_commands.load(cmds, first["approval"]).status == "pending":
                assert time.monotonic() < deadline, "nobody answered the approval"
                time.sleep(0.05)
            again = self.call("decide", tool="vm.write_file", args=args, call_id="w1")
            ok = again["effect"] == "allow"
            self.call("result", tool="vm.write_file", call_id="w1", ok=ok, output="wrote a.txt" if ok else "denied")
            self.call("done", item=item, outcome="done", text="finished")

        t = threading.Thread(target=work, daemon=True)
        t.start()
        return t


    def two_turns(self, turned: threading.Event, go: threading.Event, answers: list) -> threading.Thread:
        """One prompt worked in two model turns, the guest's way (``guest._adopted``): the second waits for
        ``go``, so the editor's slash commands come while the work is in progress."""

        def work() -> None:
            item = self.next_item()["item"]
            messages, allowed = [{"role": "user", "content": "start the survey"}], guest.MAX_STEPS
            r = self.call("model", item=item, messages=messages, tools=[])
            messages, allowed = guest._adopted(r, messages, allowed)
            messages += [{"role": "assistant", "content": r["reply"]["text"]}, {"role": "user", "content": "go on"}]
            turned.set()
            assert go.wait(WAIT_S)
            r = self.call("model", item=item, messages=messages, tools=[])
            messages, allowed = guest._adopted(r, messages, allowed)
            answers.append((r, messages, allowed))
            self.call("done", item=item, outcome="done", text=r["reply"]["text"])

        t = threading.Thread(target=work, daemon=True)
        t.start()
        return t


class Editor:
    """What an editor is to ``agentplaza acp``: the package's client side."""

    def __init__(self, answer: str | None = "allow"):
        self.updates: list = []
        self.asked: list = []
        self.answer = answer

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.asked.append(tool_call)
        if self.answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.answer))

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    def of(self, kind: str) -> list:
        return [u for u in self.updates if u.session_update == kind]

    def said(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))


def acp_args(live: LiveHub, token: str, *more: str) -> list[str]:
    return ["-m", "agentplaza.cli.main", "--hub", live.url, "--token", token, "acp", *more]


def run_acp(live: LiveHub, token: str) -> subprocess.CompletedProcess:
    init = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    return subprocess.run([sys.executable, *acp_args(live, token)], input=init, env=live.env(), capture_output=True,
                          text=True, timeout=WAIT_S)


def cli(live: LiveHub, *words: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "--hub", live.url, "--token", live.owner,
                           *words], env=live.env(), capture_output=True, text=True, timeout=WAIT_S)


@pytest.fixture
def live(folders, database_url):
    hub = LiveHub(folders, database_url).start()
    with hub.http() as c:
        assert c.post("/v1/models/providers", json={"id": "mock"}).status_code == 200
        r = c.patch("/v1/models/policy", json={"worker": [MOCK], "orchestrator": [MOCK], "default_model": MOCK,
                                               "orchestrator_model": MOCK})
        assert r.status_code == 200, r.text
    cmds = hub.hub.commands
    hub.cid = ac.spawn(cmds, cmds.context("owner"), "orchestrator", 1).value[0]
    yield hub
    hub.stop()


def switch_on(live: LiveHub, **switches) -> dict:
    with live.http() as c:
        r = c.patch("/v1/hub-mcp/acp", json=switches or {"acp_enabled": True})
        assert r.status_code == 200, r.text
        return r.json()


def test_acp_is_refused_while_off_and_for_an_observe_token(live):
    govern = live.token("govern")
    r = run_acp(live, govern)
    assert r.returncode == 1 and "refused (404)" in r.stderr and "acp_enabled" in r.stderr
    status = switch_on(live)
    assert status["acp"]["acp_enabled"] is True and status["acp"]["acp_v2"] is False
    r = run_acp(live, live.token("observe"))
    assert r.returncode == 1 and "refused (403): not_allowed" in r.stderr and "observe" in r.stderr
    r = run_acp(live, "apz_mcp_not-a-token")
    assert r.returncode == 1 and "refused (401)" in r.stderr
    # a token whose acp: entries name another agent may connect but not drive the orchestrator
    other = live.token("operate", ["acp:someone-else"])

    async def main():
        async with spawn_agent_process(Editor(), sys.executable, *acp_args(live, other), env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            with pytest.raises(RequestError) as e:
                await conn.new_session(cwd="/tmp/project", mcp_servers=[])
            return e.value

    err = within(main())
    assert "acp: entries" in str(err.data or err)


def test_an_editor_drives_the_orchestrator_answers_approvals_and_resumes_after_a_restart(live):
    switch_on(live)
    govern, operate = live.token("govern"), live.token("operate")
    harness = Harness(live, live.cid)
    editor = Editor(answer="allow")

    async def first():
        async with spawn_agent_process(editor, sys.executable, *acp_args(live, govern), env=live.env()) as (conn, _):
            init = await conn.initialize(protocol_version=1)
            assert init.protocol_version == 1 and init.agent_capabilities.load_session is True
            new = await conn.new_session(cwd="/tmp/project", mcp_servers=[])
            assert new.modes.current_mode_id == "autonomous"
            t = harness.reply()
            done = await conn.prompt(session_id=new.session_id, prompt=[h.text_block("hello plaza")])
            await asyncio.to_thread(t.join, WAIT_S)
            assert done.stop_reason == "end_turn"
            assert editor.said() == "hello plaza"  # the mock provider's echo, streamed back
            assert [u.title for u in editor.of("session_info_update")] == ["hello plaza"]
            names = {c.name for u in editor.of("available_commands_update") for c in u.available_commands}
            assert names == {"compress", "steer", "extend-turns", "stop"}
            # govern changes the approval mode, then answers the approval the agent waits on
            await conn.set_session_mode(session_id=new.session_id, mode_id="ask")
            assert editor.of("current_mode_update")[-1].current_mode_id == "ask"
            t = harness.write_after_approval()
            done = await conn.prompt(session_id=new.session_id, prompt=[h.text_block("write a.txt")])
            await asyncio.to_thread(t.join, WAIT_S)
            assert done.stop_reason == "end_turn" and len(editor.asked) == 1
            starts = [u for u in editor.of("tool_call") if u.title == "vm.write_file"]
            assert [u.status for u in starts] == ["pending", "in_progress"]
            assert editor.of("tool_call_update")[-1].status == "completed"
            steer = await conn.prompt(session_id=new.session_id, prompt=[h.text_block("/steer prefer small steps")])
            assert steer.stop_reason == "end_turn"
            return new.session_id

    session_id = within(first())
    approvals = live.http().get("/v1/approvals").json()["approvals"]
    assert [a["status"] for a in approvals] == ["approved"]

    operator = Editor(answer="allow")

    async def second():
        async with spawn_agent_process(operator, sys.executable, *acp_args(live, operate), env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            await conn.resume_session(session_id=session_id, cwd="/tmp/project", mcp_servers=[])
            with pytest.raises(RequestError) as e:
                await conn.set_session_mode(session_id=session_id, mode_id="autonomous")
            assert "operate" in str(e.value.data or e.value)
            t = harness.write_after_approval()
            prompt = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[h.text_block("write again")]))
            deadline = time.monotonic() + WAIT_S
            while not [u for u in operator.of("tool_call") if u.status == "pending"]:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            pending = [a for a in live.http().get("/v1/approvals").json()["approvals"] if a["status"] == "pending"]
            assert len(pending) == 1
            cmds = live.hub.commands  # the owner answers it in the console; the operate editor was never asked
            await asyncio.to_thread(approval_commands.decide, cmds, cmds.context("owner"), pending[0]["id"], False)
            done = await prompt
            await asyncio.to_thread(t.join, WAIT_S)
            assert done.stop_reason == "end_turn" and operator.asked == []
            assert "cannot answer" in operator.of("tool_call")[0].content[0].content.text
            assert operator.of("tool_call_update")[-1].status == "failed"

    within(second())
    r = cli(live, "--json", "acp", "sessions")
    assert r.returncode == 0, r.stderr
    import json

    (row,) = json.loads(r.stdout)["sessions"]
    assert row["id"] == session_id and row["title"] == "hello plaza" and row["prompts"] == 3
    calls = live.http().get("/v1/hub-mcp/calls", params={"tool": "acp/session/prompt"}).json()["calls"]
    assert len(calls) == 4 and all(len(c["digest"]) == 64 for c in calls)
    assert "hello plaza" not in str(calls)

    live.stop()  # the hub restarts: the session is in the plaza state
    live.start()
    again = Editor()

    async def third():
        async with spawn_agent_process(again, sys.executable, *acp_args(live, govern), env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            await conn.load_session(session_id=session_id, cwd="/tmp/project", mcp_servers=[])
            users = [u.content.text for u in again.of("user_message_chunk")]
            assert users == ["hello plaza", "write a.txt", "write again"]
            assert again.said().startswith("hello plaza")
            await conn.resume_session(session_id=session_id, cwd="/tmp/project", mcp_servers=[])

    within(third())


def test_v2_only_when_the_owner_turns_it_on_and_then_without_load_and_set_mode(live):
    switch_on(live)
    token = live.token("govern")

    async def main(asked: int):
        async with spawn_agent_process(Editor(), sys.executable, *acp_args(live, token), env=live.env()) as (conn, _):
            init = await conn.initialize(protocol_version=asked)
            if init.protocol_version != 2:
                return init.protocol_version, None
            new = await conn.new_session(cwd="/tmp/p", mcp_servers=[])
            with pytest.raises(RequestError) as e:
                await conn.set_session_mode(session_id=new.session_id, mode_id="ask")
            return 2, e.value.code

    assert within(main(2)) == (1, None)
    switch_on(live, acp_v2=True)
    assert within(main(1)) == (1, None)
    assert within(main(2)) == (2, -32601)


def test_attachments_are_cut_at_256_kib_and_slash_commands_are_checked():
    big = "x" * (MAX_ATTACHMENT_BYTES + 10)
    text, left = prompt_text([{"type": "text", "text": "read this"},
                              {"type": "resource", "resource": {"uri": "file:///a.py", "text": big}},
                              {"type": "resource", "resource": {"uri": "file:///b.py", "text": "more"}},
                              {"type": "image", "data": "AAAA", "mimeType": "image/png"}])
    assert left["cut_bytes"] == 10 + len("more") and left["images"] == 1
    assert text.count("x") == MAX_ATTACHMENT_BYTES and "left out" in text and "b.py" not in text
    assert slash_command("/extend-turns 5").arg == 5 and slash_command("/stop").name == "stop"
    assert slash_command("/etc/hosts is odd") is None
    for bad in ("/extend-turns 0", "/extend-turns x", "/steer", "/stop now"):
        with pytest.raises(Refusal):
            slash_command(bad)


def test_cancel_takes_back_a_queued_prompt_and_stops_a_running_one(live):
    switch_on(live)
    token = live.token("operate")
    editor = Editor()
    harness = Harness(live, live.cid)

    async def main():
        async with spawn_agent_process(editor, sys.executable, *acp_args(live, token), env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            new = await conn.new_session(cwd="/tmp/p", mcp_servers=[])
            sid = new.session_id
            # nobody has taken it yet: cancel takes it back from the agent's queue
            prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[h.text_block("never taken")]))
            await _until(lambda: live.hub.read_models.catch_up() or _queue(live) == 1)
            await conn.cancel(session_id=sid)
            assert (await prompt).stop_reason == "cancelled"
            assert _queue(live) == 0
            # taken by the harness: /stop (as session/cancel) ends the running item, and the harness hears so
            prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[h.text_block("long work")]))
            item = (await asyncio.to_thread(harness.next_item))["item"]
            stop = await conn.prompt(session_id=sid, prompt=[h.text_block("/stop")])
            assert stop.stop_reason == "end_turn"
            assert (await prompt).stop_reason == "cancelled"
            after = harness.call("model", item=item, messages=[{"role": "user", "content": "more"}], tools=[])
            assert after["error"]["code"] == "item_cancelled"
            nothing = await conn.prompt(session_id=sid, prompt=[h.text_block("/stop")])
            assert nothing.stop_reason == "end_turn" and "nothing to stop" in editor.said()

    within(main())


def _queue(live: LiveHub) -> int:
    live.hub.read_models.catch_up()
    return live.http().get(f"/v1/agents/{live.cid}").json()["agent"]["queue"]


async def _until(check) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


def test_a_web_page_and_a_caller_with_no_token_cannot_open_acp(live):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    switch_on(live)
    url = live.url.replace("http://", "ws://") + "/acp"
    owner = {"Authorization": f"Bearer {live.owner}"}
    with pytest.raises(InvalidStatus) as e:  # loopback trust does not count here
        connect(url, open_timeout=WAIT_S).close()
    assert e.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as e:  # a page in the owner's browser, token or not
        connect(url, additional_headers=owner, origin="https://evil.example", open_timeout=WAIT_S).close()
    assert e.value.response.status_code == 403
    with connect(url, additional_headers=owner, open_timeout=WAIT_S) as ws:  # the owner acts at govern
        ws.send('{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}')
        assert '"initialize first"' in ws.recv(timeout=WAIT_S)
        ws.send("not json")
        assert '"bad_json"' in ws.recv(timeout=WAIT_S)


def test_each_message_counts_against_the_tokens_rate_limit_and_the_call_log_keeps_a_digest(live):
    from websockets.sync.client import connect

    switch_on(live)
    token = live.token("operate")
    url = live.url.replace("http://", "ws://") + "/acp"
    init = '{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1}}'
    with connect(url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=WAIT_S) as ws:
        answers = []
        for i in range(21):  # 20 a minute at operate, shared with the token's MCP calls
            ws.send(init % i)
            answers.append(ws.recv(timeout=WAIT_S))
    assert all('"protocolVersion":1' in a for a in answers[:20])
    assert '"rate_limited"' in answers[20]
    calls = live.http().get("/v1/hub-mcp/calls", params={"tool": "acp/initialize"}).json()["calls"]
    assert sorted(c["outcome"] for c in calls) == ["ok"] * 20 + ["refused"]
    assert {c["caller"] for c in calls} == {calls[0]["caller"]} and calls[0]["caller"].startswith("token:")


def test_slash_commands_steer_extend_and_compress_the_work_in_progress_at_its_next_model_turn(live):
    switch_on(live)
    token = live.token("operate")  # the guide: operate "cancels or steers the work"
    editor, harness = Editor(), Harness(live, live.cid)

    async def slash(conn, session_id: str, line: str) -> str:
        before = len(editor.said())
        r = await conn.prompt(session_id=session_id, prompt=[h.text_block(line)])
        assert r.stop_reason == "end_turn"
        return editor.said()[before:]

    async def one_item(conn, session_id: str, lines: list[str]) -> tuple:
        turned, go, answers = threading.Event(), threading.Event(), []
        t = harness.two_turns(turned, go, answers)
        prompt = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[h.text_block("survey the repo")]))
        assert await asyncio.to_thread(turned.wait, WAIT_S)
        said = [await slash(conn, session_id, line) for line in lines]
        go.set()
        assert (await prompt).stop_reason == "end_turn"
        await asyncio.to_thread(t.join, WAIT_S)
        return said, answers[0]

    async def main():
        async with spawn_agent_process(editor, sys.executable, *acp_args(live, token), env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            new = await conn.new_session(cwd="/tmp/project", mcp_servers=[])
            idle = await slash(conn, new.session_id, "/steer nothing runs")
            assert "no work in progress" in idle
            said, (answer, messages, allowed) = await one_item(
                conn, new.session_id, ["/steer look at the tests first", "/extend-turns 5"])
            assert all("next model turn" in x for x in said)
            # the model saw the note as the last word (the mock echoes it), and the harness carries it on
            assert messages[-1] == {"role": "user", "content": steering.STEER_PREFIX + "look at the tests first"}
            assert answer["reply"]["text"] == steering.STEER_PREFIX + "look at the tests first"
            assert allowed == guest.MAX_STEPS + 5
            said, (answer, messages, allowed) = await one_item(conn, new.session_id, ["/compress"])
            (first,) = messages  # start, a reply and "go on": summarised into one message
            assert first["role"] == "user" and first["content"].startswith("start the survey" + steering.SUMMARY_PREFIX)
            assert allowed == guest.MAX_STEPS

    within(main())
    live.hub.read_models.catch_up()
    notes = [e["text"] for e in agents_rm.transcript(live.hub.read_models, live.cid, limit=500) if e["kind"] == "note"]
    assert "/steer applied: look at the tests first" in notes
    assert "/extend-turns applied: 5 more model turns allowed" in notes
    assert "/compress applied: 3 messages summarised into one" in notes
    assert "/steer nothing runs" not in notes  # nothing ran: nothing was given


def test_steering_applies_each_command_in_order_and_keeps_the_conversation_when_the_summary_fails():
    start = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    ch = steering.apply([{"command": "steer", "arg": "a"}, {"command": "extend-turns", "arg": 3},
                         {"command": "extend-turns", "arg": 2}], start, lambda conv: "never asked")
    assert ch.conversation[-1]["content"] == steering.STEER_PREFIX + "a" and ch.more_turns == 5
    assert start == [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]  # not changed
    kept = steering.apply([{"command": "compress", "arg": None}], start, lambda conv: None)
    assert kept.conversation is None and "kept whole" in kept.said[0]
    nothing = steering.apply([{"command": "compress", "arg": None}], start[:1], lambda conv: "x")
    assert nothing.conversation is None and "nothing to summarise" in nothing.said[0]
    # the guest holds its own bound whatever the hub says
    assert guest._adopted({contract.MORE_TURNS: 10**9}, [], guest.MAX_STEPS)[1] == contract.MAX_TURNS_ALLOWED
    assert guest._adopted({contract.CONVERSATION: ["not a message"]}, start, 1)[0] is start


class WritingEditor(Editor):
    """An editor that offers file writes (``fs.writeTextFile``) and applies an agent's pull request when asked."""

    def __init__(self):
        super().__init__(answer="apply")
        self.written: dict[str, str] = {}

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.written[path] = content
        with open(path, "w") as f:
            f.write(content)
        return None


def _git(cwd, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@x", "GIT_TERMINAL_PROMPT": "0"})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_repository_mirror_pushes_the_editors_branch_and_applies_the_agents_pull_request(live, tmp_path):
    from acp.schema import ClientCapabilities, FileSystemCapabilities

    switch_on(live, acp_enabled=True, acp_write_back=True)
    cmds = live.hub.commands
    builder = ac.spawn(cmds, cmds.context("owner"), "builder", 1).value[0]  # S-022: builders open pull requests
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q", "-b", "main")
    (project / "a.txt").write_text("one\n")
    (project / "old.txt").write_text("going\n")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "first")
    head = _git(project, "rev-parse", "HEAD")
    (project / "notes.txt").write_text("not committed\n")  # the agent is told; it is not pushed
    harness, editor, told = Harness(live, builder), WritingEditor(), []

    def agent_work() -> None:  # what the agent does in its VM: clone, branch, push, open the pull request
        item = harness.next_item()
        told.append(item["text"])
        session = item["text"].split("work on the branch acp/")[1].split(",")[0]
        clone = tmp_path / "agent-clone"
        _git(tmp_path, "clone", "-q", "-b", "editor/main", f"{live.url}/git/mirror.proj.git", str(clone))
        (clone / "a.txt").write_text("two\n")
        (clone / "new.txt").write_text("made by the agent\n")
        _git(clone, "rm", "-q", "old.txt")
        _git(clone, "add", ".")
        _git(clone, "commit", "-qm", "the agent's change")
        _git(clone, "push", "-q", "origin", f"HEAD:refs/heads/acp/{session}")
        r = harness.call("tool", tool="plaza_git", call_id="g1", args={
            "op": "open_pr", "repo": "mirror.proj", "source": f"acp/{session}", "target": "editor/main",
            "title": "Two, not one"})
        assert r.get("result", {}).get("opened"), r
        harness.call("done", item=item["item"], outcome="done", text="opened a pull request")

    async def main():
        args = acp_args(live, live.token("govern"), "--agent", str(builder), "--repo", "mirror.proj")
        async with spawn_agent_process(editor, sys.executable, *args, env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(write_text_file=True, read_text_file=False)))
            new = await conn.new_session(cwd=str(project), mcp_servers=[])
            with live.http() as c:  # pushed before the session: the editor's committed branch, as editor/main
                branches = {b["branch"]: b["commit"] for b in c.get("/v1/git/repos/mirror.proj/branches").json()["branches"]}
            assert branches["editor/main"] == head
            t = threading.Thread(target=agent_work, daemon=True)
            t.start()
            done = await conn.prompt(session_id=new.session_id, prompt=[h.text_block("change one to two")])
            await asyncio.to_thread(t.join, WAIT_S)
            assert done.stop_reason == "end_turn"
            deadline = time.monotonic() + WAIT_S
            while not [u for u in editor.of("tool_call_update") if u.tool_call_id == "pr-pr1" and u.content
                       and "applied" in u.content[0].content.text]:
                assert time.monotonic() < deadline, "the pull request was never applied"
                await asyncio.sleep(0.05)
            return new.session_id

    session_id = within(main())
    assert f"work on the branch acp/{session_id}" in told[0] and "editor/main" in told[0]
    assert "uncommitted changes" in told[0]
    (shown,) = [u for u in editor.of("tool_call") if u.tool_call_id == "pr-pr1"]
    diffs = {d.path: (d.old_text, d.new_text) for d in shown.content if d.type == "diff"}
    assert diffs[str(project / "a.txt")] == ("one\n", "two\n") and diffs[str(project / "new.txt")][0] is None
    assert "#/git/pr/pr1" in shown.content[0].content.text
    assert (project / "a.txt").read_text() == "two\n" and (project / "new.txt").read_text() == "made by the agent\n"
    assert (project / "old.txt").exists()  # a deleted file is listed for the owner to remove, never removed
    applied = [u for u in editor.of("tool_call_update") if u.tool_call_id == "pr-pr1"][-1].content[0].content.text
    assert "remove them yourself: old.txt" in applied
    assert (project / "notes.txt").read_text() == "not committed\n"


def test_the_mirror_is_refused_a_bad_name_and_says_why_it_could_not_push(live, tmp_path):
    switch_on(live)
    r = subprocess.run([sys.executable, *acp_args(live, live.owner, "--repo", "Bad Name")], input="", env=live.env(),
                       capture_output=True, text=True, timeout=WAIT_S)
    assert r.returncode == 2 and "lowercase letters, digits, ., _ and -" in r.stderr
    from agentplaza.cli import acp_mirror

    relay = acp_mirror.Relay(live.url, live.owner, "not-a-project")
    try:
        assert acp_mirror.push(relay, str(tmp_path))["failed"] == "the editor's folder is not a git project"
        refs = "info/refs?service=git-upload-pack"
        with httpx.Client(headers={acp_mirror.RELAY_HEADER: relay.secret}) as c:
            # the relay carries git's requests for its one repository only
            assert c.get(f"{relay.url}/v1/hub").status_code == 404
            assert c.get(f"{relay.url}/git/other.git/{refs}").status_code == 404
        with httpx.Client() as c:  # another local user knows the port but not the run's secret (the
            # mirror tests above push through it with the secret)
            assert c.get(f"{relay.url}/git/not-a-project.git/{refs}").status_code == 404
            assert c.get(f"{relay.url}/git/not-a-project.git/{refs}",
                         headers={acp_mirror.RELAY_HEADER: "guess"}).status_code == 404
    finally:
        relay.close()


def test_the_model_is_changed_by_a_govern_editor_and_refused_to_operate(live):
    switch_on(live)
    with live.http() as c:
        r = c.patch("/v1/models/policy", json={"orchestrator": [MOCK, "mock/reply"]})
        assert r.status_code == 200, r.text

    async def main(token: str):
        async with spawn_agent_process(Editor(), sys.executable, *acp_args(live, token), env=live.env()) as (conn, _):
            await conn.initialize(protocol_version=1)
            new = await conn.new_session(cwd="/tmp/p", mcp_servers=[])
            # session/set_model: the hub's (the package's client has no helper for it yet), sent as it is
            try:
                await conn._conn.send_request("session/set_model", {"sessionId": new.session_id,
                                                                    "modelId": "mock/reply"})
            except RequestError as e:
                return str(e.data or e)
            return None

    assert "operate" in within(main(live.token("operate")))
    assert within(main(live.token("govern"))) is None
    live.hub.read_models.catch_up()
    assert agents_rm.agent_row(live.hub.read_models, live.cid)["model"] == "mock/reply"


def test_write_back_never_leaves_the_editors_project():
    """A pull request's paths are the agent's word: none may lead a write outside the project folder."""
    from agentplaza.domain.acp import project_path

    assert project_path("/home/me/proj", "src/a.py") == "/home/me/proj/src/a.py"
    assert project_path("/home/me/proj/", "a.txt") == "/home/me/proj/a.txt"
    for bad in ("../.bashrc", "src/../../x", "/etc/passwd", "a\0b", "", ".", None, 7):
        assert project_path("/home/me/proj", bad) is None, bad
    assert project_path("/home/me/proj", "../proj2/x") is None  # a sibling that shares the prefix
