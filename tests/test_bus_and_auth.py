"""The live bus (/v1/ws, apz.events.v1) and who may call the hub."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading

import anyio
import httpx
import pytest
from support.deadline import until
from support.hubproc import HubProcess
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.events.bus import CLOSE_YIELDED, MAX_BEHIND, MAX_PER_ADDRESS, MAX_TOTAL, Bus, BusFull
from agentplaza.events.records import EventRecord


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("bus")
    f = Folders(root / "s", root / "c", root / "d").make()
    h = HubProcess(f).start()
    yield h
    h.stop()


def ws(h: HubProcess, query: str = "", protocols=("apz.events.v1",)):
    return connect(h.url.replace("http", "ws") + "/v1/ws" + query, subprotocols=list(protocols), open_timeout=10)


def test_one_message_per_event_in_the_guides_shape(hub):
    with ws(hub) as sock, hub.client() as c:
        assert sock.subprotocol == "apz.events.v1"
        c.post("/v1/plaza/stop", json={"reason": "bus test"})
        msg = json.loads(sock.recv(timeout=10))
        c.post("/v1/plaza/resume", json={})
        msg2 = json.loads(sock.recv(timeout=10))
    assert msg["event"] == "plaza" and msg["data"]["kind"] == "Plaza.Held"
    assert msg["data"]["reason"] == "bus test" and msg["data"]["actor"] == "owner"
    assert msg2["data"]["kind"] == "Plaza.Resumed" and msg2["data"]["position"] == msg["data"]["position"] + 1


def test_kinds_filter_and_read_only(hub):
    with ws(hub, "?kinds=agent") as quiet, ws(hub, "?kinds=plaza") as loud, hub.client() as c:
        quiet.send(json.dumps({"command": "stop"}))  # ignored: the socket is read-only
        c.post("/v1/plaza/stop", json={"reason": "filter"})
        c.post("/v1/plaza/resume", json={})
        assert json.loads(loud.recv(timeout=10))["data"]["kind"] == "Plaza.Held"
        with pytest.raises(TimeoutError):
            quiet.recv(timeout=1)
        assert c.get("/v1/plaza").json()["state"] == "running"


def test_without_the_subprotocol_the_socket_is_refused(hub):
    with pytest.raises((ConnectionClosed, InvalidStatus)):
        with ws(hub, protocols=()) as sock:
            sock.recv(timeout=5)


def test_a_ninth_socket_from_one_address_takes_the_oldest_ones_place(hub):
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(ws(hub)) for _ in range(MAX_PER_ADDRESS)]
        newest = stack.enter_context(ws(hub))
        with pytest.raises(ConnectionClosed) as closed:
            socks[0].recv(timeout=10)
        assert closed.value.rcvd.code == CLOSE_YIELDED
        with hub.client() as c:
            c.post("/v1/plaza/stop", json={"reason": "ninth"})
            c.post("/v1/plaza/resume", json={})
        assert json.loads(newest.recv(timeout=10))["data"]["reason"] == "ninth"
        assert json.loads(socks[1].recv(timeout=10))["data"]["reason"] == "ninth"


def _rec(i: int, family: str = "plaza") -> EventRecord:
    return EventRecord(i, "x", i, "Plaza.Held", family, "t", "owner", None, "c", {})


def test_bus_limits_and_cuts_off_a_client_too_far_behind():
    bus = Bus()
    woke = []
    subs = [bus.subscribe(f"10.0.0.{i // MAX_PER_ADDRESS}", None, lambda: woke.append(1)) for i in range(MAX_TOTAL)]
    with pytest.raises(BusFull, match="64"):
        bus.subscribe("10.9.9.9", None, lambda: None)
    bus.unsubscribe(subs[0])
    newer = bus.subscribe("10.0.0.1", None, lambda: None)  # that address is full: its oldest yields
    assert subs[MAX_PER_ADDRESS].yielded and subs[MAX_PER_ADDRESS] not in bus.subscribers
    assert newer in bus.subscribers and not subs[MAX_PER_ADDRESS + 1].yielded
    slow = subs[1]
    bus.publish([_rec(i) for i in range(MAX_BEHIND)])
    assert len(slow.queue) == MAX_BEHIND and not slow.dropped
    bus.publish([_rec(MAX_BEHIND + 1)])
    assert slow.dropped and not slow.queue


def test_cli_events_streams(hub):
    env = dict(hub.env)
    proc = subprocess.Popen([sys.executable, "-m", "agentplaza.cli.main", "events", "--kinds", "plaza", "--once"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait until the socket is open, then make an event.
        with hub.client() as c:
            for _ in range(100):
                c.post("/v1/plaza/stop", json={"reason": "stream me"})
                c.post("/v1/plaza/resume", json={})
                try:
                    out, _ = proc.communicate(timeout=0.3)
                    break
                except subprocess.TimeoutExpired:
                    continue
    finally:
        proc.kill()
    assert "Plaza.Held" in out or "Plaza.Resumed" in out


def test_cli_reconnect_waits_double_from_one_to_thirty_seconds():
    from agentplaza.cli.commands.events import RECONNECT_FIRST_S, next_wait

    waits, w = [], RECONNECT_FIRST_S
    for _ in range(8):
        waits.append(w)
        w = next_wait(w)
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]


def test_loopback_is_trusted_and_others_need_the_owner_token(folders):
    hub = Hub.open(folders)
    token = (folders.state / "owner-token").read_text().strip()
    app = create_app(hub)

    async def calls():
        out = {}
        for label, client_addr, headers in [
            ("loopback", ("127.0.0.1", 5000), {}),
            ("remote", ("192.0.2.7", 5000), {}),
            ("remote-wrong", ("192.0.2.7", 5000), {"Authorization": "Bearer nope"}),
            ("remote-token", ("192.0.2.7", 5000), {"Authorization": f"Bearer {token}"}),
        ]:
            transport = httpx.ASGITransport(app=app, client=client_addr)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7700") as c:
                r = await c.get("/v1/plaza", headers=headers)
                out[label] = (r.status_code, r.json())
        return out

    try:
        out = anyio.run(calls, backend="trio")
    finally:
        hub.close()
    assert out["loopback"][0] == 200
    assert out["remote"] == (401, {"error": {"code": "unauthorized", "message": "present the owner token as a bearer token"}})
    assert out["remote-wrong"][0] == 401
    assert out["remote-token"][0] == 200


def test_cli_events_reconnects_when_the_hub_comes_back(tmp_path):
    from agentplaza.config import Folders

    f = Folders(tmp_path / "s", tmp_path / "c", tmp_path / "d").make()
    h = HubProcess(f).start()
    proc = subprocess.Popen([sys.executable, "-m", "agentplaza.cli.main", "events", "--kinds", "plaza"],
                            env=h.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()

    def shown(c, reason: str):
        """Hold and resume the plaza with ``reason`` until the CLI prints it."""
        def check():
            c.post("/v1/plaza/stop", json={"reason": reason})
            c.post("/v1/plaza/resume", json={})
            return any(reason in x for x in lines)
        return check
    try:
        with h.client() as c:
            until("the CLI streams the first hub's events", shown(c, "first hub"), 30, every=0.5)
        h.stop()
        h2 = HubProcess(f, port=h.port).start()  # same address, a new process
        try:
            with h2.client() as c:
                until("the CLI streams the new hub's events", shown(c, "back again"), 30, every=0.5)
        finally:
            h2.stop()
    finally:
        proc.terminate()
        err = proc.communicate(timeout=10)[1]
    assert "live events lost" in err and "reconnecting in 1 s" in err
    assert any("back again" in x for x in lines)


def test_an_event_a_route_folds_itself_still_reaches_the_live_stream(folders):
    """A route that reads its own write folds the log itself (``read_models.catch_up()``) and drops what
    it returns; the events it folded still go out on the follower's next publish, once, in order."""
    from agentplaza.commands import plaza as plaza_commands

    hub = Hub.open(folders)
    try:
        woke: list[int] = []
        sub = hub.bus.subscribe("127.0.0.1", ["plaza"], lambda: woke.append(1))
        hub.read_models.catch_up()
        hub.bus.take_folded()  # what the start folded
        plaza_commands.stop_all(hub.commands, hub.commands.context("owner"))
        plaza_commands.resume(hub.commands, hub.commands.context("owner"))
        hub.read_models.catch_up()  # as a route does: what it returns is dropped
        assert hub.read_models.catch_up() == []  # the follower's own catch-up finds nothing new ...
        hub.bus.publish(hub.bus.take_folded())  # ... and publishes what the route folded
        assert [r.kind for r in sub.queue] == ["Plaza.Held", "Plaza.Resumed"] and woke
        assert sub.queue[1].position == sub.queue[0].position + 1
        assert hub.bus.take_folded() == []  # once
    finally:
        hub.close()


def test_more_folded_than_a_subscriber_may_fall_behind_cuts_every_subscriber_off():
    bus = Bus()
    assert bus.take_folded() == []
    bus.folded([_rec(1)])  # no one watches: nothing is kept
    assert bus.take_folded() == []
    sub = bus.subscribe("127.0.0.1", None, lambda: None)
    bus.folded([_rec(i) for i in range(1, MAX_BEHIND)])
    bus.folded([_rec(MAX_BEHIND), _rec(MAX_BEHIND + 1)])
    assert bus.take_folded() == [] and sub.dropped and not sub.queue  # it reconnects and reads again
    bus.folded([_rec(MAX_BEHIND + 2)])
    assert [r.position for r in bus.take_folded()] == [MAX_BEHIND + 2]
