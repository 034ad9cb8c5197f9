"""apid starts with Python's cyclic collector held off and turns it on once it listens (``agentplaza.apid``):
off while the hub's code is imported and the hub opened, so that the start is not spent walking the objects
it has just made; on for as long as the hub serves, so that no cycle of a request's objects outlives it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.hubproc import ROOT, free_port

# apid itself, with its prints watched: what the collector is at the hub's first line, and just after
# the line that says it listens (then it stops itself, as SIGTERM stops it).
WATCHED = r"""
import builtins, gc, os, signal, sys, threading
real = builtins.print
seen = []
def watched(*args, **kw):
    real(*args, **kw)
    if not seen:
        seen.append(gc.isenabled())
        real(f"collector at the first line: {'on' if gc.isenabled() else 'off'}", flush=True)
    if args and str(args[0]).startswith("apid: listening on"):
        def after():
            real(f"collector once listening: {'on' if gc.isenabled() else 'off'}", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
        threading.Timer(0.2, after).start()
builtins.print = watched
from agentplaza import apid
sys.exit(apid.main(sys.argv[1:]))
"""


def run_apid(folders, database_url: str | None, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "APZ_DATABASE_URL"}
    if database_url:
        env["APZ_DATABASE_URL"] = database_url
    return subprocess.run([sys.executable, "-c", WATCHED, *flags], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_the_collector_is_off_while_apid_starts_and_on_once_it_listens(folders, database_url):
    r = run_apid(folders, database_url, "--bind", f"127.0.0.1:{free_port()}", "--node", "off")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "apid: listening on" in r.stdout
    assert "collector at the first line: off" in r.stdout
    assert "collector once listening: on" in r.stdout


@pytest.mark.parametrize("flags, says", [
    (("--bind", "nowhere"), "--bind wants address:port"),
    (("--bind", "127.0.0.1:1", "--public-url", "ftp://x"), "public URL"),
])
def test_a_start_that_fails_leaves_the_collector_as_it_was(folders, flags, says):
    """``api.main.main`` called in a process whose collector is on leaves it on when the start fails
    (``apid`` turns it back on too)."""
    code = ("import gc, sys\nfrom agentplaza.api.main import main\nrc = main(sys.argv[1:])\n"
            "print('rc', rc, 'collector', 'on' if gc.isenabled() else 'off')")
    r = subprocess.run([sys.executable, "-c", code, *flags], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "rc 2 collector on" in r.stdout, r.stdout + r.stderr
    assert says in r.stderr
    r = subprocess.run([sys.executable, "-c", "import gc, sys\nfrom agentplaza import apid\nrc = apid.main(sys.argv[1:])\n"
                        "print('rc', rc, 'collector', 'on' if gc.isenabled() else 'off')", *flags],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "rc 2 collector on" in r.stdout, r.stdout + r.stderr

