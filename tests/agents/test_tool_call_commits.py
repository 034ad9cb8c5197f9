"""What changes together is saved together: the whole check of an agent's tool call (the use of an
approval, the decision, the ask or the violation and its sanctions, the transcript entry) is ONE store
transaction, and the call's result one more. Counted at the store's committer, in process."""

from __future__ import annotations

import pytest

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import approvals
from agentplaza.commands import plaza as plaza_commands
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession


@pytest.fixture
def hub(folders, database_url):
    h = Hub.open(folders, database_url=database_url)
    yield h
    h.close()


class Commits:
    """Every transaction the store's committer writes, as the event kinds in it."""

    def __init__(self, hub, monkeypatch):
        self.seen: list[list[str]] = []
        committer = hub.store.committer
        submit = committer.submit

        def counted(events):
            self.seen.append([e.topic.rsplit(":", 1)[-1] for e in events])
            return submit(events)

        monkeypatch.setattr(committer, "submit", counted)

    def during(self, fn):
        """The transactions ``fn()`` made, and what it returned."""
        before = len(self.seen)
        out = fn()
        return self.seen[before:], out


def session(hub, role="builder"):
    cid = ac.spawn(hub.commands, hub.commands.context("owner"), role, 1).value[0]
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    s.handle({"op": "hello"})
    ac.tell(hub.commands, hub.commands.context("owner"), cid, "work")
    s.handle({"op": "next", "wait": 0})
    return cid, s


WRITE = {"op": "decide", "tool": "vm.write_file", "args": {"path": "a.txt", "content": "hi"}, "call_id": "c1"}


def test_a_guest_tool_calls_check_is_one_commit_and_its_result_one_more(hub, monkeypatch):
    _cid, s = session(hub)
    commits = Commits(hub, monkeypatch)
    made, d = commits.during(lambda: s.handle(WRITE))
    assert d["effect"] == "allow"
    assert len(made) == 1 and {"ToolCall.CallDecided", "Transcript.Entry"} <= set(made[0]), made
    made, _ = commits.during(lambda: s.handle({"op": "result", "tool": "vm.write_file", "call_id": "c1", "ok": True,
                                               "output": "wrote 2 bytes"}))
    assert made == [["Transcript.Entry"]]


def test_an_ask_is_one_commit_and_the_approved_call_uses_its_approval_in_one_commit(hub, monkeypatch):
    cmds = hub.commands
    cid, s = session(hub)
    ac.update(cmds, cmds.context("owner"), cid, {"permission_mode": "ask"})
    commits = Commits(hub, monkeypatch)
    made, asked = commits.during(lambda: s.handle(WRITE))
    assert asked["effect"] == "ask"
    assert len(made) == 1 and {"ToolCall.CallDecided", "Approval.Requested", "Transcript.Entry"} <= set(made[0]), made
    approvals.decide(cmds, cmds.context("owner"), asked["approval"], True)
    made, ran = commits.during(lambda: s.handle(WRITE))
    assert ran["effect"] == "allow"
    assert len(made) == 1 and {"Approval.Used", "ToolCall.CallDecided", "Transcript.Entry"} <= set(made[0]), made


def test_a_violation_and_its_sanctions_are_one_commit_with_the_check(hub, monkeypatch):
    cid, s = session(hub)
    commits = Commits(hub, monkeypatch)
    made, r = commits.during(lambda: s.handle({"op": "tool", "tool": "engine.fetch", "args": {"port": 22}}))
    assert r["error"]["code"] == "refused"  # refused: no result to record
    assert len(made) == 1, made
    kinds = set(made[0])
    assert {"ToolCall.CallDecided", "Transcript.Entry"} <= kinds and any(k.startswith("Conduct.") for k in kinds), made


def test_a_host_tool_is_its_check_and_its_result_and_a_call_refused_before_the_laws_one_commit(hub, monkeypatch):
    cmds = hub.commands
    _cid, s = session(hub)
    commits = Commits(hub, monkeypatch)
    made, r = commits.during(lambda: s.handle({"op": "tool", "tool": "plaza_status", "args": {}}))
    assert r["result"]["held"] is False
    assert len(made) == 2 and "ToolCall.CallDecided" in made[0] and made[1] == ["Transcript.Entry"], made
    plaza_commands.stop_all(cmds, cmds.context("owner", "lunch"))
    s.taken = None  # the item is not what this counts (STOP ALL cancels it on the next item op)
    made, r = commits.during(lambda: s.handle({"op": "tool", "tool": "plaza_status", "args": {}}))
    assert r["error"]["code"] == "refused" and "held" in r["error"]["message"]
    assert made == [["Transcript.Entry"]]  # the refusal, recorded; nothing decided
