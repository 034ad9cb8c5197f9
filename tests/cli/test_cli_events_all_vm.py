"""``agentplaza events --all`` against a real hub whose node boots a real microVM: the VM's serial
console output arrives on the stream, and a stream without ``--all`` never carries it."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.deadline import until
from support.hubproc import HubProcess, cli

pytestmark = pytest.mark.vm

IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(
    Path(os.environ["APZ_DATA_DIR"]) / "images" if os.environ.get("APZ_DATA_DIR")
    else Path.home() / ".local/share/agentplaza/images")
#: How long the first console line may take: a cold boot under emulation, on a loaded machine.
FIRST_LINE_S = 240


def reader(proc: subprocess.Popen) -> queue.Queue:
    """The stream's messages, as they come."""
    q: queue.Queue = queue.Queue()

    def pump() -> None:
        for raw in proc.stdout:
            q.put(json.loads(raw))

    threading.Thread(target=pump, daemon=True).start()
    return q


def test_the_vm_console_is_on_the_stream_with_all(folders, tmp_path):
    from vmm.image import ensure_image

    ensure_image(IMAGES)
    os.chmod(tmp_path, 0o755)  # the jailed QEMU passes through
    h = HubProcess(folders)
    h.env.update(APZ_NODE="local", APZ_IMAGE_DIR=IMAGES)
    h.start()
    stream = subprocess.Popen([sys.executable, "-m", "agentplaza.cli.main", "events", "--kinds", "plaza,agent",
                               "--all", "--json"], env=h.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    plain = subprocess.Popen([sys.executable, "-m", "agentplaza.cli.main", "events", "--json"], env=h.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        messages = reader(stream)
        with h.client() as c:  # hold and resume until the stream shows it: then it is open
            until("the stream open", lambda: c.post("/v1/plaza/stop", json={}).status_code == 200
                  and c.post("/v1/plaza/resume", json={}).status_code == 200 and not messages.empty(), 60, 0.3)
        r = cli(h, "agents", "create", "--role", "researcher", "--count", "1", "--json")
        assert r.returncode == 0, r.stderr
        (agent,) = json.loads(r.stdout)["agents"]
        console = None
        while console is None:  # the plaza's and the agent's events, then its VM's console lines
            msg = messages.get(timeout=FIRST_LINE_S)
            if msg["event"] == "console":
                console = msg
        assert console["data"]["cid"] == agent["cid"] and console["data"]["text"]
        assert console["data"]["position"] is None and console["data"]["actor"] == "node:n0"
        cli(h, "agents", "stop", str(agent["cid"]), "--yes")
    finally:
        for p in (stream, plain):
            p.kill()
        plain_out = plain.communicate(timeout=30)[0]
        stream.communicate(timeout=30)
        h.stop()
    assert plain_out and all(json.loads(x)["event"] != "console" for x in plain_out.splitlines())
