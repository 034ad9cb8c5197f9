"""The web tools in a real microVM, the mock provider scripted as the model (the hub's own gateway, in
process): a builder fetches a page from a web server the test runs, downloads a file from it, installs
a package (a small wheel) from a package index the test serves, and uses it; every connection goes
through the hub's egress proxy. The same fetch to a host on the fetch blocklist, to a private address
and to a name that resolves to one is refused and recorded.

The test's server listens on 127.0.0.1, which the address check refuses to agents: the hub here lets
exactly that address through (``EgressPolicy.allow_addresses``, which apid never sets) and resolves the
test's own names (``pages.plaza.test``) to it, as tests/agents/test_egress.py does. Every other
address stays refused."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import threading
import zipfile

import pytest
from anyio.from_thread import start_blocking_portal
from test_agents_vm import image, roster, transcript, wait_for  # noqa: F401 - the fixture

from agentplaza.adapters.kvm.noded import Node
from agentplaza.adapters.providers.presets import config_from_preset
from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.api.main import gateway_call
from agentplaza.commands import agents as ac
from agentplaza.commands import conduct as conduct_commands
from agentplaza.commands import laws as law_commands
from agentplaza.commands import models as model_commands
from agentplaza.runtime.egress import EgressPolicy
from agentplaza.runtime.fleet import AgentRuntime

pytestmark = pytest.mark.vm

MOCK = "mock/echo"
PAGE = (b"<html><head><title>The plaza's test page</title><style>p {color: red}</style>"
        b"<script>var hidden = 'not text';</script></head><body><h1>Welcome</h1><p>Agents read this "
        b"&amp; that.</p><ul><li>one</li><li>two</li></ul></body></html>")
DATA = bytes(range(256)) * 40


def wheel() -> tuple[str, bytes]:
    """apz_hello 0.1, a pure-Python wheel made here."""
    name = "apz_hello-0.1-py3-none-any.whl"
    files = {"apz_hello/__init__.py": b"def greet():\n    return 'hello from a local index'\n",
             "apz_hello-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: apz-hello\nVersion: 0.1\n",
             "apz_hello-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                              b"Tag: py3-none-any\n"}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append("apz_hello-0.1.dist-info/RECORD,,")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr("apz_hello-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return name, buf.getvalue()


class Site:
    """The test's web server: a page, a file, and a PEP 503 package index with one wheel."""

    def __init__(self):
        whl_name, whl = wheel()
        sha = hashlib.sha256(whl).hexdigest()
        self.routes = {
            "/": ("text/html; charset=utf-8", PAGE),
            "/moved": None,
            "/data.bin": ("application/octet-stream", DATA),
            "/simple/apz-hello/": ("text/html", f'<a href="/packages/{whl_name}#sha256={sha}">{whl_name}</a>'.encode()),
            f"/packages/{whl_name}": ("application/octet-stream", whl),
        }
        self.seen: list = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                site.seen.append((self.headers.get("Host"), self.path))
                if self.path == "/moved":
                    self.send_response(302)
                    self.send_header("Location", "/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                found = site.routes.get(self.path)
                if found is None:
                    self.send_error(404)
                    return
                ctype, body = found
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


NAMES = {"pages.plaza.test": ["127.0.0.1"], "blocked.plaza.test": ["127.0.0.1"],
         "intranet.plaza.test": ["10.0.0.8"]}


@pytest.fixture
def web(folders, image, tmp_path):  # noqa: F811
    os.chmod(tmp_path, 0o755)
    site = Site()
    hub = Hub.open(folders)
    node = Node("n0", folders.data / "vms", image=image)
    stop = threading.Event()
    sock = folders.state / "node.sock"
    threading.Thread(target=node.serve, args=(sock, stop), daemon=True).start()
    wait_for("noded's socket", sock.exists, 10)
    owner = hub.commands.context("owner")
    model_commands.add_provider(hub.commands, owner, config_from_preset("mock", id="mock"))
    model_commands.set_policy(hub.commands, owner, {"worker": [MOCK], "orchestrator": [MOCK], "default_model": MOCK,
                                                    "orchestrator_model": MOCK, "fetch_blocklist": ["blocked.plaza.test"]})
    # The test's server is not on a web port: the owner opens its port, as the guide says (the proxy's
    # ports, and statute S-006c "Web ports only" disabled).
    law_commands.change(hub.commands, hub.commands.context("owner", "the test's server port"), "disable",
                        rule_id="S-006c")
    egress = EgressPolicy(ports=frozenset({80, 443, site.port}), allow_addresses=frozenset({"127.0.0.1"}))
    app = create_app(hub)
    with start_blocking_portal("trio") as portal:
        rt = AgentRuntime(hub, node=str(sock), egress=egress, gateway=gateway_call(app, portal))
        rt.egress.resolver = lambda host, port: list(NAMES[host])  # the test's own names
        hub.runtime = rt
        rt.start()
        try:
            yield hub, node, rt, site
        finally:
            rt.close()
            stop.set()
            node.stop_all()
            hub.close()
            site.close()


def tool(name: str, **args) -> str:
    return f"[mock:tool {name.replace('.', '__')} {json.dumps(args)}]"


def test_a_builder_fetches_downloads_and_installs_through_the_egress_proxy(web):
    hub, node, rt, site = web
    owner = hub.commands.context("owner")
    (b,) = ac.spawn(hub.commands, owner, "builder", 1).value
    hub.read_models.catch_up()
    rt.kick()
    wait_for("the builder idle", lambda: roster(hub).get(b, {}).get("status") == "idle", 240)
    base = f"http://pages.plaza.test:{site.port}"

    def step(text):
        n = sum(e["kind"] == "done" for e in transcript(hub, b))
        ac.tell(hub.commands, owner, b, text)
        hub.read_models.catch_up()
        rt.work_for(b)
        wait_for("the item done", lambda: sum(e["kind"] == "done" for e in transcript(hub, b)) > n, 300,
                 diag=lambda: [(e["kind"], e["tool"], (e["text"] or "")[:160]) for e in transcript(hub, b)][-8:])
        last = [e for e in transcript(hub, b) if e["kind"] in ("tool_result", "tool_call")][-1]
        if last["kind"] == "tool_call" and last["detail"]["effect"] == "allow":  # ran, and its result is missing
            raise AssertionError([(e["kind"], e["tool"], (e["text"] or "")[:300], e["detail"])
                                  for e in transcript(hub, b)][-6:])
        return last

    # A page: readable text, with the final URL (a redirect followed), status, content type and bytes.
    r = step(tool("vm.fetch", url=f"{base}/moved"))
    assert r["kind"] == "tool_result" and r["detail"]["ok"], (r, r["detail"])
    text = r["text"]
    assert f"URL: {base}/" in text and "status: 200" in text and "content type: text/html" in text
    assert f"bytes: {len(PAGE)}" in text and "title: The plaza's test page" in text
    assert "Welcome" in text and "Agents read this & that." in text and "one\ntwo" in text
    assert "<p>" not in text and "not text" not in text and "color" not in text
    assert (r["detail"]["host"], r["detail"]["status"], r["detail"]["bytes"]) == ("pages.plaza.test", 200, len(PAGE))
    assert r["detail"]["ms"] >= 0
    # Every hop went through the hub's egress: the transcript has each connection, allowed.
    allowed = [e["detail"] for e in transcript(hub, b) if e["kind"] == "egress" and e["detail"]["verdict"] == "allowed"]
    assert len(allowed) == 2 and all(d["host"] == "pages.plaza.test" and d["port"] == site.port for d in allowed)

    # A file into the workspace, with its digest.
    r = step(tool("vm.download", url=f"{base}/data.bin", path="in/data.bin"))
    assert r["detail"]["ok"] and r["detail"]["sha256"] == hashlib.sha256(DATA).hexdigest(), r
    assert r["detail"]["bytes"] == len(DATA) and r["detail"]["path"] == "in/data.bin"
    rc, out = node.runs[b].machine.exec(["sha256sum", "/workspace/in/data.bin"], timeout=60)
    assert rc == 0 and out.decode().split()[0] == hashlib.sha256(DATA).hexdigest()

    # A package from the test's own index, through the proxy; then used.
    r = step(tool("vm.install", packages="apz-hello", index_url=f"{base}/simple/"))  # (the mock's args hold no ']')
    assert r["detail"]["ok"], r["text"]
    assert (f"pages.plaza.test:{site.port}", "/simple/apz-hello/") in site.seen
    r = step(tool("vm.shell", command="python3 -c 'import apz_hello; print(apz_hello.greet())'"))
    assert "hello from a local index" in r["text"], r["text"]

    # Refused and recorded: a host on the fetch blocklist, a private and a loopback address (the law C-003
    # first), a port that is not open, a name that resolves to a private address. None reaches the server.
    seen = len(site.seen)
    for url, law, why in ((f"http://blocked.plaza.test:{site.port}/", None, "on the fetch blocklist"),
                          (f"http://10.0.0.8:{site.port}/", "C-003", None),
                          (f"http://127.0.0.2:{site.port}/", "C-003", None),
                          (f"http://pages.plaza.test:{site.port + 1 if site.port < 65535 else 1}/", None, "is not open")):
        r = step(tool("vm.fetch", url=url))
        assert r["kind"] == "tool_call" and r["detail"]["effect"] == "deny", (r, r["detail"])
        if law:
            assert r["detail"]["law"] == law, r["detail"]
        else:
            assert r["detail"]["reason"] == "egress_refused" and why in r["detail"]["refusal"], r["detail"]
        lift_suspensions(hub, b)  # a violation may suspend vm.fetch (the sanctions schedule): each case on its own
    r = step(tool("vm.fetch", url=f"http://intranet.plaza.test:{site.port}/"))  # refused at the CONNECT
    assert r["kind"] == "tool_result" and not r["detail"]["ok"] and "resolves to 10.0.0.8" in r["text"], r
    assert len(site.seen) == seen
    refused = [e["detail"] for e in transcript(hub, b) if e["kind"] == "egress" and e["detail"]["verdict"] == "refused"]
    assert [d["host"] for d in refused] == ["blocked.plaza.test", "10.0.0.8", "127.0.0.2", "pages.plaza.test",
                                            "intranet.plaza.test"]


def lift_suspensions(hub, cid) -> None:
    """The owner lifts every suspension in force on the agent (what the sanctions schedule gave it)."""
    owner = hub.commands.context("owner")
    c = conduct_commands.load(hub.commands, str(cid))
    for s in conduct_commands.view(c, str(cid), owner.at)["suspensions"]:
        conduct_commands.lift(hub.commands, owner, str(cid), s["id"])
