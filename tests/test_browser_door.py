"""The browser door: what a web page in the owner's browser can make it send is refused at the edge.

Each attack is sent exactly as a browser would send it (a cross-site "simple" request, a form post, a
rebinding Host, a cross-origin WebSocket) to a real hub on 127.0.0.1, and each must be refused with
nothing written: the log position, the plaza's state, the vault and the laws unchanged, and no
program run (a marker file).  tests/browser/ does the same from a real Chromium.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.hubproc import HubProcess, cli, ok
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from agentplaza.api.edge import HubNames

EVIL = "http://evil.example"
MINT = {"amount": 1_000_000_000_000_000}


@pytest.fixture
def hub(folders):
    h = HubProcess(folders, args=("--node", "off")).start()
    yield h
    h.stop()


def position(c) -> int:
    return c.get("/v1/hub").json()["position"]


def marker_command(tmp_path) -> tuple[str, object]:
    marker = tmp_path / "the-page-ran-this"
    return f"touch {marker} && echo sk-stolen", marker


def attacks(url: str, command: str) -> list[tuple[str, str, str, dict, bytes | None]]:
    """(label, method, path, headers, body) as a page on another site makes the browser send them."""
    text = {"Origin": EVIL, "Content-Type": "text/plain;charset=UTF-8", "Sec-Fetch-Site": "cross-site"}
    form = {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}
    provider = {"id": "evil", "preset": "openai", "base_url": "http://127.0.0.1:9/v1",
                "key": {"kind": "command", "command": command}}
    return [
        ("stop", "POST", "/v1/plaza/stop", text, json.dumps({"reason": "a page pressed STOP ALL"}).encode()),
        ("resume", "POST", "/v1/plaza/resume", text, b"{}"),
        ("mint", "POST", "/v1/treasury/mint", text, json.dumps(MINT).encode()),
        ("secret", "POST", "/v1/vault/secrets", text,
         json.dumps({"name": "PLANTED", "value": "x", "bindings": ["egress"]}).encode()),
        ("seal", "POST", "/v1/vault/seal", text, b"{}"),
        ("law", "POST", "/v1/rules", text, json.dumps({"title": "t", "source": "permit(*);"}).encode()),
        ("provider", "POST", "/v1/models/providers", text, json.dumps(provider).encode()),
        ("provider-test", "POST", "/v1/models/providers/evil/test", text, b"{}"),
        # <form method=POST enctype=text/plain> with a field name that makes the body valid JSON
        ("form-text", "POST", "/v1/plaza/stop", {**text, "Content-Type": "text/plain"},
         b'{"reason":"evil","x":"="}'),
        ("form-urlencoded", "POST", "/v1/treasury/mint", form, b"amount=1000"),
        # no Origin at all (an old browser), still text/plain: 415 by the type rule alone
        ("no-origin-text", "POST", "/v1/plaza/stop", {"Content-Type": "text/plain"}, b'{"reason":"evil"}'),
        # a same-site page on another port of this machine
        ("other-port", "POST", "/v1/plaza/stop",
         {"Origin": "http://127.0.0.1:1", "Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
         b'{"reason":"evil"}'),
        ("null-origin", "POST", "/v1/plaza/stop", {"Origin": "null", "Content-Type": "application/json"},
         b'{"reason":"evil"}'),
        # DNS rebinding: the page's own name resolves to 127.0.0.1, so the Host is the page's name
        ("rebind-read", "GET", "/v1/vault/secrets", {"Host": "rebind.evil.example:7700"}, None),
        ("rebind-delete", "DELETE", "/v1/vault/secrets/KEPT", {"Host": "rebind.evil.example:7700"}, None),
        ("rebind-stop", "POST", "/v1/plaza/stop",
         {"Host": "rebind.evil.example:7700", "Content-Type": "application/json"}, b'{"reason":"evil"}'),
        # a GET from a cross-site page that carries no Origin (an <img>, a no-cors GET)
        ("cross-site-get", "GET", "/v1/vault/secrets", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
         None),
    ]


EXPECTED = {
    "no-origin-text": (415, "json_only"),
    "rebind-read": (421, "wrong_host"), "rebind-delete": (421, "wrong_host"), "rebind-stop": (421, "wrong_host"),
}


def test_every_attack_is_refused_and_changes_nothing(hub, tmp_path):
    command, marker = marker_command(tmp_path)
    with hub.client() as c:
        r = c.post("/v1/vault/secrets", json={"name": "KEPT", "value": "kept-value", "bindings": ["egress"]})
        assert r.status_code == 201, r.text
        kept = r.json()["id"]
        before = position(c)
        rules_before = c.get("/v1/rules").json()
        got_through = []
        for label, method, path, headers, body in attacks(hub.url, command):
            r = c.request(method, path.replace("KEPT", kept), headers=headers, content=body)
            want = EXPECTED.get(label, (403, "foreign_origin"))
            if (r.status_code, r.json().get("error", {}).get("code")) != want:
                got_through.append(f"{label}: {r.status_code} {r.text[:120]}")
            assert "access-control-allow-origin" not in r.headers
        assert not got_through, "attacks not refused as expected:\n" + "\n".join(got_through)
        assert position(c) == before
        assert c.get("/v1/plaza").json()["state"] == "running"
        names = [s["name"] for s in c.get("/v1/vault/secrets").json()["secrets"]]
        assert names == ["KEPT"]
        assert c.get("/v1/rules").json() == rules_before
        assert "evil" not in [p["id"] for p in c.get("/v1/models/providers").json()["providers"]]
    assert not marker.exists()


def test_a_cross_origin_websocket_is_refused_and_the_own_origin_is_not(hub):
    ws = hub.url.replace("http://", "ws://") + "/v1/ws"
    for origin in (EVIL, "http://localhost:1", "null"):
        with pytest.raises(InvalidStatus) as e:
            connect(ws, subprotocols=["apz.events.v1"], origin=origin, open_timeout=10).close()
        assert e.value.response.status_code == 403
        assert json.loads(bytes(e.value.response.body))["error"]["code"] == "foreign_origin"
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "apz.events.v1"}
    with hub.client() as c:  # a rebinding page's upgrade: its own name in Host
        r = c.get("/v1/ws", headers={**upgrade, "Host": "rebind.evil.example:7700"})
        assert r.status_code == 421 and r.json()["error"]["code"] == "wrong_host"
    with connect(ws, subprotocols=["apz.events.v1"], origin=hub.url, open_timeout=10) as s:
        assert s.subprotocol == "apz.events.v1"


def test_the_hubs_own_pages_and_plain_clients_still_work(hub):
    with hub.client() as c:
        own = {"Origin": hub.url, "Sec-Fetch-Site": "same-origin"}
        r = c.post("/v1/plaza/stop", json={"reason": "from the console"}, headers=own)
        assert r.status_code == 200, r.text
        r = c.post("/v1/plaza/resume", json={}, headers={"Origin": hub.url.replace("127.0.0.1", "localhost"),
                                                          "Host": f"localhost:{hub.port}"})
        assert r.status_code == 200, r.text
        r = c.post("/v1/plaza/stop", json={"reason": "typed by the owner"}, headers={"Sec-Fetch-Site": "none"})
        assert r.status_code == 200, r.text
        ok(c.post("/v1/plaza/resume", json={}, headers={"content-type": "application/json; charset=utf-8"}))


def test_every_answer_carries_the_safety_headers(hub):
    with hub.client() as c:
        for r in (c.get("/v1/health"), c.get("/v1/nope"), c.post("/v1/plaza/stop", content=b"x"),
                  c.get("/v1/health", headers={"Host": "evil.example"})):
            assert r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["cache-control"] == "no-store"
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
            assert "access-control-allow-origin" not in r.headers
        r = c.options("/v1/plaza/stop", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST",
                                                 "Access-Control-Request-Headers": "content-type"})
        assert r.status_code == 403 and not any(k.startswith("access-control-") for k in r.headers)


def test_a_command_key_needs_the_owner_token_itself(hub, tmp_path):
    command, marker = marker_command(tmp_path)
    body = {"id": "cmdkey", "preset": "openai", "base_url": "http://127.0.0.1:9/v1",
            "key": {"kind": "command", "command": command}}
    with hub.client() as c:  # loopback trust alone: refused
        before = position(c)
        r = c.post("/v1/models/providers", json=body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "owner_token_required", r.text
        r = c.patch("/v1/models/providers/openai", json={"key": body["key"]})
        assert r.status_code == 403 and r.json()["error"]["code"] == "owner_token_required", r.text
        assert position(c) == before
    assert not marker.exists()
    # The CLI shows the command and asks; without a terminal and without --yes it does nothing.
    r = cli(hub, "models", "add", "cmdkey", "--preset", "openai", "--base-url", "http://127.0.0.1:9/v1",
            "--command", command)
    assert r.returncode != 0 and command in r.stderr + r.stdout and "--yes" in r.stderr
    # With --yes it sends the owner token from the state folder, and the hub takes it.
    r = cli(hub, "models", "add", "cmdkey", "--preset", "openai", "--base-url", "http://127.0.0.1:9/v1",
            "--command", command, "--yes")
    assert r.returncode == 0, r.stderr
    assert not marker.exists()  # setting it runs nothing; a call or a test would


def test_loopback_trust_off_wants_the_token_or_a_sign_in(folders):
    h = HubProcess(folders, args=("--node", "off", "--loopback-trust", "off")).start()
    try:
        token = (folders.state / "owner-token").read_text().strip()
        link = next(line.split(": ", 1)[1].split(" ", 1)[-1] for line in h.output.splitlines()
                    if "/v1/auth/link?code=" in line)
        link = link[link.index("http"):]
        import httpx

        with httpx.Client(base_url=h.url, timeout=30) as c:
            r = c.get("/v1/plaza")
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
            assert c.get("/v1/plaza", headers={"Authorization": f"Bearer {token}"}).status_code == 200
            r = c.post("/v1/auth/session", json={"token": "apz_owner_wrong"})
            assert r.status_code == 401
            r = c.post("/v1/auth/session", json={"token": token})
            assert r.status_code == 200 and r.json()["signed_in"] is True
            cookie = r.headers["set-cookie"]
            for part in ("apz_session=", "HttpOnly", "Secure", "SameSite=Strict", "Max-Age=43200"):
                assert part in cookie
            value = cookie.split(";", 1)[0].split("=", 1)[1]
        with httpx.Client(base_url=h.url, timeout=30, cookies={"apz_session": value}) as c:
            assert c.get("/v1/plaza").status_code == 200
            # A session is not the token itself: it cannot make the hub run a program.
            r = c.post("/v1/models/providers", json={"id": "x", "preset": "openai",
                                                     "key": {"kind": "command", "command": "true"}})
            assert r.status_code == 403 and r.json()["error"]["code"] == "owner_token_required"
            assert c.request("DELETE", "/v1/auth/session").status_code == 200
        with httpx.Client(timeout=30) as c:
            r = c.get(link)
            assert r.status_code == 303 and "apz_session=" in r.headers["set-cookie"]
            r = c.get(link)
            assert r.status_code == 401 and r.json()["error"]["code"] == "sign_in_link_used"
        # The CLI on this machine reads the token file and works unchanged.
        r = cli(h, "plaza", "state")
        assert r.returncode == 0, r.stderr
    finally:
        h.stop()


def test_apid_refuses_a_bad_loopback_trust_or_public_url(folders):
    for flags, word in ((["--loopback-trust", "maybe"], "--loopback-trust"),
                        (["--public-url", "ftp://x"], "public URL")):
        r = subprocess.run([sys.executable, "-m", "agentplaza.apid", "--bind", "127.0.0.1:1", *flags],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and word in r.stderr


@pytest.mark.parametrize("host, bound, names, want", [
    ("127.0.0.1:7700", None, (), True),
    ("localhost:7700", None, (), True),
    ("[::1]:7700", None, (), True),
    ("LOCALHOST", None, (), True),
    ("rebind.evil.example:7700", None, (), False),
    ("127.0.0.1.nip.io:7700", None, (), False),
    ("192.0.2.5:7700", None, (), False),
    ("192.0.2.5:7700", "0.0.0.0", (), True),
    ("192.0.2.5:7700", "192.0.2.5", (), True),
    ("192.0.2.6:7700", "192.0.2.5", (), False),
    ("hub.example.net", None, ("hub.example.net",), True),
    ("", None, (), False),
    ("127.0.0.1:port", None, (), False),
])
def test_which_hosts_are_the_hubs_own(host, bound, names, want):
    assert HubNames.make(bound, names).host_ok(host) is want


@pytest.mark.parametrize("origin, host, want", [
    ("http://127.0.0.1:7700", "127.0.0.1:7700", True),
    ("http://127.0.0.1:7701", "127.0.0.1:7700", False),
    ("https://127.0.0.1:7700", "127.0.0.1:7700", False),
    ("http://localhost:7700", "127.0.0.1:7700", False),
    ("http://evil.example", "127.0.0.1:7700", False),
    ("null", "127.0.0.1:7700", False),
    ("http://localhost", "localhost:80", True),
    ("https://hub.example.net", "127.0.0.1:7700", True),  # the owner's public URL
])
def test_which_origins_are_the_hubs_own(origin, host, want):
    names = HubNames.make(None, public_urls=["https://hub.example.net"])
    assert names.origin_ok(origin, host, "http") is want
