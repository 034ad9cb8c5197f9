"""An agent's side of the harness in a test, without a VM: the hub's own ``HarnessSession`` for a
spawned agent, driven with the ops its harness would send.

    cid, s = session(hub, "builder")             # spawned, said hello
    tool(s, "plaza_memory_write", note="n", text="t")
    (ann, s1), (bob, s2) = at_work(hub, "researcher", "tester")   # each told "work", item taken

``hub`` is an in-process ``agentplaza.api.hub.Hub`` (the test module's own fixture: conftest's ``hub`` is a
real apid process).
"""

from __future__ import annotations

from agentplaza.commands import agents as ac
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession


def session(hub, role: str) -> tuple[int, HarnessSession]:
    """A new agent of ``role`` and its harness session, after its hello."""
    cid = ac.spawn(hub.commands, hub.commands.context("owner"), role, 1).value[0]
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    assert "error" not in s.handle({"op": "hello"})
    return cid, s


def at_work(hub, *roles: str) -> list[tuple[int, HarnessSession]]:
    """An agent of each role, told to work, with that work item taken (its next tool calls belong to it)."""
    out = []
    for role in roles:
        cid, s = session(hub, role)
        ac.tell(hub.commands, hub.commands.context("owner"), cid, "work")
        s.handle({"op": "next", "wait": 0})
        out.append((cid, s))
    return out


def tool(s: HarnessSession, which: str, /, **args) -> dict:
    """One tool call as the harness sends it; the session's answer."""
    return s.handle({"op": "tool", "tool": which, "args": args})
