"""Saved hubs (``hub login/logout/list/use/status``, ``cli.json``) and ``--pin``, as a person uses them."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import pytest
from support.hubproc import HubProcess
from support.tlsserver import TlsHub

from agentplaza.cli.pin import with_colons


def run(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    extra = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([sys.executable, "-m", "agentplaza.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False, **extra)


def fresh_shell(tmp_path, hub_env: dict) -> dict:
    """A shell with no APZ_* set, whose own state folder holds no owner-token file (a machine that is not the
    hub's): only cli.json can get it in."""
    env = {k: v for k, v in hub_env.items() if not k.startswith("APZ_")}
    mine = tmp_path / "mine"
    for sub in ("state", "config", "data"):
        (mine / sub).mkdir(parents=True, mode=0o700)
    env.update(APZ_STATE_DIR=str(mine / "state"), APZ_CONFIG_DIR=str(mine / "config"),
               APZ_DATA_DIR=str(mine / "data"))
    return env


@pytest.fixture
def hub(folders):
    h = HubProcess(folders, args=("--loopback-trust", "off")).start()  # every caller shows the token
    h.env["APZ_NODE"] = "off"
    try:
        yield h
    finally:
        h.stop()


def test_login_then_a_bare_command_in_a_fresh_shell_and_the_token_is_never_shown(hub, folders, tmp_path):
    token = (folders.state / "owner-token").read_text().strip()
    shell = fresh_shell(tmp_path, hub.env)
    r = run(shell, "overview", "--hub", hub.url)
    assert r.returncode == 1 and "(unauthorized)" in r.stderr  # this shell has no token for it

    r = run(shell, "hub", "login", hub.url, "--token", "-", "--name", "home", stdin=token + "\n")
    assert r.returncode == 0, r.stderr
    assert "saved hub home" in r.stdout
    cli_json = tmp_path / "mine" / "config" / "cli.json"
    assert stat.S_IMODE(cli_json.stat().st_mode) == 0o600
    assert stat.S_IMODE(cli_json.parent.stat().st_mode) == 0o700
    assert json.loads(cli_json.read_text())["hubs"]["home"]["token"] == token

    r = run(shell, "overview")  # a fresh shell: no flag, no APZ_*: the saved hub and its token
    assert r.returncode == 0, r.stderr
    assert hub.url in r.stdout
    shown = []
    for args in (("hub", "list"), ("hub", "list", "--json"), ("hub", "status"), ("--json", "hub", "status")):
        r = run(shell, *args)
        assert r.returncode == 0, r.stderr
        shown.append(r.stdout + r.stderr)
    assert re.search(r"^saved as +home$", shown[2], re.M)
    listed = json.loads(shown[1])
    assert listed["current"] == "home" and listed["hubs"][0]["token"] == "saved"
    assert not any(token in s for s in shown)


def test_use_logout_and_hub_by_name(hub, folders, tmp_path):
    token = (folders.state / "owner-token").read_text().strip()
    shell = fresh_shell(tmp_path, hub.env)
    assert run(shell, "hub", "login", hub.url, "--token", "-", "--name", "a", stdin=token).returncode == 0
    assert run(shell, "hub", "login", "http://127.0.0.1:9", "--token", "-", "--name", "b",
               stdin="x").returncode == 1  # no hub answers there: nothing is saved
    listed = json.loads(run(shell, "hub", "list", "--json").stdout)
    assert [h["name"] for h in listed["hubs"]] == ["a"]

    r = run(shell, "plaza", "state", "--hub", "a", "--json")  # a saved name after the command
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "running"
    r = run(shell, "hub", "use", "nosuch")
    assert r.returncode == 1 and "(unknown_hub)" in r.stderr
    r = run(shell, "--hub", "nosuch", "overview")  # not a saved name: an address, which does not answer
    assert r.returncode == 1 and "cannot reach the hub at http://nosuch" in r.stderr

    r = run(shell, "hub", "logout")
    assert r.returncode == 0 and "forgot hub a" in r.stdout
    assert json.loads(run(shell, "hub", "list", "--json").stdout) == {"current": None, "hubs": []}
    r = run(shell, "overview", "--hub", hub.url)  # the token went with it
    assert r.returncode == 1 and "(unauthorized)" in r.stderr


def test_login_to_a_remote_hub_wants_the_token_from_stdin(tmp_path, folders):
    shell = fresh_shell(tmp_path, dict(os.environ))
    r = run(shell, "hub", "login", "https://hub.example.invalid")
    assert r.returncode == 1 and "(token_required)" in r.stderr and "--token -" in r.stderr


def test_pin_checks_the_certificate_before_anything_is_sent(tmp_path, folders):
    shell = fresh_shell(tmp_path, dict(os.environ))
    with TlsHub(tmp_path) as tls:
        r = run(shell, "hub", "status", "--hub", tls.url, "--token", "t0ken")
        assert r.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in r.stderr  # its own certificate: not trusted

        wrong = "ab" * 32
        r = run(shell, "hub", "status", "--hub", tls.url, "--token", "t0ken", "--pin", wrong)
        assert r.returncode == 1
        assert "(pin_mismatch)" in r.stderr and with_colons(tls.fingerprint) in r.stderr and "nothing was sent" in r.stderr
        assert tls.requests == []  # the refused pin sent no request and no token

        r = run(dict(shell, APZ_PIN=with_colons(tls.fingerprint)), "hub", "status", "--hub", tls.url,
                "--token", "t0ken")
        assert r.returncode == 0, r.stderr
        assert tls.requests == [("/v1/hub", "Bearer t0ken")]

        r = run(shell, "hub", "status", "--pin", "not-a-pin", "--hub", tls.url)
        assert r.returncode == 1 and "(invalid_pin)" in r.stderr

        r = run(shell, "hub", "login", tls.url, "--name", "far", "--token", "-", "--pin", tls.fingerprint.upper(),
                stdin="t0ken")
        assert r.returncode == 0, r.stderr
        r = run(shell, "hub", "status")  # the saved pin and token, no flags
        assert r.returncode == 0 and re.search(r"^saved as +far$", r.stdout, re.M)
        assert tls.requests[-1] == ("/v1/hub", "Bearer t0ken")
        r = run(shell, "hub", "status", "--pin", wrong)  # a flag overrides the saved pin
        assert r.returncode == 1 and "(pin_mismatch)" in r.stderr
