"""A hosted hub, black-box: HTTPS with its own certificate, the owner token or a sign-in for every owner
request, join codes and a node's redemption, owner token rotation, and owner-only files under umask 022.

One real apid for the module, served over HTTPS on 127.0.0.2 (a loopback address this test owns;
``--https`` makes it hosted there) with loopback trust off, so every caller must show the owner token
or a session, as a caller from another machine must.  Each test that counts attempts per address
calls from its own source address (127.0.0.x), so the limits of one test do not reach another.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import ssl
import stat
import subprocess
import sys

import httpx
import pytest
from support.hubproc import HubProcess, cli, free_port

from agentplaza.joincode import parse

pytestmark = pytest.mark.xdist_group("hosting")

HOST = "127.0.0.2"
INVALID = {"code": "join_code_invalid", "message": "this join code is not valid"}
#: A node's Ed25519 public key as it sends it (32 bytes, base64url, no padding); the hub only keeps it.
KEY = base64.urlsafe_b64encode(bytes(range(32))).decode().rstrip("=")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("hosted")
    f = Folders(root / "state", root / "config", root / "data")  # made by apid itself, under umask 022
    port = free_port()
    h = HubProcess(f, port=port, host=HOST, umask=0o022, args=(
        "--https", "--loopback-trust", "off", "--node", "local", "--public-url", f"https://{HOST}:{port}"))
    h.start()
    h.token = (f.state / "owner-token").read_text().strip()
    h.pin = next(line.split("--pin ")[1].strip() for line in h.output.splitlines() if "--pin " in line)
    yield h
    h.stop()


def http(hub, source: str = "127.0.0.1", token: str | None = None) -> httpx.Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=hub.url, headers=headers, timeout=30,
                        transport=httpx.HTTPTransport(verify=False, local_address=source))


def owner(hub, source: str = "127.0.0.1") -> httpx.Client:
    return http(hub, source, hub.token)


def run(hub, *args: str, stdin: str | None = None):
    return cli(hub, "--hub", hub.url, "--pin", hub.pin, "--token", hub.token, *args, stdin=stdin)


def redeem(hub, code: str, source: str, key: str = KEY) -> httpx.Response:
    with http(hub, source) as c:
        return c.post("/v1/node/join", json={"code": code, "public_key": key})


def make_code(hub, label: str = "atlas", ttl: int = 15) -> str:
    with owner(hub) as c:
        r = c.post("/v1/join-codes", json={"label": label, "ttl_min": ttl})
    assert r.status_code == 200, r.text
    return r.json()["code"]["code"]


def codes(hub) -> dict:
    with owner(hub) as c:
        return {x["id"]: x for x in c.get("/v1/join-codes").json()["codes"]}


# -- HTTPS and its certificate ---------------------------------------------------------------------------


def test_the_hub_serves_https_with_its_own_certificate_and_prints_the_fingerprint_pin_checks(hub):
    pem = (hub.folders.state / "hub-cert.pem").read_text()
    assert hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest() == hub.pin
    served = ssl.get_server_certificate((HOST, hub.port))
    assert hashlib.sha256(ssl.PEM_cert_to_DER_cert(served)).hexdigest() == hub.pin
    assert "-----BEGIN PRIVATE KEY-----" in (hub.folders.state / "hub-key.pem").read_text()
    with owner(hub) as c:
        info = c.get("/v1/hub").json()
    assert info["https"] is True and info["fingerprint"] == hub.pin and info["address"] == hub.url


def test_the_command_line_with_the_pin_works_and_a_wrong_pin_or_no_pin_is_refused(hub):
    r = run(hub, "hub", "status")
    assert r.returncode == 0, r.stderr
    assert hub.url in r.stdout
    wrong = "0" * 64
    r = cli(hub, "--hub", hub.url, "--pin", wrong, "--token", hub.token, "hub", "status")
    assert r.returncode == 1 and "pin_mismatch" in r.stderr and "nothing was sent" in r.stderr
    r = cli(hub, "--hub", hub.url, "--token", hub.token, "hub", "status")  # on the hub's machine: pinned by itself
    assert r.returncode == 0, r.stderr
    elsewhere = dict(hub.env, APZ_STATE_DIR=str(hub.folders.data / "elsewhere"))  # a machine without its cert
    r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "--hub", hub.url, "--token", hub.token, "hub",
                        "status"], env=elsewhere, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1 and "certificate verify failed" in r.stderr  # self-signed: not trusted unpinned


def test_the_mcp_server_may_answer_other_machines_only_on_a_hub_that_serves_https(hub):
    """The guide: ``--remote`` "only when the hub serves HTTPS". This hub does (a plain one refuses it:
    tests/test_hub_mcp.py)."""
    r = run(hub, "mcp", "server", "enable", "--remote")
    assert r.returncode == 0, r.stderr
    status = run(hub, "--json", "mcp", "server", "status")
    assert status.returncode == 0 and json.loads(status.stdout)["bind"] == "remote", status.stdout
    assert run(hub, "mcp", "server", "disable").returncode == 0


def test_a_plain_http_request_to_the_hosted_hub_gets_no_owner_data(hub):
    with socket.create_connection((HOST, hub.port), timeout=10) as s:
        s.sendall(f"GET /v1/hub HTTP/1.1\r\nHost: {HOST}:{hub.port}\r\nAuthorization: Bearer {hub.token}\r\n"
                  "Connection: close\r\n\r\n".encode())
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    assert b"HTTP/1.1 200" not in got and b"fingerprint" not in got and b"version" not in got


def test_every_owner_request_needs_the_token_or_a_session(hub):
    with http(hub) as c:
        r = c.get("/v1/overview")
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        assert c.get("/v1/join-codes").status_code == 401
        assert c.post("/v1/join-codes", json={"label": "x"}).status_code == 401
    with http(hub, token="apz_owner_not-the-token") as c:
        assert c.get("/v1/overview").status_code == 401
    with owner(hub) as c:
        assert c.get("/v1/overview").status_code == 200


def test_signing_in_sets_a_strict_secure_http_only_cookie_for_12_hours_and_signing_out_ends_it(hub):
    with http(hub, "127.0.0.20") as c:
        refused = c.post("/v1/auth/session", json={"token": "apz_owner_wrong"})
        assert refused.status_code == 401 and set(refused.json()["error"]) == {"code", "message"}
        assert "set-cookie" not in refused.headers
        r = c.post("/v1/auth/session", json={"token": hub.token})
        assert r.status_code == 200, r.text
        cookie = r.headers["set-cookie"]
        attrs = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")}
        assert {"httponly", "secure", "samesite", "max-age", "path"} <= set(attrs)
        assert attrs["samesite"] == "SameSite=Strict" and attrs["max-age"] == f"Max-Age={12 * 3600}"
        value = cookie.split(";")[0].split("=", 1)[1]
        with http(hub, "127.0.0.20") as fresh:
            fresh.cookies.set("apz_session", value)
            assert fresh.get("/v1/overview").status_code == 200  # the cookie alone is the owner
            out = fresh.request("DELETE", "/v1/auth/session")
            assert out.status_code == 200 and "Max-Age=0" in out.headers["set-cookie"]
        with http(hub, "127.0.0.20") as after:
            after.cookies.set("apz_session", value)
            assert after.get("/v1/overview").status_code == 401


def test_sign_in_attempts_are_limited_per_address(hub):
    with http(hub, "127.0.0.21") as c:
        answers = [c.post("/v1/auth/session", json={"token": "apz_owner_guess"}) for _ in range(10)]
        assert {a.status_code for a in answers} == {401}
        r = c.post("/v1/auth/session", json={"token": hub.token})  # even the right token waits now
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert "set-cookie" not in r.headers
    with http(hub, "127.0.0.22") as other:  # another address is not held back
        assert other.post("/v1/auth/session", json={"token": hub.token}).status_code == 200


# -- Join codes ----------------------------------------------------------------------------------------


def test_a_join_code_from_the_command_line_is_shown_once_and_carries_the_address_and_the_fingerprint(hub):
    r = run(hub, "nodes", "code", "--label", "atlas", "--ttl", "15")
    assert r.returncode == 0, r.stderr
    text = next(w for w in r.stdout.split() if w.startswith("apzjoin1."))
    code = parse(text)
    assert code.hub == hub.url and code.pin == hub.pin
    listed = run(hub, "--json", "nodes", "codes")
    assert listed.returncode == 0, listed.stderr
    rows = {c["id"]: c for c in json.loads(listed.stdout)["codes"]}
    assert rows[code.id]["state"] == "open" and rows[code.id]["label"] == "atlas"
    assert code.secret not in listed.stdout and text not in listed.stdout  # listed, never shown again
    with owner(hub) as c:
        events = c.get("/v1/events", params={"kinds": "join_code", "limit": 1000}).json()["events"]
    made = [e for e in events if e["data"]["kind"] == "JoinCode.Created" and e["data"]["code_id"] == code.id]
    assert made and made[0]["data"]["secret_sha256"] == hashlib.sha256(code.secret.encode()).hexdigest()
    assert code.secret not in json.dumps(events)


def test_redeeming_a_code_gives_the_node_its_name_and_cid_range_once(hub):
    first = make_code(hub, "atlas")
    r = redeem(hub, first, "127.0.0.30")
    assert r.status_code == 200, r.text
    n = r.json()
    assert n == {"node": "n1", "cid_first": 1000, "cid_last": 1099}  # the module's first node to join
    again = redeem(hub, first, "127.0.0.31")
    assert again.status_code == 403 and again.json()["error"] == INVALID
    listed = codes(hub)[parse(first).id]
    assert listed["state"] == "used" and listed["node"] == n["node"]
    second = redeem(hub, make_code(hub, "boreas"), "127.0.0.32").json()
    assert second == {"node": "n2", "cid_first": 1100, "cid_last": 1199}
    with owner(hub) as c:
        nodes = {x["name"]: x for x in c.get("/v1/nodes").json()["nodes"]}
        events = c.get("/v1/events", params={"kinds": "node_registry", "limit": 1000}).json()["events"]
    assert nodes["n0"]["cid_first"] == 3
    assert nodes[n["node"]]["cid_first"] == n["cid_first"] and nodes[n["node"]]["label"] == "atlas"
    assert nodes[second["node"]]["label"] == "boreas"
    joined = [e["data"] for e in events if e["data"]["kind"] == "NodeRegistry.NodeJoined"]
    assert {j["name"]: j["public_key"] for j in joined}[n["node"]] == KEY


def test_three_failed_redemptions_end_a_code_and_every_refusal_reads_the_same(hub):
    text = make_code(hub, "cassini")
    code = parse(text)
    wrong = code.__class__(code.hub, code.pin, code.id, code.secret[:-2] + "xx").text()
    for i in range(3):
        r = redeem(hub, wrong, f"127.0.0.4{i}")
        assert r.status_code == 403 and r.json()["error"] == INVALID
    assert codes(hub)[code.id]["failures"] == 3 and codes(hub)[code.id]["state"] == "ended"
    r = redeem(hub, text, "127.0.0.43")  # the right secret, too late
    assert r.status_code == 403 and r.json()["error"] == INVALID
    unknown = code.__class__(code.hub, code.pin, "0123456789ab", code.secret).text()
    for bad in (unknown, "apzjoin1.!!", "not a code", ""):
        r = redeem(hub, bad, "127.0.0.44")
        assert r.status_code == 403 and r.json()["error"] == INVALID


def test_five_redemption_attempts_a_minute_from_one_address_then_the_same_message(hub):
    text = make_code(hub, "dione")
    for _ in range(5):
        r = redeem(hub, "apzjoin1.junk", "127.0.0.50")
        assert r.status_code == 403 and r.json()["error"] == INVALID
    r = redeem(hub, text, "127.0.0.50")  # a good code, from the address that tried too often
    assert r.status_code == 403 and r.json()["error"] == INVALID
    row = codes(hub)[parse(text).id]
    assert row["state"] == "open" and row["failures"] == 0  # the code was not even looked at
    assert redeem(hub, text, "127.0.0.51").status_code == 200


def test_an_unused_code_can_be_revoked_and_a_used_one_cannot(hub):
    text = make_code(hub, "europa")
    cid = parse(text).id
    r = run(hub, "nodes", "codes", "revoke", cid)
    assert r.returncode == 0, r.stderr
    assert codes(hub)[cid]["state"] == "revoked"
    r = redeem(hub, text, "127.0.0.60")
    assert r.status_code == 403 and r.json()["error"] == INVALID
    used = make_code(hub, "fornax")
    assert redeem(hub, used, "127.0.0.61").status_code == 200
    r = run(hub, "nodes", "codes", "revoke", parse(used).id)
    assert r.returncode == 1 and "join_code_used" in r.stderr
    r = run(hub, "nodes", "codes", "revoke", cid)
    assert r.returncode == 1 and "join_code_closed" in r.stderr


def test_a_code_lives_1_to_60_minutes(hub):
    for ttl in (0, 61):
        r = run(hub, "nodes", "code", "--label", "x", "--ttl", str(ttl))
        assert r.returncode == 1 and "invalid_ttl" in r.stderr
    with owner(hub) as c:
        made = c.post("/v1/join-codes", json={"label": "gaia"}).json()["code"]  # no ttl: 15 minutes
        listed = {x["id"]: x for x in c.get("/v1/join-codes").json()["codes"]}[made["id"]]
    import datetime as dt

    life = dt.datetime.fromisoformat(listed["expires_at"]) - dt.datetime.fromisoformat(listed["made_at"])
    assert life == dt.timedelta(minutes=15)


def test_a_redemption_with_a_bad_public_key_uses_nothing(hub):
    text = make_code(hub, "hydra")
    r = redeem(hub, text, "127.0.0.70", key="short")
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_public_key"
    assert codes(hub)[parse(text).id]["state"] == "open"


def test_a_copy_of_the_hub_state_folder_holds_no_usable_code(hub, tmp_path):
    made = [parse(make_code(hub, f"scan-{i}")) for i in range(3)]
    copy = tmp_path / "copy"
    for folder in (hub.folders.state, hub.folders.config, hub.folders.data):
        shutil.copytree(folder, copy / folder.name, ignore=shutil.ignore_patterns("*.sock"),
                        ignore_dangling_symlinks=True, symlinks=True)
    blobs = [p.read_bytes() for p in copy.rglob("*") if p.is_file()]
    assert blobs
    for code in made:
        for needle in (code.secret.encode(), code.text().encode()):
            assert not any(needle in b for b in blobs), "a join code's secret is in the hub's files"
        assert any(hashlib.sha256(code.secret.encode()).hexdigest().encode() in b for b in blobs)  # its hash is
    for code in made:  # and the codes themselves still work: nothing was used up by the copy
        assert codes(hub)[code.id]["state"] == "open"


# -- The owner token's rotation ------------------------------------------------------------------------


def test_rotating_the_owner_token_from_the_hubs_machine_replaces_the_old_one_at_once(hub):
    old = hub.token
    with http(hub, "127.0.0.80") as c:
        session = c.post("/v1/auth/session", json={"token": old})
        assert session.status_code == 200
        value = session.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    r = run(hub, "hub", "rotate-token", "--yes")
    assert r.returncode == 0, r.stderr
    new = next(w for w in r.stdout.split() if w.startswith("apz_owner_"))
    assert new != old and (hub.folders.state / "owner-token").read_text().strip() == new
    with http(hub, token=old) as c:
        assert c.get("/v1/overview").status_code == 401
    with http(hub, "127.0.0.80") as c:
        c.cookies.set("apz_session", value)
        assert c.get("/v1/overview").status_code == 401  # a sign-in made with the old token ends with it
    hub.token = new
    with owner(hub) as c:
        assert c.get("/v1/overview").status_code == 200
        events = c.get("/v1/events", params={"kinds": "owner_token", "limit": 100}).json()["events"]
    rotated = [e for e in events if e["data"]["kind"] == "OwnerToken.Rotated"]
    assert rotated and rotated[-1]["data"]["token_sha256"] == hashlib.sha256(new.encode()).hexdigest()
    assert new not in json.dumps(events)


# -- Owner-only files (last: it walks what the whole session wrote) ------------------------------------

#: noded's machines folder: the jailed QEMU (an unprivileged uid) must pass through it (adapters.kvm.noded).
TRAVERSABLE = {"vms": 0o711}


def test_every_file_the_hub_wrote_under_umask_022_is_0600_and_every_folder_0700(hub):
    r = run(hub, "hub", "login", hub.url, "--token", "-", stdin=hub.token + "\n")  # cli.json, written by the CLI
    assert r.returncode == 0, r.stderr
    assert (hub.folders.config / "cli.json").exists()

    def walk() -> list[str]:
        wrong = []
        for folder in (hub.folders.state, hub.folders.config, hub.folders.data):
            for p in [folder, *folder.rglob("*")]:
                st = os.lstat(p)
                mode = stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    if mode != TRAVERSABLE.get(p.name, 0o700):
                        wrong.append(f"{p} {mode:04o}")
                elif stat.S_ISREG(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                    if mode != 0o600:
                        wrong.append(f"{p} {mode:04o}")
        return wrong

    names = {p.name for p in hub.folders.state.iterdir()}
    assert {"plaza.sqlite-wal", "read-models.sqlite-wal", "hub-cert.pem", "hub-key.pem", "noded.log"} <= names
    assert walk() == []
    hub.stop()  # and after a clean stop (the checkpoint files, the last writes)
    assert walk() == []
