"""The E2B API without a VM: keys (shown once, only the SHA-256 kept, 0600), who opens /e2b (an e2b_ key
as X-API-Key or Bearer; not the owner token; not a revoked key), fields the hub does not serve refused,
the CLI's key actions, and the gateway's routing and refusals (loopback only, one audit line each)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat

import httpx
import pytest
from support.deadline import until
from support.hubproc import HubProcess, cli, free_port

from agentplaza.runtime.e2bgate import BadRequest, Gateway, parse_head, sandbox_named


@pytest.fixture
def hub(folders):
    h = HubProcess(folders, args=("--node", "off")).start()
    yield h
    h.stop()


def make_key(h: HubProcess, label: str = "laptop") -> dict:
    r = h.client().post("/v1/e2b/keys", json={"label": label})
    assert r.status_code == 200, r.text
    return r.json()


def test_key_shown_once_only_its_hash_kept_in_a_private_file(hub, folders):
    made = make_key(hub)
    assert made["key"].startswith("e2b_")
    assert made["env"][0].endswith("/e2b") and made["env"][0].startswith("export E2B_API_URL=http://")
    assert made["env"][1] == f"export E2B_API_KEY={made['key']}"
    assert made["env"][2].startswith("export E2B_SANDBOX_URL=http://127.0.0.1:")
    path = folders.state / "e2b-keys.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert made["key"] not in text
    assert hashlib.sha256(made["key"].encode()).hexdigest() in text
    listed = hub.client().get("/v1/e2b/keys").json()["keys"]
    assert listed == [{"id": made["id"], "label": "laptop", "created": made["created"]}]


def test_who_opens_e2b(hub, folders):
    made = make_key(hub)
    token = (folders.state / "owner-token").read_text().strip()
    with httpx.Client(base_url=hub.url, timeout=30) as c:
        assert c.get("/e2b/v2/sandboxes").status_code == 401
        owner = c.get("/e2b/v2/sandboxes", headers={"Authorization": f"Bearer {token}"})
        assert owner.status_code == 401 and "owner token is not one" in owner.json()["message"]
        assert c.get("/e2b/v2/sandboxes", headers={"X-API-Key": "e2b_" + "0" * 40}).status_code == 401
        assert c.get("/e2b/v2/sandboxes", headers={"X-API-Key": made["key"]}).json() == []
        assert c.get("/e2b/sandboxes", headers={"Authorization": f"Bearer {made['key']}"}).json() == []
        assert hub.client().delete(f"/v1/e2b/keys/{made['id']}").status_code == 200
        revoked = c.get("/e2b/v2/sandboxes", headers={"X-API-Key": made["key"]})
        assert revoked.status_code == 401
        assert hub.client().delete(f"/v1/e2b/keys/{made['id']}").json()["error"]["code"] == "e2b_key_not_found"


def test_fields_not_served_are_refused_and_nothing_starts(hub):
    key = make_key(hub)["key"]
    with httpx.Client(base_url=hub.url, timeout=30, headers={"X-API-Key": key}) as c:
        for extra in ({"mcp": {}}, {"volumeMounts": []}, {"iam": {}}, {"autoResume": {"enabled": True}},
                      {"nonsense": 1}):
            r = c.post("/e2b/v2/sandboxes", json={"templateID": "base", **extra})
            assert r.status_code == 422, r.text
            assert "does not serve the field" in r.json()["message"] and r.json()["code"] == 422
        assert c.post("/e2b/v2/sandboxes", json={"templateID": "base", "timeout": "5"}).status_code == 422
        assert c.post("/e2b/v2/sandboxes", json=[1]).status_code == 422
        assert c.get("/e2b/v2/sandboxes").json() == []
        no_node = c.post("/e2b/v2/sandboxes", json={"templateID": "base"})
        assert no_node.status_code == 503 and "no node" in no_node.json()["message"]
        assert c.get("/e2b/sandboxes/inope").status_code == 404
        assert c.delete("/e2b/sandboxes/inope").status_code == 404
        assert c.post("/e2b/sandboxes/inope/timeout", json={"timeout": 5, "x": 1}).status_code == 422


def test_cli_keys(hub):
    r = cli(hub, "e2b", "keys", "create", "--label", "ci")
    assert r.returncode == 0, r.stderr
    assert "export E2B_API_KEY=e2b_" in r.stdout and "export E2B_API_URL=" in r.stdout
    r = cli(hub, "e2b", "keys", "list")
    assert r.returncode == 0 and "ci" in r.stdout
    kid = hub.client().get("/v1/e2b/keys").json()["keys"][0]["id"]
    r = cli(hub, "e2b", "keys", "revoke", kid, "--yes")
    assert r.returncode == 0, r.stderr
    assert hub.client().get("/v1/e2b/keys").json()["keys"] == []
    r = cli(hub, "e2b", "sandboxes")
    assert r.returncode == 0, r.stderr


class _NoSandboxes:
    link = None

    def running_cid(self, sid, token):
        if sid == "iknown":
            raise PermissionError("the sandbox's access token is missing or wrong")
        raise LookupError(f"The sandbox {sid} was not found")


def test_gateway_routing_refusals_and_audit_lines():
    assert sandbox_named({"e2b-sandbox-id": "iabc"}) == "iabc"
    assert sandbox_named({"host": "49983-iabc.e2b.local"}) == "iabc"
    assert sandbox_named({"host": "49983-iabc"}) is None and sandbox_named({"host": "evil.com"}) is None
    with pytest.raises(BadRequest):
        parse_head(b"GARBAGE")
    lines: list = []
    gw = Gateway(_NoSandboxes(), free_port(), out=lines.append).start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{gw.port}", timeout=10) as c:
            r = c.get("/health", headers={"E2b-Sandbox-Id": "inope", "X-Access-Token": "secret-value"})
            assert r.status_code == 502 and "not found" in r.json()["message"]
            r = c.post("/files", headers={"Host": "49983-iknown.x", "X-Access-Token": "wrong"}, content=b"x")
            assert r.status_code == 401
        until("two audit lines", lambda: len(lines) == 2)
        assert lines[0].startswith("e2b-gateway: sandbox=inope GET /health 502 in=")
        assert "sandbox=iknown POST /files 401" in lines[1]
        assert not any("secret-value" in x or "wrong" in x for x in lines)  # no header value is printed
        # loopback only: the gateway is not on any other address of this machine
        other = socket.gethostbyname(socket.gethostname())
        if not other.startswith("127."):
            with pytest.raises(OSError):
                socket.create_connection((other, gw.port), timeout=2)
    finally:
        gw.close()
    assert json.dumps(lines)


def test_template_requests_refuse_what_is_not_served(hub):
    key = make_key(hub)["key"]
    with httpx.Client(base_url=hub.url, timeout=30, headers={"X-API-Key": key}) as c:
        r = c.post("/e2b/v3/templates", json={"name": "web:v1", "cpuCount": 1, "memoryMB": 256, "minFreeDiskMb": 0})
        assert r.status_code == 202, r.text
        made = r.json()
        assert made["names"] == ["web"] and made["tags"] == ["v1"]
        tid, bid = made["templateID"], made["buildID"]
        assert c.post("/e2b/v3/templates", json={"name": "web", "cpuCount": 4}).status_code == 422
        assert c.post("/e2b/v3/templates", json={"name": "bad name!"}).status_code == 422
        path = f"/e2b/v2/templates/{tid}/builds/{bid}"
        copy = c.post(path, json={"fromImage": "e2bdev/base", "steps": [{"type": "COPY", "args": ["a", "b"]}]})
        assert copy.status_code == 422 and "COPY" in copy.json()["message"]  # its files were never uploaded
        other = c.post(path, json={"fromImage": "e2bdev/base", "steps": [{"type": "ADD", "args": ["a", "b"]}]})
        assert other.status_code == 422 and "'ADD' is not served" in other.json()["message"]
        image = c.post(path, json={"fromImage": "python:3.12", "steps": []})
        assert image.status_code == 422 and "e2bdev/base" in image.json()["message"]
        assert c.post(path, json={"fromImage": "e2bdev/base", "registry": {}}).status_code == 422
        status = c.get(f"/e2b/templates/{tid}/builds/{bid}/status").json()
        assert status["status"] == "waiting" and status["templateID"] == tid
        assert c.get(f"/e2b/templates/{tid}/builds/nope/status").status_code == 404
        assert c.get(f"/e2b/templates/{tid}/files/abc").status_code == 422
        assert [t["names"] for t in c.get("/e2b/templates").json()] == [["web"]]
    r = cli(hub, "e2b", "templates")
    assert r.returncode == 0 and "web" in r.stdout, r.stderr
    r = cli(hub, "e2b", "delete-template", tid, "--yes")
    assert r.returncode == 0, r.stderr
    assert hub.client().get("/v1/e2b/templates").json()["templates"] == []


def test_copy_files_are_uploaded_once_to_a_link_only_the_hub_gives(hub, folders):
    key = make_key(hub)["key"]
    digest = hashlib.sha256(b"the step's files").hexdigest()
    with httpx.Client(base_url=hub.url, timeout=30, headers={"X-API-Key": key}) as c:
        made = c.post("/e2b/v3/templates", json={"name": "files"}).json()
        tid = made["templateID"]
        link = c.get(f"/e2b/templates/{tid}/files/{digest}").json()
        assert link["present"] is False and f"/e2b/templates/{tid}/files/{digest}?upload=" in link["url"]
        assert c.get(f"/e2b/templates/nope/files/{digest}").status_code == 404
    path = link["url"].split(hub.url, 1)[1]
    with httpx.Client(base_url=hub.url, timeout=30) as anon:  # the SDK uploads with no key, no JSON type
        forged = anon.put(path.split("?")[0] + "?upload=" + "0" * 40, content=b"tar bytes")
        assert forged.status_code == 403
        other = anon.put(f"/e2b/templates/{tid}/files/{'a' * 64}?" + path.split("?")[1], content=b"x")
        assert other.status_code == 403  # the capability is for that hash only
        assert anon.put(path, content=b"tar bytes").status_code == 200
        assert anon.post(path, content=b"tar bytes").status_code == 415  # only the PUT is let past the edge
    stored = folders.data / "e2b-files" / f"{digest}.tar"
    assert stored.read_bytes() == b"tar bytes" and stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    # the log tells the build's inputs: the upload's hash, size and SHA-256 (the bytes stay in the data folder)
    events = hub.client().get("/v1/events", params={"kinds": "e2b", "limit": 1000}).json()["events"]
    ups = [e["data"] for e in events if e["data"]["kind"] == "E2bTemplate.FilesUploaded"]
    assert [(u["template_id"], u["files_hash"], u["size"], u["sha256"]) for u in ups] == \
        [(tid, digest, len(b"tar bytes"), hashlib.sha256(b"tar bytes").hexdigest())]
    assert all("tar bytes" not in json.dumps(e) for e in events)
    with httpx.Client(base_url=hub.url, timeout=30, headers={"X-API-Key": key}) as c:
        assert c.get(f"/e2b/templates/{tid}/files/{digest}").json() == {"present": True}
        step = {"type": "COPY", "args": ["app/", "/workspace/app/"], "filesHash": "b" * 64}
        missing = c.post(f"/e2b/v2/templates/{tid}/builds/{made['buildID']}", json={"steps": [step]})
        assert missing.status_code == 422 and "COPY step 1 were not uploaded" in missing.json()["message"]
