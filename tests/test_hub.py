"""The hub as a newcomer meets it: a real apid process, its banner, its API and its refusals."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from support.hubproc import HubProcess, cli


def genesis_events(h: HubProcess) -> int:
    """How many events a new plaza starts with (its founding: the plaza, the budget, the vault ...)."""
    with h.client() as c:
        return c.get("/v1/hub").json()["position"]




def test_first_start_prints_the_banner_and_makes_the_owner_token_once(folders, database_url):
    h = HubProcess(folders, database_url).start()
    try:
        assert f"apid: listening on {h.url}" in h.output
        assert ("no APZ_DATABASE_URL; state stays in files" in h.output) == (database_url is None)
        token_file = folders.state / "owner-token"
        token = token_file.read_text().strip()
        assert token in h.output
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        record = (folders.state / "hub.json").read_text()
        assert token not in record and "owner_token_sha256" in record
    finally:
        h.stop()
    again = HubProcess(folders, database_url).start()
    try:
        assert token not in again.output  # printed once, on the first start only
    finally:
        again.stop()


def test_stop_all_state_resume_over_http(hub):
    with hub.client() as c:
        assert c.get("/v1/plaza").json()["state"] == "running"
        r = c.post("/v1/plaza/stop", json={"reason": "checking the new law"})
        assert r.status_code == 200
        s = r.json()
        assert (s["state"], s["by"], s["reason"]) == ("held", "owner", "checking the new law")
        again = c.post("/v1/plaza/stop", json={"reason": "twice"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "plaza_held"
        assert c.post("/v1/plaza/resume", json={}).json()["state"] == "running"
        no = c.post("/v1/plaza/resume", json={})
        assert no.status_code == 409 and no.json()["error"]["code"] == "plaza_running"
        ov = c.get("/v1/overview").json()
        assert ov["plaza"]["state"] == "running" and ov["events"]["by_family"]["plaza"] == 3
        assert c.get("/v1/audit/verify").json()["intact"] is True


def test_a_hub_restarted_while_held_starts_held(folders, database_url):
    h = HubProcess(folders, database_url).start()
    with h.client() as c:
        c.post("/v1/plaza/stop", json={"reason": "night"})
    h.stop()
    h2 = HubProcess(folders, database_url).start()
    try:
        with h2.client() as c:
            s = c.get("/v1/plaza").json()
        assert (s["state"], s["reason"]) == ("held", "night")
    finally:
        h2.stop()


@pytest.mark.parametrize(
    "body, content_type, status, code",
    [
        (b'{"reason": ', "application/json", 400, "bad_json"),
        (b"\xff\xfe", "application/json", 400, "bad_json"),
        (b'["reason"]', "application/json", 422, "invalid_request"),
        (b'{"reason": "x", "force": true}', "application/json", 422, "invalid_request"),
        (b'{"reason": 12}', "application/json", 422, "invalid_request"),
        (b'{"reason": "' + b"x" * 70_000 + b'"}', "application/json", 413, "body_too_large"),
        (b'{"reason": "' + b"x" * 600 + b'"}', "application/json", 422, "reason_too_long"),
        (b'{"reason": "   "}', "application/json", 422, "reason_required"),
    ],
)
def test_bad_input_gets_a_stable_4xx_and_writes_nothing(hub, body, content_type, status, code):
    with hub.client() as c:
        before = c.get("/v1/hub").json()["position"]
        r = c.post("/v1/plaza/stop", content=body, headers={"content-type": content_type})
        assert r.status_code == status, r.text
        assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
        assert c.get("/v1/hub").json()["position"] == before
        assert c.get("/v1/plaza").json()["state"] == "running"


def test_unknown_routes_and_methods_answer_in_the_error_shape(hub):
    with hub.client() as c:
        r = c.get("/v1/nope")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        r = c.get("/v1/plaza/stop")
        assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
        r = c.get("/v1/events", params={"limit": "lots"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"


def test_cli_tables_json_and_refusals(hub):
    genesis = genesis_events(hub)
    r = cli(hub, "plaza", "stop", "--reason", "checking the new law", stdin="")
    assert r.returncode != 0 and "pass --yes" in r.stderr and r.stdout == ""
    r = cli(hub, "plaza", "stop", "--reason", "checking the new law", "--yes")
    assert r.returncode == 0 and "held" in r.stdout and "checking the new law" in r.stdout
    r = cli(hub, "plaza", "stop", "--reason", "again", "--yes")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "already held" in r.stderr and "(plaza_held)" in r.stderr
    r = cli(hub, "--json", "plaza", "state")
    assert json.loads(r.stdout)["state"] == "held"
    r = cli(hub, "overview")
    assert "HELD" in r.stdout and "position" in r.stdout
    r = cli(hub, "plaza", "resume")
    assert r.returncode == 0 and "running" in r.stdout
    r = cli(hub, "audit", "verify")
    # the two changes, and for each the CLI's Idempotency-Key: its claim and its kept answer
    assert r.returncode == 0 and r.stdout.startswith(f"intact: {genesis + 2 + 2 * 2} events, head ")
    r = cli(hub, "replay", "--upto", str(genesis + 1))
    assert f"read models as of position {genesis + 1}" in r.stdout and "checking the new law" in r.stdout
    r = cli(hub, "replay", "--rebuild", "nosuch")
    assert r.returncode == 1 and "unknown_read_model" in r.stderr
    r = cli(hub, "replay", "--rebuild")
    assert r.returncode == 0 and "plaza" in r.stdout


def test_cli_reaches_no_hub_with_one_line(folders):
    env = dict(os.environ, APZ_HUB="http://127.0.0.1:9")
    r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "plaza", "state"], env=env, capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("agentplaza: cannot reach the hub at http://127.0.0.1:9")


def test_audit_and_replay_work_offline_read_only(folders, database_url):
    h = HubProcess(folders, database_url).start()
    genesis = genesis_events(h)
    with h.client() as c:
        c.post("/v1/plaza/stop", json={"reason": "before the night"})
    h.stop()
    env = dict(h.env, APZ_HUB="http://127.0.0.1:9")
    run = lambda *a: subprocess.run([sys.executable, "-m", "agentplaza.cli.main", *a], env=env, capture_output=True, text=True)  # noqa: E731
    r = run("audit", "verify", "--offline")
    assert r.returncode == 0 and r.stdout.startswith(f"intact: {genesis + 1} events")
    r = run("audit", "verify")  # no hub: says so and reads the store itself
    assert r.returncode == 0 and "reading the store directly" in r.stderr
    r = run("--json", "replay", "--upto", "1", "--offline")
    shown = json.loads(r.stdout)
    assert shown["read_models"]["plaza"]["rm_plaza"][0]["held"] is False
    r = run("replay", "--rebuild", "--offline")
    assert r.returncode == 0
