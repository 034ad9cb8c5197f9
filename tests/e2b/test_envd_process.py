"""The guest's envd, on the host: a started process's output reaches the one who started it.

The build of a template lost the line of a quick ``echo`` under load: the pumps read it before the
starter subscribed.  The starter's queue is now in place before the pumps start.
"""

from __future__ import annotations

import base64
import time

from vmm.guest import envd


def _drain(q) -> tuple[bytes, dict]:
    out = b""
    while True:
        ev = q.get(timeout=10)
        if "end" in ev:
            return out, ev["end"]
        out += base64.b64decode(ev["data"].get("stdout", ""))


def test_output_before_the_starter_reads_is_kept(tmp_path):
    p = envd.Proc({"cmd": "/bin/sh", "args": ["-c", "echo built step two; exit 3"], "cwd": str(tmp_path)}, "", False)
    deadline = time.monotonic() + 10
    while p.end is None and time.monotonic() < deadline:  # the process is over before anyone reads
        time.sleep(0.01)
    out, end = _drain(p.first)
    assert out == b"built step two\n" and end["exitCode"] == 3


def test_proc_start_streams_start_output_and_end(tmp_path):
    for _ in range(20):
        events: list = []
        envd.proc_start({"process": {"cmd": "/bin/echo", "args": ["one"], "cwd": str(tmp_path)}}, events.append)
        kinds = [next(iter(e["event"])) for e in events]
        assert kinds[0] == "start" and kinds[-1] == "end"
        assert b"".join(base64.b64decode(e["event"]["data"]["stdout"]) for e in events
                        if "data" in e["event"]) == b"one\n"
