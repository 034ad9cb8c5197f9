"""A confirmed violation, recorded straight in a running hub's store (what the hub once took over
``POST /v1/conduct/violations``, a stand-in write that is no hub route any more).

The test's process is a second writer on the hub's store, as a second hub would be: the hub reads the
offence and its sanctions when its follower next polls (``wait_seen`` waits for that).
"""

from __future__ import annotations

import time

import httpx

from agentplaza.commands import conduct
from agentplaza.commands.unit import Commands
from agentplaza.events.store import EventStore

#: How long a test waits for the hub's read models to reach a position it wrote itself.
SEEN_WAIT_S = 30.0


def record_violation(folders, database_url: str | None, agent, law: str, severity: str | None, tool: str) -> dict:
    """Sanction a confirmed violation of ``law`` by ``agent`` as the check of a call does; the schedule's steps."""
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        cmds = Commands(store)
        out = conduct.record_violation(cmds, cmds.context("owner"), str(agent), law, severity, tool)
        out["position"] = store.max_position()
        return out
    finally:
        store.close()


def wait_seen(c: httpx.Client, position: int) -> None:
    """Until the hub's read models include ``position`` (its follower polls the store)."""
    deadline = time.monotonic() + SEEN_WAIT_S
    while c.get("/v1/hub").json()["projections_at"] < position:
        assert time.monotonic() < deadline, f"the hub did not read position {position}"
        time.sleep(0.05)
