"""The web tools' pieces in process, no VM: the harness's fetch and download through the hub's real egress
proxy (over a real channel; only 127.0.0.1 is dialled, let through by ``allow_addresses``), HTML to
text, the URL and package checks, the forwarder's plain-HTTP proxy requests turned into CONNECT, and the
hub's precheck of a web tool's target."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading

import pytest

from agentplaza.runtime.egress import EgressPolicy, EgressProxy, Refused, url_target
from vmm.channel import Channel, ChannelClosed, StreamReset
from vmm.guest import contract, harness


class Site(http.server.ThreadingHTTPServer):
    def __init__(self, routes):
        self.routes = routes

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(h):
                found = self.routes.get(h.path)
                if found is None:
                    h.send_error(404)
                    return
                ctype, body = found
                h.send_response(200)
                h.send_header("Content-Type", ctype)
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)

            def log_message(h, *a):
                pass

        super().__init__(("127.0.0.1", 0), H)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Egress:
    """The guest's side of the egress service on a local port (what channeld and the forwarder do), the
    hub's real proxy at the other end of a channel."""

    def __init__(self, policy: EgressPolicy, names: dict):
        a, b = socket.socketpair()
        self.records: list = []
        self.proxy = EgressProxy(policy, lambda cid, h, p: None, lambda cid, d: self.records.append(d),
                                 resolver=lambda h, p: list(names[h]), blocklist=lambda: ("blocked.plaza.test",))
        self.hub = Channel.over_socket(a, role="host", on_open=lambda st: self.proxy.handle(7, st)).start()
        self.guest = Channel.over_socket(b, role="guest").start()
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), daemon=True).start()

    def _carry(self, conn):
        st = self.guest.open("egress")

        def down():
            try:
                while data := st.read():
                    conn.sendall(data)
            except (ChannelClosed, StreamReset, OSError):
                pass
            conn.close()

        threading.Thread(target=down, daemon=True).start()
        try:
            while data := conn.recv(65536):
                st.write(data)
            st.close()
        except (ChannelClosed, StreamReset, OSError):
            pass

    def close(self):
        self.srv.close()
        self.guest.close()
        self.hub.close()


PAGE = b"<html><head><title>T</title><script>x=1</script></head><body><h1>Hi</h1><p>a &amp; b</p></body></html>"


@pytest.fixture
def net():
    data = bytes(range(256)) * 10
    site = Site({"/": ("text/html; charset=utf-8", PAGE), "/d.bin": ("application/octet-stream", data),
                 "/t.txt": ("text/plain", b"plain text")})
    port = site.server_address[1]
    eg = Egress(EgressPolicy(ports=frozenset({port}), allow_addresses=frozenset({"127.0.0.1"})),
                {"pages.plaza.test": ["127.0.0.1"], "blocked.plaza.test": ["127.0.0.1"],
                 "intranet.plaza.test": ["10.0.0.8"]})
    yield site, port, eg, data
    eg.close()
    site.shutdown()


def test_fetch_and_download_through_the_real_egress_proxy(net, tmp_path):
    site, port, eg, data = net
    out = harness.tool_fetch({"url": f"http://pages.plaza.test:{port}/"}, str(tmp_path), proxy_port=eg.port)
    assert out.startswith(f"URL: http://pages.plaza.test:{port}/\nstatus: 200\ncontent type: text/html")
    assert "title: T" in out and out.endswith("Hi\na & b") and "x=1" not in out
    assert (out.meta["host"], out.meta["status"], out.meta["bytes"]) == ("pages.plaza.test", 200, len(PAGE))
    assert eg.records[-1]["verdict"] == "allowed" and eg.records[-1]["address"] == "127.0.0.1"
    cut = harness.tool_fetch({"url": f"http://pages.plaza.test:{port}/t.txt", "max_bytes": 5}, proxy_port=eg.port)
    assert "bytes: 5 (cut at 5)" in cut and cut.endswith("plain")
    binary = harness.tool_fetch({"url": f"http://pages.plaza.test:{port}/d.bin"}, proxy_port=eg.port)
    assert "binary content" in binary

    got = harness.tool_download({"url": f"http://pages.plaza.test:{port}/d.bin", "path": "sub/d.bin"}, str(tmp_path),
                                proxy_port=eg.port)
    assert got.meta["sha256"] == hashlib.sha256(data).hexdigest() and (tmp_path / "sub/d.bin").read_bytes() == data
    with pytest.raises(harness.ToolError, match="status 404; nothing was saved"):
        harness.tool_download({"url": f"http://pages.plaza.test:{port}/nope", "path": "n"}, str(tmp_path),
                              proxy_port=eg.port)
    assert not (tmp_path / "n").exists()
    with pytest.raises(harness.ToolError, match="outside"):
        harness.tool_download({"url": f"http://pages.plaza.test:{port}/d.bin", "path": "../x"}, str(tmp_path),
                              proxy_port=eg.port)

    # The proxy's refusals reach the tool with the reason; nothing reaches the server.
    for host, why in (("blocked.plaza.test", "on the fetch blocklist"), ("intranet.plaza.test", "resolves to 10.0.0.8"),
                      ("127.0.0.2", "a loopback address")):
        with pytest.raises(harness.Refused, match=why):
            harness.tool_fetch({"url": f"http://{host}:{port}/"}, proxy_port=eg.port)
    with pytest.raises(harness.Refused, match="port 1 is not open"):
        harness.tool_fetch({"url": "http://pages.plaza.test:1/"}, proxy_port=eg.port)


def test_html_to_text():
    title, text = harness.html_text("<title> A  page </title><style>b{}</style><div>one <b>two</b></div>"
                                    "<ul><li>x</li><li>y</li></ul><noscript>no</noscript>&lt;ok&gt;")
    assert title == "A page" and text == "one two\nx\ny\n<ok>"


@pytest.mark.parametrize("url", ["", "ftp://x/", "file:///etc/passwd", "http://", "http://u:p@x/", "x" * 3000,
                                 "http://x:99999/", 7])
def test_bad_urls_are_refused_on_both_sides(url):
    with pytest.raises(harness.ToolError):
        harness.web_url(url)
    with pytest.raises(Refused):
        url_target(url)


def test_url_targets():
    assert url_target("https://example.org/x") == ("example.org", 443)
    assert url_target("http://example.org/") == ("example.org", 80)
    assert url_target("http://[2606:4700::1111]:8080/") == ("2606:4700::1111", 8080)


def test_install_takes_names_never_options():
    argv = harness.install_command({"packages": ["apz-hello", "requests[socks]==2.32.3"],
                                    "index_url": "http://pages.plaza.test:8080/simple/"})
    assert argv[-2:] == ["apz-hello", "requests[socks]==2.32.3"] and "--user" in argv
    assert argv[argv.index("--index-url") + 1] == "http://pages.plaza.test:8080/simple/"
    assert argv[argv.index("--trusted-host") + 1] == "pages.plaza.test"
    assert "--trusted-host" not in harness.install_command({"packages": ["x"], "index_url": "https://pypi.org/simple/"})
    assert harness.install_command({"packages": ["jq"], "manager": "apt"})[-1] == "jq"
    assert harness.install_command({"packages": "a, b c"})[-3:] == ["a", "b", "c"]
    for bad in ({"packages": ["--index-url=http://evil/"]}, {"packages": ["-e", "."]}, {"packages": ["a b"]},
                {"packages": ["x; rm -rf /"]}, {"packages": []}, {"packages": " "}, {"packages": "x --pre"},
                {"packages": ["x"] * (contract.INSTALL_MAX_PACKAGES + 1)}, {"packages": ["x"], "manager": "npm"},
                {"packages": ["x"], "manager": "apt", "index_url": "http://x/"},
                {"packages": ["x"], "index_url": "file:///tmp"}):
        with pytest.raises(harness.ToolError):
            harness.install_command(bad)


def test_the_forwarder_turns_a_plain_proxy_request_into_connect():
    c1, c2 = socket.socketpair()
    u1, u2 = socket.socketpair()
    t = threading.Thread(target=lambda: harness.as_connect(c2, u1) and harness.splice(c2, u1), daemon=True)
    t.start()
    c1.sendall(b"GET http://pages.plaza.test:8080/simple/x/?a=1 HTTP/1.1\r\nHost: pages.plaza.test:8080\r\n"
               b"Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n")
    u2.settimeout(10)
    head = u2.recv(4096)
    assert head == b"CONNECT pages.plaza.test:8080 HTTP/1.1\r\nHost: pages.plaza.test:8080\r\n\r\n"
    u2.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    req = b""
    while b"\r\n\r\n" not in req:
        req += u2.recv(4096)
    lines = req.split(b"\r\n")
    assert lines[0] == b"GET /simple/x/?a=1 HTTP/1.1"
    assert b"Host: pages.plaza.test:8080" in lines and b"Accept: */*" in lines and b"Connection: close" in lines
    assert not any(x.lower().startswith(b"proxy-") or x == b"Connection: keep-alive" for x in lines)
    u2.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    u2.close()
    c1.settimeout(10)
    got = b""
    while chunk := c1.recv(4096):
        got += chunk
    assert got.endswith(b"ok")

    # Refused by the hub: the client reads the hub's answer, and nothing more goes up.
    c1, c2 = socket.socketpair()
    u1, u2 = socket.socketpair()
    threading.Thread(target=harness.as_connect, args=(c2, u1), daemon=True).start()
    c1.sendall(b"GET http://blocked.plaza.test/ HTTP/1.1\r\nHost: blocked.plaza.test\r\n\r\n")
    u2.settimeout(10)
    assert u2.recv(4096).startswith(b"CONNECT blocked.plaza.test:80 ")
    u2.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 8\r\nConnection: close\r\n\r\nblocked\n")
    u2.shutdown(socket.SHUT_WR)
    c1.settimeout(10)
    got = b""
    while chunk := c1.recv(4096):
        got += chunk
    assert got.startswith(b"HTTP/1.1 403") and got.endswith(b"blocked\n")
    # Anything but CONNECT or an http:// URL: 400, and nothing goes up.
    c1, c2 = socket.socketpair()
    u1, u2 = socket.socketpair()
    threading.Thread(target=harness.as_connect, args=(c2, u1), daemon=True).start()
    c1.sendall(b"GET /relative HTTP/1.1\r\n\r\n")
    c1.settimeout(10)
    assert c1.recv(4096).startswith(b"HTTP/1.1 400")
    u2.settimeout(5)
    assert u2.recv(10) == b""


def test_the_hubs_precheck_refuses_before_any_lookup():
    def never(h, p):
        raise AssertionError("resolved")

    proxy = EgressProxy(EgressPolicy(), lambda *a: None, lambda *a: None, resolver=never,
                        blocklist=lambda: ("example.com",))
    for host, port, why in (("api.example.com", 443, "fetch blocklist"), ("10.0.0.8", 80, "a private address"),
                            ("127.0.0.1", 443, "a loopback address"), ("example.org", 22, "port 22 is not open"),
                            ("metadata.google.internal", 80, "cloud metadata"), ("bad host", 80, "bad host name")):
        with pytest.raises(Refused, match=why):
            proxy.precheck(host, port)
    proxy.precheck("example.org", 443)
    assert EgressProxy(EgressPolicy(enabled=False), None, None).precheck  # exists on a switched-off hub too
    with pytest.raises(Refused, match="switched off"):
        EgressProxy(EgressPolicy(enabled=False), None, None).precheck("example.org", 443)
    # allow_addresses lets exactly those through, never the metadata address
    p = EgressProxy(EgressPolicy(allow_addresses=frozenset({"127.0.0.1", "169.254.169.254"})), None, None)
    p.precheck("127.0.0.1", 80)
    for host in ("127.0.0.2", "169.254.169.254"):
        with pytest.raises(Refused):
            p.precheck(host, 80)
