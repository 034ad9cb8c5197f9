"""Joined nodes, black-box: a real apid served over HTTPS on 127.0.0.3 (loopback trust off, so a node is
a caller like one from another machine), nodes that join with a code and connect out to it.

Two kinds of node: ``agentplaza node join`` with its own state folder (the real noded, connected out),
and test nodes that run the same uplink (``adapters.kvm.uplink.session``) with a request handler of
their own, so a test can watch what the hub asks of them and act as a hostile node would: speak for
another node's CID, replay a signed hello, call an owner route, come back after a revocation.  No VM
is booted here; ``tests/test_multinode.py`` boots one on a node in its own network namespace.
"""

from __future__ import annotations

import json
import os
import threading

import httpx
import pytest
from support.deadline import until
from support.hubproc import HubProcess, free_port
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agentplaza import nodesign as ns
from agentplaza.adapters.kvm import uplink
from vmm.channel import StreamReset

pytestmark = pytest.mark.xdist_group("nodes-joined")

HOST = "127.0.0.3"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("hub")
    f = Folders(root / "state", root / "config", root / "data")
    port = free_port()
    h = HubProcess(f, port=port, host=HOST, args=(
        "--https", "--loopback-trust", "off", "--node", "local", "--public-url", f"https://{HOST}:{port}"))
    h.start()
    h.token = (f.state / "owner-token").read_text().strip()
    h.pin = next(line.split("--pin ")[1].strip() for line in h.output.splitlines() if "--pin " in line)
    h.root = root
    yield h
    h.stop()


def owner(hub) -> httpx.Client:
    return httpx.Client(base_url=hub.url, headers={"authorization": f"Bearer {hub.token}"}, timeout=60, verify=False)


def anyone(hub, source: str = "127.0.0.1", **headers) -> httpx.Client:
    return httpx.Client(base_url=hub.url, headers=headers, timeout=30,
                        transport=httpx.HTTPTransport(verify=False, local_address=source))


#: Each redemption from its own address (the hub allows five attempts a minute from one).
SOURCES = iter(f"127.0.{k}.1" for k in range(10, 250))


def code(hub, label: str) -> str:
    with owner(hub) as c:
        r = c.post("/v1/join-codes", json={"label": label})
    assert r.status_code == 200, r.text
    return r.json()["code"]["code"]


def node_row(hub, name: str) -> dict:
    with owner(hub) as c:
        return next(n for n in c.get("/v1/nodes").json()["nodes"] if n["name"] == name)


class ScriptedNode:
    """A node that runs the real uplink with its own answers to the hub's requests."""

    def __init__(self, hub, folder, label: str):
        self.folder = folder
        folder.mkdir(mode=0o700)
        key = ns.make_key(folder)
        with anyone(hub, next(SOURCES)) as c:
            r = c.post("/v1/node/join", json={"code": code(hub, label), "public_key": ns.public_key_text(key)})
        assert r.status_code == 200, r.text
        self.name, self.key = r.json()["node"], key
        ns.save_joined(folder, {"hub": hub.url, "pin": hub.pin, "node": self.name})
        self.hub: object = None
        self._event_streams: list = []
        self.asked: list[tuple[str, dict]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            uplink.session(self, self.folder, self.stop)
        except Exception as e:  # noqa: BLE001 - the test reads why the session ended
            self.ended = e

    def handle(self, st) -> None:  # the hub's requests, as noded's handler takes them
        op = st.meta.get("service")
        if op == "events":
            self._event_streams.append(st)
            return
        st.read_all(timeout=30)
        self.asked.append((op, dict(st.meta)))
        answer = {"facts": {"facts": {"hostname": f"test-{self.name}", "memory_mib": 8192, "memory_free_mib": 4096}},
                  "templates": {"templates": []}, "start": {"boot_s": 0.01}}.get(op, {})
        st.write(json.dumps(answer).encode())
        st.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def reconnect(self) -> None:
        self.close()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()


def raw_hello(hub, text: str):
    """A connection that sends ``text`` as its hello; the close it gets (code, reason), or None if accepted."""
    with connect(uplink.ws_url(hub.url), ssl=uplink.tls_context(), open_timeout=10) as ws:
        ws.send(text)
        try:
            ws.recv(timeout=3)
        except TimeoutError:
            return None
        except ConnectionClosed as e:
            return (e.rcvd.code, e.rcvd.reason) if e.rcvd else (None, "")
        return None


def test_a_machine_joins_with_a_code_and_its_node_connects_out_and_shows_online(hub, tmp_path):
    env = {**hub.env, "APZ_STATE_DIR": str(tmp_path / "s"), "APZ_CONFIG_DIR": str(tmp_path / "c"),
           "APZ_DATA_DIR": str(tmp_path / "d")}
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "agentplaza.cli.main", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    r = cli("node", "join", code(hub, "atlas"))
    assert r.returncode == 0, r.stderr
    joined = json.loads((tmp_path / "s" / ns.JOINED_FILE).read_text())
    name = joined["node"]
    assert f"as node {name}" in r.stdout and joined["cid_first"] >= 1000
    for f in (ns.KEY_FILE, ns.JOINED_FILE):
        assert (tmp_path / "s" / f).stat().st_mode & 0o777 == 0o600
    try:
        until("the node shows online on the hub", lambda: node_row(hub, name)["online"], timeout=60)
        until("its noded's facts, live", lambda: node_row(hub, name)["facts"].get("memory_mib", 0) > 0)
        st = json.loads(cli("--json", "node", "status").stdout)
        assert st["running"] and st["node"] == name and st["hub"] == hub.url
        until("node status says connected", lambda: json.loads(cli("--json", "node", "status").stdout)["connected"])
        with owner(hub) as c:
            m = c.get(f"/v1/machines/{name}").json()["machine"]
            assert m["id"] == name and m["state"] == "online" and m["name"] == "atlas"
            assert c.get("/v1/machines/atlas").json()["machine"]["id"] == name  # by name too
            assert c.get("/v1/machines/n0").json()["machine"]["hub"] is True
    finally:
        r = cli("node", "leave")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "s" / ns.KEY_FILE).exists()
    until("a node that left shows offline", lambda: not node_row(hub, name)["online"], timeout=30)


def test_an_agent_goes_to_the_eligible_joined_node_and_a_drained_one_takes_no_new_agents(hub, tmp_path):
    a, b = ScriptedNode(hub, tmp_path / "a", "alpha"), ScriptedNode(hub, tmp_path / "b", "beta")
    try:
        for n in (a, b):
            until(f"{n.name} online", lambda n=n: node_row(hub, n.name)["online"], timeout=30)
        with owner(hub) as c:
            r = c.post(f"/v1/nodes/{b.name}/drain", json={})
            assert r.status_code == 200, r.text
            first = c.post("/v1/agents", json={"role": "builder"}).json()["agents"][0]
            assert first["node"] == a.name  # b is draining: never chosen
            until("the hub starts the agent's VM on its node", lambda: ("start", first["cid"]) in
                  [(op, m.get("cid")) for op, m in a.asked])
            assert c.post(f"/v1/nodes/{b.name}/drain", json={}).json()["error"]["code"] == "node_draining"
            # machines kill: the run's VM stopped on its own machine, the agent recorded stopped.
            wrong = c.post(f"/v1/machines/{b.name}/runs/{first['cid']}/kill", json={})
            assert wrong.json()["error"]["code"] == "unknown_agent"  # not a run of that machine
            assert c.post(f"/v1/machines/{a.name}/runs/{first['cid']}/kill", json={}).status_code == 200
            until("the hub stops the VM on its node", lambda: ("stop", first["cid"]) in
                  [(op, m.get("cid")) for op, m in a.asked])
            assert c.get(f"/v1/agents/{first['cid']}").json()["agent"]["run"] == "stopped"
            assert c.post(f"/v1/nodes/{b.name}/undrain", json={}).status_code == 200
            assert c.post(f"/v1/nodes/{a.name}/drain", json={}).status_code == 200
            second = c.post("/v1/agents", json={"role": "builder"}).json()["agents"][0]
            assert second["node"] == b.name
            assert node_row(hub, a.name)["draining"] is True

        # A node that connects again is asked to start its running agents again (noded keeps a running VM).
        until("b's agent started once", lambda: any((op, m.get("cid")) == ("start", second["cid"]) for op, m in b.asked))
        starts = sum(1 for op, m in b.asked if (op, m.get("cid")) == ("start", second["cid"]))
        b.reconnect()
        until("b's agent started again through its new connection",
              lambda: sum(1 for op, m in b.asked if (op, m.get("cid")) == ("start", second["cid"])) > starts, timeout=60)

        # A node speaks only for the CIDs the hub placed on it.
        own = b.hub.open("egress", cid=second["cid"])
        own.write(b"NOT A CONNECT\r\n\r\n")
        assert own.read(timeout=30).startswith(b"HTTP/1.1 400")  # it reached the hub's egress relay
        for cid in (first["cid"], 3, 1099 + 100 * 50):  # a's agent, an n0 CID, a CID never given out
            st = b.hub.open("egress", cid=cid)
            st.write(b"NOT A CONNECT\r\n\r\n")
            with pytest.raises(StreamReset, match="not placed"):
                st.read(timeout=30)
    finally:
        a.close()
        b.close()


def test_a_signed_hello_replayed_stale_forged_or_for_another_node_is_refused(hub, tmp_path):
    n = ScriptedNode(hub, tmp_path / "r", "replayer")
    try:
        until("online", lambda: node_row(hub, n.name)["online"], timeout=30)
        hello = ns.sign(n.key, "hello", n.name, hub.url)
        assert raw_hello(hub, hello) is None  # accepted once (it replaces the node's connection: newest wins)
        assert raw_hello(hub, hello)[0] == 4403  # the same message again: a replay
        old = ns.sign(n.key, "hello", n.name, hub.url, at=int(__import__("time").time()) - 3600)
        assert raw_hello(hub, old)[0] == 4403
        other = ns.make_key(tmp_path / "x")
        assert raw_hello(hub, ns.sign(other, "hello", n.name, hub.url))[0] == 4403  # not its key
        assert raw_hello(hub, ns.sign(n.key, "hello", n.name, "https://elsewhere:1"))[0] == 4403  # another hub's
        assert raw_hello(hub, "hello")[0] == 4403
        assert raw_hello(hub, ns.sign(n.key, "beat", n.name, hub.url))[0] == 4403  # a beat is no hello

        # After a good hello, a replayed heartbeat ends the connection.
        with connect(uplink.ws_url(hub.url), ssl=uplink.tls_context(), open_timeout=10) as ws:
            ws.send(ns.sign(n.key, "hello", n.name, hub.url))
            beat = ns.sign(n.key, "beat", n.name, hub.url)
            ws.send(beat)
            ws.send(beat)
            with pytest.raises(ConnectionClosed) as e:
                while True:
                    ws.recv(timeout=10)  # the hub's channel hello first, then the close
        assert e.value.rcvd.code == 4403 and "replay" in e.value.rcvd.reason
    finally:
        n.close()


def test_a_node_reaches_no_owner_route(hub, tmp_path):
    n = ScriptedNode(hub, tmp_path / "o", "nosy")
    try:
        signed = ns.sign(n.key, "hello", n.name, hub.url)
        for how in ({"authorization": f"Bearer {signed}"}, {"authorization": f"Bearer {ns.public_key_text(n.key)}"},
                    {"x-apz-node": signed}):
            for method, path in (("GET", "/v1/nodes"), ("GET", "/v1/vault"), ("POST", f"/v1/nodes/{n.name}/undrain"),
                                 ("POST", "/v1/join-codes"), ("GET", "/v1/machines")):
                # One connection a request: the hub answers 401 without reading a POST's body, and may close
                # the connection after it (a kept-alive one can then fail the next request).
                with anyone(hub, **how) as c:
                    r = c.request(method, path, json={} if method == "POST" else None)
                assert r.status_code == 401, (method, path, r.text)
    finally:
        n.close()


def test_a_revoked_node_is_cut_off_at_once_and_its_next_signed_request_is_refused(hub, tmp_path):
    n = ScriptedNode(hub, tmp_path / "v", "doomed")
    until("online", lambda: node_row(hub, n.name)["online"], timeout=30)
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "--hub", hub.url, "--pin", hub.pin, "--token",
                        hub.token, "nodes", "revoke", n.name, "--yes"], env=hub.env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    until("its connection closes", lambda: not n.thread.is_alive(), timeout=30)
    row = node_row(hub, n.name)
    assert row["revoked"] and not row["online"]
    assert raw_hello(hub, ns.sign(n.key, "hello", n.name, hub.url))[0] == 4403
    status = json.loads((n.folder / uplink.STATUS_FILE).read_text())
    assert status["connected"] is False
    with owner(hub) as c:
        for act in ("undrain", "drain", "revoke"):
            assert c.post(f"/v1/nodes/{n.name}/{act}", json={}).json()["error"]["code"] == "node_revoked"
        m = c.get(f"/v1/machines/{n.name}").json()["machine"]
        assert m["state"] == "revoked"


def test_nodes_and_machines_lists_on_the_command_line(hub):
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "--hub", hub.url, "--pin", hub.pin,
                               "--token", hub.token, *args], env={**hub.env, **os.environ, **hub.env},
                              capture_output=True, text=True)

    r = cli("machines", "list")
    assert r.returncode == 0 and "n0" in r.stdout, r.stderr
    r = cli("nodes", "list")
    assert r.returncode == 0 and "STATE" in r.stdout and "revoked" in r.stdout, r.stderr
    r = cli("machines", "show", "nowhere")
    assert r.returncode == 1 and "no machine" in r.stderr
