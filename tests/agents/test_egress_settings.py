"""The egress proxy's settings: the owner's fetch blocklist from the model policy (read live on every
CONNECT) and apid's ``--egress`` and ``--egress-ports``. In process where it can be: a real hub, the
real policy route, the runtime's own proxy on one end of a real channel over a socketpair. Only
127.0.0.1 is dialled (the resolver says every name is 127.0.0.1, and the tests that dial let private
addresses through, which agents never get)."""

from __future__ import annotations

import dataclasses
import socket
import warnings

import pytest
from support.echo import echo_server
from support.hubproc import HubProcess, cli

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.api.main import parse_args
from agentplaza.commands import agents as ac
from agentplaza.commands import laws as law_commands
from agentplaza.commands.unit import Commands
from agentplaza.domain.models import (
    MAX_FETCH_BLOCKLIST,
    MODELS_ID,
    ModelSettings,
    shipped_policy,
)
from agentplaza.events.store import EventStore
from agentplaza.projections.agents import transcript
from agentplaza.runtime.egress import EGRESS_OFF, EgressPolicy, policy_from_flags
from agentplaza.runtime.fleet import AgentRuntime
from vmm.channel import Channel

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def plaza(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        c.hub = hub
        yield c
    hub.runtime = None
    hub.close()


def web_ports_only_off(hub) -> None:
    """The owner disables statute S-006c (web ports only): the laws then let other ports through too,
    and the proxy's own list (80, 443 and --egress-ports) is what is left."""
    law_commands.change(hub.commands, hub.commands.context("owner", "a service on another port"), "disable",
                        rule_id="S-006c")


class Guest:
    """One agent's guest end of a channel whose hub end is the runtime's own stream handler."""

    def __init__(self, hub, policy: EgressPolicy | None = None):
        self.hub = hub
        self.cid = ac.spawn(hub.commands, hub.commands.context("owner"), "builder", 1).value[0]
        self.rt = AgentRuntime(hub, node="off", egress=policy)
        self.rt.egress.resolver = lambda host, port: ["127.0.0.1"]
        a, b = socket.socketpair()
        self.hub_end = Channel.over_socket(a, role="host", on_open=lambda st: self.rt._on_stream("egress", self.cid, st)).start()
        self.guest = Channel.over_socket(b, role="guest").start()

    def connect(self, target: str) -> tuple[str, object]:
        st = self.guest.open("egress")
        st.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = st.read(timeout=10)
            if not chunk:
                break
            head += chunk
        return head.decode(), st

    def egress_lines(self) -> list[dict]:
        self.hub.read_models.catch_up()
        return [r for r in transcript(self.hub.read_models, self.cid, limit=10_000) if r["kind"] == "egress"]

    def close(self):
        self.guest.close()
        self.hub_end.close()


def test_the_blocklist_set_through_the_policy_is_honoured_by_the_next_connect_and_a_removed_entry_stops(plaza):
    srv = echo_server()
    port = srv.getsockname()[1]
    web_ports_only_off(plaza.hub)  # the echo server is on a port of its own
    g = Guest(plaza.hub, EgressPolicy(ports=frozenset({port}), allow_private=True))
    try:
        head, _ = g.connect(f"api.example.com:{port}")
        assert head.startswith("HTTP/1.1 200"), head  # nothing blocked yet
        r = plaza.patch("/v1/models/policy", json={"fetch_blocklist": [" Example.COM", "*.example.net", "example.com"]})
        assert r.status_code == 200, r.text
        assert r.json()["policy"]["fetch_blocklist"] == ["example.com", "*.example.net"]  # lower-cased, once each
        assert plaza.get("/v1/models/policy").json()["policy"]["fetch_blocklist"] == ["example.com", "*.example.net"]
        for target, entry in ((f"example.com:{port}", "example.com"), (f"api.example.com:{port}", "example.com"),
                              (f"a.b.example.net:{port}", "*.example.net")):
            head, _ = g.connect(target)
            assert head.startswith("HTTP/1.1 403") and f"on the fetch blocklist ({entry})" in head, head
        head, st = g.connect(f"example.net:{port}")  # *.example.net leaves example.net itself allowed
        assert head.startswith("HTTP/1.1 200"), head
        st.write(b"still open")
        assert st.read(timeout=10) == b"STILL OPEN"
        # the owner takes example.com off: the very next CONNECT is let through, no restart
        assert plaza.patch("/v1/models/policy", json={"fetch_blocklist": ["*.example.net"]}).status_code == 200
        head, _ = g.connect(f"api.example.com:{port}")
        assert head.startswith("HTTP/1.1 200"), head
        head, _ = g.connect(f"www.example.net:{port}")
        assert head.startswith("HTTP/1.1 403"), head
        lines = g.egress_lines()
        assert [(e["detail"]["verdict"], e["detail"]["host"]) for e in lines] == [
            ("allowed", "api.example.com"), ("refused", "example.com"), ("refused", "api.example.com"),
            ("refused", "a.b.example.net"), ("allowed", "example.net"), ("allowed", "api.example.com"),
            ("refused", "www.example.net")]
        assert "fetch blocklist" in lines[1]["text"]
    finally:
        g.close()
        srv.close()


@pytest.mark.parametrize("bad", ["http://example.com", "example.com/x", "*example.com", "exa mple.com", "", "*.",
                                 "example.com:443", "a" * 300 + ".com"])
def test_a_bad_entry_is_refused_naming_it_and_nothing_changes(plaza, bad):
    assert plaza.patch("/v1/models/policy", json={"fetch_blocklist": ["kept.example"]}).status_code == 200
    before = plaza.get("/v1/models/policy").json()
    r = plaza.patch("/v1/models/policy", json={"fetch_blocklist": ["fine.example", bad], "idle_sleep_min": 5})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_blocklist_entry" and repr(bad) in err["message"]
    assert plaza.get("/v1/models/policy").json() == before


def test_the_blocklist_has_a_most_entries(plaza):
    many = [f"h{i}.example" for i in range(MAX_FETCH_BLOCKLIST + 1)]
    r = plaza.patch("/v1/models/policy", json={"fetch_blocklist": many})
    assert r.status_code == 422 and str(MAX_FETCH_BLOCKLIST) in r.json()["error"]["message"]
    r = plaza.patch("/v1/models/policy", json={"fetch_blocklist": many[:MAX_FETCH_BLOCKLIST]})
    assert r.status_code == 200 and len(r.json()["policy"]["fetch_blocklist"]) == MAX_FETCH_BLOCKLIST
    assert plaza.patch("/v1/models/policy", json={"fetch_blocklist": "a.example"}).status_code == 422


def test_a_policy_stored_before_the_blocklist_still_loads_and_can_be_changed(folders, database_url):
    old = shipped_policy()
    del old["fetch_blocklist"]
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        cmds = Commands(store)
        # what an older hub recorded: the policy without the field
        store.commit(ModelSettings.start(cmds.context("hub"), id=MODELS_ID, providers={}, policy=old))
    finally:
        store.close()
    hub = Hub.open(folders, database_url=database_url)
    try:
        with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
            assert c.get("/v1/models/policy").json()["policy"]["fetch_blocklist"] == []
            r = c.patch("/v1/models/policy", json={"fetch_blocklist": ["example.com"]})
            assert r.status_code == 200, r.text
            assert r.json()["policy"]["fetch_blocklist"] == ["example.com"]
    finally:
        hub.close()


def test_egress_flags_and_their_environment_variables():
    assert policy_from_flags(None, None, {}).view() == {"egress": "on", "ports": [80, 443]}
    env = {"APZ_EGRESS": "off", "APZ_EGRESS_PORTS": "8080, 8443"}
    assert policy_from_flags(None, None, env).view() == {"egress": "off", "ports": [80, 443, 8080, 8443]}
    args = parse_args(["--egress", "on", "--egress-ports", "9000"])
    assert policy_from_flags(args.egress, args.egress_ports, env).view() == {"egress": "on", "ports": [80, 443, 9000]}
    assert policy_from_flags(None, "", env).ports == frozenset({80, 443})  # the flag wins, even empty
    for bad in ("0", "65536", "80,x", "-1", "8080;8443"):
        with pytest.raises(ValueError, match="--egress-ports: .* is not a port: give port numbers 1 to 65535"):
            policy_from_flags(None, bad, {})
    with pytest.raises(ValueError, match="APZ_EGRESS_PORTS"):
        policy_from_flags(None, None, {"APZ_EGRESS_PORTS": "http"})
    with pytest.raises(ValueError, match="APZ_EGRESS is on or off"):
        policy_from_flags(None, None, {"APZ_EGRESS": "yes"})


def test_egress_ports_open_an_extra_port_and_others_stay_shut(plaza):
    srv = echo_server()
    port = srv.getsockname()[1]
    other = port + 1 if port < 65535 else port - 1
    args = parse_args(["--egress-ports", str(port)])
    policy = policy_from_flags(args.egress, args.egress_ports, {})
    g = Guest(plaza.hub, dataclasses.replace(policy, allow_private=True))
    try:
        # the flag opens the proxy's port; the laws still say web ports only until the owner disables S-006c
        head, _ = g.connect(f"files.example.org:{port}")
        assert head.startswith("HTTP/1.1 403") and "S-006c" in head, head
        web_ports_only_off(plaza.hub)
        head, st = g.connect(f"files.example.org:{port}")
        assert head.startswith("HTTP/1.1 200"), head
        st.write(b"abc")
        assert st.read(timeout=10) == b"ABC"
        head, _ = g.connect(f"files.example.org:{other}")
        assert head.startswith("HTTP/1.1 403"), head
        assert f"port {other} is not open (only 80, 443, {port})" in head
        plaza.hub.runtime = g.rt
        (node,) = plaza.get("/v1/nodes").json()["nodes"]
        assert node["egress"] == {"egress": "on", "ports": [80, 443, port]}
    finally:
        g.close()
        srv.close()


def test_egress_off_refuses_every_connection_and_records_it(plaza):
    def never(host, port):
        raise AssertionError(f"resolved {host}")

    g = Guest(plaza.hub, policy_from_flags("off", None, {}))
    g.rt.egress.resolver = never
    try:
        for target in ("example.org:443", "example.org:80"):
            head, _ = g.connect(target)
            assert head.startswith("HTTP/1.1 403") and EGRESS_OFF in head, head
        lines = g.egress_lines()
        assert [(e["detail"]["verdict"], e["detail"]["port"]) for e in lines] == [("refused", 443), ("refused", 80)]
        assert all(e["detail"]["why"] == EGRESS_OFF and e["tool"] == "egress.connect" for e in lines)
        assert "switched off on this hub" in lines[0]["text"]
        plaza.hub.runtime = g.rt
        assert plaza.get("/v1/nodes").json()["nodes"][0]["egress"] == {"egress": "off", "ports": [80, 443]}
    finally:
        g.close()


@pytest.mark.parametrize("args,env,says", [
    (("--egress-ports", "8080,70000"), {}, "apid: --egress-ports: '70000' is not a port: give port numbers 1 to 65535"),
    ((), {"APZ_EGRESS_PORTS": "web"}, "apid: APZ_EGRESS_PORTS: 'web' is not a port"),
    ((), {"APZ_EGRESS": "maybe"}, "apid: APZ_EGRESS is on or off, not 'maybe'"),
])
def test_apid_with_bad_egress_settings_exits_saying_why(folders, args, env, says):
    h = HubProcess(folders, args=args)
    h.env.update(APZ_NODE="off", **env)
    with pytest.raises(RuntimeError, match="apid exited") as e:
        h.start()
    assert says in str(e.value)
    assert h.proc.wait(timeout=30) == 2


def test_the_cli_sets_shows_and_clears_the_fetch_blocklist(folders):
    h = HubProcess(folders, args=("--egress", "off", "--egress-ports", "8080"))  # good flags: it starts
    h.env["APZ_NODE"] = "off"
    h.start()
    try:
        r = cli(h, "models", "policy", "set", "--fetch-blocklist", "Example.com, *.example.net")
        assert r.returncode == 0, r.stderr
        shown = cli(h, "models", "policy", "show")
        assert shown.returncode == 0 and "example.com, *.example.net" in shown.stdout, shown.stdout
        as_json = cli(h, "--json", "models", "policy", "show")
        assert '"fetch_blocklist"' in as_json.stdout and "*.example.net" in as_json.stdout
        bad = cli(h, "models", "policy", "set", "--fetch-blocklist", "example.com,https://x.example/")
        assert bad.returncode == 1 and "'https://x.example/'" in bad.stderr and "bare host name" in bad.stderr
        assert "example.com, *.example.net" in cli(h, "models", "policy", "show").stdout  # unchanged
        r = cli(h, "models", "policy", "set", "--fetch-blocklist", "")
        assert r.returncode == 0, r.stderr
        with h.client() as c:
            assert c.get("/v1/models/policy").json()["policy"]["fetch_blocklist"] == []
        shown = cli(h, "models", "policy", "show").stdout
        assert [ln.split() for ln in shown.splitlines() if "fetch_blocklist" in ln] == [["fetch_blocklist", "(none)"]], shown
    finally:
        h.stop()
