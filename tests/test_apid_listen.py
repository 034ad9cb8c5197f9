"""apid on an address it cannot take says so in one line and exits 1, with no traceback: the port in use by
another program (a second apid, say), or the E2B gateway's port in use. Before, a taken port ended in trio's
nested exception groups, some 60 lines, and a taken E2B gateway port exited 0."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from support.hubproc import ROOT, free_port


def apid(*flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "APZ_DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "agentplaza.apid", "--node", "off", *flags], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def taken() -> socket.socket:
    """A port on loopback that another program listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_port_in_use_is_said_in_one_line_and_apid_exits_1(folders):
    with taken() as other:
        port = other.getsockname()[1]
        r = apid("--bind", f"127.0.0.1:{port}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"apid: cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr and "apid: listening" not in r.stdout


def test_the_e2b_gateways_port_in_use_is_said_and_apid_exits_1(folders):
    with taken() as other:
        port = other.getsockname()[1]
        r = apid("--bind", f"127.0.0.1:{free_port()}", "--e2b-gateway-port", str(port))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"apid: cannot serve the E2B gateway on 127.0.0.1:{port}:" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_the_test_suites_hub_starts_again_elsewhere_when_its_picked_port_was_taken(folders):
    """``support.hubproc``: the workers run side by side, and a port ``free_port`` picked can be taken before
    apid binds it; apid's one line tells the suite, which starts it again on another port."""
    from support.hubproc import HubProcess, ok

    h = HubProcess(folders, args=("--node", "off"))
    picked = h.port
    with socket.socket() as other:
        other.bind(("127.0.0.1", picked))
        other.listen()
        h.start()
        try:
            assert h.port != picked and h.url.endswith(f":{h.port}") and h.env["APZ_HUB"] == h.url
            assert ok(h.client().get("/v1/hub"))["address"] == h.url
        finally:
            h.stop()
