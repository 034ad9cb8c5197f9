"""The README's first start, from a fresh clone, to an agent that is idle: ``bash scripts/install.sh``
(here with ``--bind``), the owner token as apid prints it, then ``agents create --role researcher
--count 1`` from the clone's own ``.venv``; a real microVM boots. The check without installing
(``install.sh --check``) and the refusal on a machine that cannot boot are in test_cli_first_start.py."""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from support.deadline import until
from support.hubproc import free_port

pytestmark = pytest.mark.vm

ROOT = Path(__file__).resolve().parents[2]
IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(
    Path(os.environ["APZ_DATA_DIR"]) / "images" if os.environ.get("APZ_DATA_DIR")
    else Path.home() / ".local/share/agentplaza/images")
#: install.sh up to apid listening: a venv and the plaza's packages from the machine's package index.
INSTALL_S = 900
#: The agent's first (cold) boot under emulation on a loaded machine, to idle.
IDLE_S = 400


def lines_of(proc: subprocess.Popen) -> tuple[list[str], queue.Queue]:
    """Every line the process prints, as it prints them (kept, and queued for the waits)."""
    seen: list[str] = []
    q: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            seen.append(line)
            q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return seen, q


def test_a_fresh_clone_installs_starts_and_its_first_researcher_comes_up_idle(tmp_path):
    from vmm.image import ensure_image

    ensure_image(IMAGES)  # the guest image cache this machine already has (built once if not)
    os.chmod(tmp_path, 0o755)  # the jailed QEMU passes through to the agents' folders
    clone = tmp_path / "agentplaza"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("APZ_") and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # Private folders; the guest image cache already built, so install.sh's build step (3) is a no-op here
    # (the image build itself is tested in tests/vmm). pip uses the machine's own package index (its pip
    # config) and its usual cache, shared with every other install.
    env.update(APZ_STATE_DIR=str(tmp_path / "state"), APZ_CONFIG_DIR=str(tmp_path / "config"),
               APZ_DATA_DIR=str(tmp_path / "data"), APZ_IMAGE_DIR=IMAGES)
    url = f"http://127.0.0.1:{free_port()}"
    apid = subprocess.Popen(["bash", "scripts/install.sh", "--bind", url.removeprefix("http://")], cwd=clone,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen, q = lines_of(apid)

    def said(what: str):
        def check():
            while not q.empty():
                if what in q.get():
                    return True
            assert apid.poll() is None, f"install.sh exited ({apid.returncode}):\n" + "".join(seen)
            return False
        return check

    try:
        until("apid: listening", said(f"apid: listening on {url}"), INSTALL_S, 0.2)
        out = "".join(seen)
        assert "install.sh: the plaza is installed in .venv" in out
        assert "install.sh: the guest image is built" in out and "building the guest image" not in out
        assert "an agent's microVM cannot boot here" not in out
        assert "apid: node n0 connected (local)" in out, out

        # The owner token: printed once on the first start, and in owner-token in the state folder, ours only.
        printed = out.split("apid: owner token (shown once; also in ", 1)[1].splitlines()[1].strip()
        token_file = tmp_path / "state" / "owner-token"
        assert token_file.read_text().strip() == printed
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

        # The next command, as install.sh's last line gives it for a hub bound elsewhere (--hub names it).
        hint = out.split("install.sh: starting the hub (Ctrl-C stops it); then, in another terminal: ", 1)[1]
        create = shlex.split(hint.splitlines()[0])
        assert create == [".venv/bin/agentplaza", "--hub", url, *"agents create --role researcher --count 1".split()]
        cli_env = dict(env, APZ_TOKEN=printed)

        def run(argv: list[str]) -> subprocess.CompletedProcess:
            return subprocess.run(argv, cwd=clone, env=cli_env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=120)

        def agentplaza(*args: str) -> subprocess.CompletedProcess:
            return run([".venv/bin/agentplaza", "--hub", url, *args])

        r = run([*create, "--json"])
        assert r.returncode == 0, r.stdout + r.stderr
        (agent,) = json.loads(r.stdout)["agents"]
        assert agent["role"] == "researcher"

        def status() -> str:
            r = agentplaza("agents", "list", "--json")
            assert r.returncode == 0, r.stderr
            (row,) = [a for a in json.loads(r.stdout)["agents"] if a["cid"] == agent["cid"]]
            return row["status"]

        until("the researcher idle", lambda: status() == "idle", IDLE_S, 1.0)
        assert agentplaza("agents", "stop", str(agent["cid"]), "--yes").returncode == 0
        until("the researcher offline", lambda: status() == "offline", 120, 0.5)

        # What ran was the clone's own install, not this checkout's.
        # (-I: not from the folder it runs in, nor PYTHONPATH: from what the clone's .venv installed.)
        where = subprocess.run([str(clone / ".venv/bin/python"), "-I", "-c", "import agentplaza; print(agentplaza.__file__)"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, check=True, timeout=60).stdout
        assert Path(where.strip()).is_relative_to(clone)
    finally:
        if apid.poll() is None:  # Ctrl-C stops it, as install.sh says
            apid.send_signal(signal.SIGINT)
            try:
                apid.wait(timeout=60)
            except subprocess.TimeoutExpired:
                apid.kill()
                apid.wait()
                raise AssertionError("apid did not stop on Ctrl-C:\n" + "".join(seen)) from None
    assert apid.returncode == 0, "".join(seen)
