"""The first start: the installer's check from a fresh clone, a clear refusal at ``agents create`` on a
machine that cannot boot microVMs, ``agentplaza doctor``, and STOP ALL with no reason."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.hubproc import HubProcess, cli

from vmm.readiness import missing_packages

ROOT = Path(__file__).resolve().parents[2]


def test_the_install_check_from_a_fresh_clone_says_what_is_missing_and_changes_nothing(tmp_path):
    clone = tmp_path / "agentplaza"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith("APZ_") and k != "VIRTUAL_ENV"}
    env.update(HOME=str(tmp_path / "home"), APZ_DATA_DIR=str(tmp_path / "data"))
    r = subprocess.run(["bash", "scripts/install.sh", "--check"], cwd=clone, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr  # a fresh clone: no .venv, no guest image
    need = missing_packages()
    if need:
        assert f"sudo apt-get install -y {' '.join(need)}" in r.stdout
    else:
        assert "system packages: every one agents need is installed" in r.stdout
    assert "the plaza is not installed yet" in r.stdout
    assert "the guest image is not built yet" in r.stdout
    changed = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=clone, capture_output=True,
                             text=True, check=True).stdout
    assert changed == "" and not (clone / ".venv").exists() and not (tmp_path / "data").exists()



def test_the_guest_image_build_on_a_fresh_machine_makes_the_data_folder_private_so_apid_starts(tmp_path, monkeypatch):
    """install.sh builds the guest image before apid's first start, and the default image cache is in the plaza's
    data folder (``~/.local/share/agentplaza/images``): the build makes that folder, so it must make it 0700, or
    apid refuses to start ("the data folder ... is readable by other users"). The folders it finds are left as
    they are."""
    from agentplaza.config import folders as default_folders
    from vmm.image import build

    home = tmp_path / "home"
    (home / ".local").mkdir(parents=True)
    os.chmod(home / ".local", 0o755)
    monkeypatch.setenv("HOME", str(home))  # no APZ_ or XDG_ folder: the defaults, as on a fresh machine
    for var in ("APZ_DATA_DIR", "APZ_STATE_DIR", "APZ_CONFIG_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    before = os.umask(0o022)
    try:
        cache = build.data_dir()
        build._lock(cache).close()  # the build's first step: its cache folder and its lock
    finally:
        os.umask(before)
    found = default_folders()
    assert cache == home / ".local/share/agentplaza/images" and found.data == cache.parent
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (cache, cache.parent, cache.parent.parent)} == {
        "images": 0o700, "agentplaza": 0o700, "share": 0o700}
    assert stat.S_IMODE((home / ".local").stat().st_mode) == 0o755  # there before: left as it was

    hub = HubProcess(found.make())  # the default folders, named as apid would find them
    hub.start()
    try:
        assert "is readable by other users" not in hub.output
    finally:
        hub.stop()

@pytest.fixture
def bare_machine(folders, tmp_path):
    """A hub with node n0 on a machine that has no QEMU and no guest image (an empty PATH for its node,
    an empty image folder)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    h = HubProcess(folders)
    h.env.update(PATH=str(bare), APZ_IMAGE_DIR=str(tmp_path / "images"))
    h.start()
    try:
        yield h
    finally:
        h.stop()


def test_agents_create_on_a_machine_that_cannot_boot_is_refused_and_says_why(bare_machine):
    h = bare_machine
    r = cli(h, "agents", "create", "--role", "researcher", "--count", "1")
    assert r.returncode == 1
    assert "(node_cannot_boot)" in r.stderr
    assert "cannot boot an agent's microVM: qemu-system-x86_64 is not installed (apt: qemu-system-x86)" in r.stderr
    assert "bash scripts/install.sh" in r.stderr
    assert json.loads(cli(h, "agents", "list", "--json").stdout)["agents"] == []  # nothing was made

    r = cli(h, "doctor", "--json")  # the doctor, on the same machine, names the fix
    assert r.returncode == 1
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["QEMU"]["status"] == "fail" and "sudo apt-get install -y" in checks["QEMU"]["fix"]
    assert "qemu-system-x86" in checks["QEMU"]["fix"] and checks["hub"]["status"] == "ok"


def test_stop_all_needs_no_reason(bare_machine):
    h = bare_machine
    r = cli(h, "plaza", "stop", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    held = json.loads(r.stdout)
    assert held["held"] is True and held["reason"] is None
    assert cli(h, "plaza", "resume").returncode == 0
    r = cli(h, "plaza", "stop", "--reason", "   ", "--yes")
    assert r.returncode == 1 and "(reason_required)" in r.stderr


def test_doctor_finds_a_file_others_may_read(folders):
    loose = folders.state / "noted.txt"
    loose.write_text("x")
    loose.chmod(0o644)
    r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "doctor", "--json", "--hub", "http://127.0.0.1:9"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    state = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "state folder")
    assert state["status"] == "fail" and state["fix"] == f"chmod 600 {loose}"
    loose.chmod(0o600)
    r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "doctor", "--hub", "http://127.0.0.1:9"],
                       capture_output=True, text=True, timeout=60)
    assert "state folder" in r.stdout and f"chmod 600 {loose}" not in r.stdout
