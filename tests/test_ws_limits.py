"""/v1/ws limits: a client message over the cap closes that socket, idle sockets never lock the owner out.

A real hub; the bus's idle rule with an injected clock.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest
from support.hubproc import HubProcess
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agentplaza.api.ws import CLIENT_MESSAGE_BYTES_MAX, CLOSE_TOO_BIG
from agentplaza.events.bus import CLOSE_YIELDED, IDLE_S, MAX_PER_ADDRESS, Bus


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("wslimits")
    f = Folders(root / "s", root / "c", root / "d").make()
    h = HubProcess(f, args=("--node", "off")).start()
    yield h
    h.stop()


def ws(h: HubProcess, query: str = ""):
    return connect(h.url.replace("http", "ws") + "/v1/ws" + query, subprotocols=["apz.events.v1"], open_timeout=10,
                   max_size=None)


def test_a_one_mib_client_message_closes_that_socket_and_the_hub_answers(hub):
    with ws(hub) as small, ws(hub) as big:
        small.send("x" * CLIENT_MESSAGE_BYTES_MAX)  # at the cap: read and thrown away
        with contextlib.suppress(ConnectionClosed):
            big.send("x" * (1 << 20))
        with pytest.raises(ConnectionClosed) as closed:
            big.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == CLOSE_TOO_BIG
        with hub.client() as c:
            assert c.get("/v1/health").json() == {"ok": True}
            c.post("/v1/plaza/stop", json={"reason": "still here"})
            c.post("/v1/plaza/resume", json={})
        assert json.loads(small.recv(timeout=10))["data"]["reason"] == "still here"


def test_eight_idle_sockets_do_not_stop_the_owners_agentplaza_events(hub):
    with contextlib.ExitStack() as stack:
        idle = [stack.enter_context(ws(hub)) for _ in range(MAX_PER_ADDRESS)]
        proc = subprocess.Popen([sys.executable, "-m", "agentplaza.cli.main", "events", "--kinds", "plaza", "--once"],
                                env=hub.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with pytest.raises(ConnectionClosed) as closed:
                idle[0].recv(timeout=30)  # the oldest yields once the CLI's socket is open
            assert closed.value.rcvd.code == CLOSE_YIELDED
            with hub.client() as c:
                c.post("/v1/plaza/stop", json={"reason": "owner watching"})
                c.post("/v1/plaza/resume", json={})
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0 and "Plaza.Held" in out and "owner watching" in out, err


def test_a_socket_quiet_for_the_idle_time_is_idle_and_one_with_traffic_is_not():
    now = [1000.0]
    bus = Bus(clock=lambda: now[0])
    quiet = bus.subscribe("127.0.0.1", None, lambda: None)
    busy = bus.subscribe("127.0.0.1", None, lambda: None)
    assert bus.idle_for(quiet) == IDLE_S
    now[0] += IDLE_S - 1
    bus.touch(busy)  # an event sent, or a message from its client
    assert bus.idle_for(quiet) == 1 and bus.idle_for(busy) == IDLE_S
    now[0] += 1
    assert bus.idle_for(quiet) == 0 and bus.idle_for(busy) == IDLE_S - 1
