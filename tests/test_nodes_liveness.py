"""The guide, "A machine shows as offline": "A node is offline when it has not contacted the hub for more
than 60 seconds."  Liveness is kept live by ``runtime.joined.JoinedNodes`` against its clock (injected
here), never as events."""

from __future__ import annotations

from types import SimpleNamespace

from agentplaza.runtime.joined import OFFLINE_AFTER_S, JoinedNodes


def test_a_connected_node_not_heard_from_for_more_than_60_seconds_shows_offline():
    now = [1000.0]
    rt = SimpleNamespace(links={"n1": SimpleNamespace(up=True, close=lambda: None)})
    j = JoinedNodes(rt, clock=lambda: now[0])
    assert OFFLINE_AFTER_S == 60
    assert not j.online("n1")  # never heard from
    j.heard["n1"] = now[0]
    assert j.online("n1")
    now[0] += 60
    assert j.online("n1")
    now[0] += 1
    assert not j.online("n1")
    j.heard["n1"] = now[0]  # a heartbeat
    assert j.online("n1")
    rt.links["n1"].up = False  # its connection dropped: offline at once
    assert not j.online("n1")


def test_a_revoked_node_is_offline_and_its_link_is_closed_at_once():
    closed = []
    rt = SimpleNamespace(links={"n1": SimpleNamespace(up=True, close=lambda: closed.append("n1"))})
    j = JoinedNodes(rt, clock=lambda: 5.0)
    j.heard["n1"] = 5.0
    j.revoked("n1")
    assert closed == ["n1"] and "n1" not in rt.links and not j.online("n1")
