"""The unmodified E2B Python SDK against a real hub, its node gateway and real sandbox microVMs.

Few boots on purpose (each takes seconds under TCG): one sandbox is driven through commands, files,
timeout, list, pause and connect, then killed; a second one is ended by STOP ALL. Run under
``flock /tmp/apz-vm.lock``."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import httpx
import pytest
from support.deadline import until
from support.hubproc import HubProcess, free_port

e2b = pytest.importorskip("e2b")  # a test extra: pip install -e '.[test]'

pytestmark = pytest.mark.vm
IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(
    Path(os.environ["APZ_DATA_DIR"]) / "images" if os.environ.get("APZ_DATA_DIR")
    else Path.home() / ".local/share/agentplaza/images")


@pytest.fixture(scope="module")
def plaza(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("e2b")
    folders = Folders(root / "state", root / "config", root / "data").make()
    port = free_port()
    h = HubProcess(folders, args=("--e2b-gateway-port", str(port)))
    h.env["APZ_IMAGE_DIR"] = IMAGES
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start(timeout=120)
    key = h.client().post("/v1/e2b/keys", json={"label": "sdk"}).json()
    env = {"E2B_API_URL": f"{h.url}/e2b", "E2B_API_KEY": key["key"], "E2B_SANDBOX_URL": f"http://127.0.0.1:{port}"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield h, key
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        h.stop()


def test_sdk_drives_a_sandbox_vm(plaza):
    h, key = plaza
    from e2b import Sandbox, SandboxQuery

    tag = uuid.uuid4().hex[:8]
    sbx = Sandbox.create(metadata={"suite": tag}, envs={"GREETING": "hello from the plaza"}, timeout=300)
    try:
        r = sbx.commands.run("echo hi")
        assert r.stdout == "hi\n" and r.exit_code == 0
        assert sbx.commands.run("echo $GREETING").stdout.strip() == "hello from the plaza"
        failed = pytest.raises(e2b.CommandExitException, sbx.commands.run, "echo oops >&2; exit 3")
        assert failed.value.exit_code == 3 and "oops" in failed.value.stderr

        seen: list = []
        bg = sbx.commands.run("for i in 1 2 3; do echo line$i; sleep 0.3; done", background=True)
        assert bg.pid > 0
        done = bg.wait(on_stdout=seen.append)  # the sync SDK streams a background command's output here
        assert done.exit_code == 0 and "".join(seen).split() == ["line1", "line2", "line3"]

        sbx.files.write("/workspace/notes/a.txt", "kept across a pause")
        assert sbx.files.read("/workspace/notes/a.txt") == "kept across a pause"
        names = [e.name for e in sbx.files.list("/workspace/notes")]
        assert names == ["a.txt"]
        assert sbx.files.exists("/workspace/notes/a.txt") and not sbx.files.exists("/workspace/none")

        before = sbx.get_info().end_at
        sbx.set_timeout(1200)
        assert sbx.get_info().end_at > before

        mine = Sandbox.list(query=SandboxQuery(metadata={"suite": tag})).next_items()
        assert [s.sandbox_id for s in mine] == [sbx.sandbox_id]
        assert Sandbox.list(query=SandboxQuery(metadata={"suite": "other"})).next_items() == []

        sleeper = sbx.commands.run("sleep 900", background=True)
        sbx.pause()
        listed = h.client().get("/v1/e2b/sandboxes").json()["sandboxes"]
        assert [s["state"] for s in listed if s["id"] == sbx.sandbox_id] == ["paused"]

        again = Sandbox.connect(sbx.sandbox_id)
        assert again.files.read("/workspace/notes/a.txt") == "kept across a pause"
        assert sleeper.pid in [p.pid for p in again.commands.list()]
        assert again.commands.run("echo awake").stdout == "awake\n"
    finally:
        sbx.kill()
    assert Sandbox.list(query=SandboxQuery(metadata={"suite": tag})).next_items() == []
    assert sandbox_events(h, sbx.sandbox_id) == ["Created", "Started", "TimeoutSet", "Paused", "Resumed", "Ended"]


def test_a_pty_runs_a_shell_that_echoes_resizes_and_is_killed(plaza):
    """The SDK's ``sandbox.pty``: a shell on a pseudo-terminal of the size asked, its output streamed, its
    input sent, resized, killed."""
    import threading

    from e2b import Sandbox
    from e2b.sandbox.commands.command_handle import PtySize

    sbx = Sandbox.create(timeout=300)
    try:
        term = sbx.pty.create(PtySize(rows=24, cols=80))
        seen: list = []
        reader = threading.Thread(target=lambda: _drain(term, seen), daemon=True)
        reader.start()

        def screen() -> str:
            return b"".join(seen).decode(errors="replace")

        sbx.pty.send_stdin(term.pid, b"echo hi\n")
        # the terminal echoes the line typed, then the shell's answer on a line of its own
        until("the shell echoed hi", lambda: re.search(r"[\r\n]hi\r\n", screen()), timeout=60)
        sbx.pty.send_stdin(term.pid, b"stty size\n")
        until("the terminal is 24 by 80", lambda: "24 80" in screen(), timeout=60)
        sbx.pty.resize(term.pid, PtySize(rows=30, cols=100))
        sbx.pty.send_stdin(term.pid, b"stty size\n")
        until("the terminal is 30 by 100", lambda: "30 100" in screen(), timeout=60)
        assert term.pid in [p.pid for p in sbx.commands.list()]
        assert sbx.pty.kill(term.pid) is True
        reader.join(60)
        assert not reader.is_alive()  # the stream ended with the shell
        assert term.pid not in [p.pid for p in sbx.commands.list()]
        assert sbx.pty.kill(term.pid) is False  # gone
    finally:
        sbx.kill()


def test_a_filesystem_pause_keeps_the_files_and_boots_cold(plaza):
    """The SDK's ``pause(mode="filesystem")`` (``memory: false``): the disk only, the guest flushed first; the
    connect boots it cold with its files and its variables, and none of its processes."""
    h, key = plaza
    from e2b import Sandbox

    sbx = Sandbox.create(timeout=300, envs={"KEPT": "across a cold pause"})
    try:
        sbx.files.write("/workspace/cold.txt", "on the disk")
        sleeper = sbx.commands.run("sleep 900", background=True)
        assert sbx.pause(mode="filesystem") is True
        listed = h.client().get("/v1/e2b/sandboxes").json()["sandboxes"]
        assert [s["state"] for s in listed if s["id"] == sbx.sandbox_id] == ["paused"]
        again = Sandbox.connect(sbx.sandbox_id)
        assert again.files.read("/workspace/cold.txt") == "on the disk"
        assert sleeper.pid not in [p.pid for p in again.commands.list()]  # a cold boot: no process kept
        assert again.commands.run("echo $KEPT").stdout.strip() == "across a cold pause"
        assert not again.files.exists("/workspace/.e2b-snapshot-env.json")
    finally:
        sbx.kill()
    events = h.client().get("/v1/events", params={"kinds": "e2b", "limit": 1000}).json()["events"]
    agg = _agg(events, sbx.sandbox_id)
    paused = [e["data"] for e in events if e["data"]["kind"] == "E2bSandbox.Paused" and e["data"]["id"] == agg]
    assert [p["memory"] for p in paused] == [False]


def _agg(events: list, sandbox_id: str) -> str:
    return next(e["data"]["id"] for e in events if e["data"].get("sandbox_id") == sandbox_id
                and e["data"]["kind"] == "E2bSandbox.Created")


def _drain(handle, seen: list) -> None:
    """A PTY's output, as the SDK streams it, until it ends (killed: the SDK raises its exit)."""
    try:
        handle.wait(on_pty=seen.append)
    except Exception:  # noqa: BLE001 - a killed shell ends with an exit the SDK raises
        pass


def sandbox_events(h, sandbox_id: str) -> list:
    """The kinds of a sandbox's events in the log (``E2bSandbox.*``), in order."""
    events = h.client().get("/v1/events", params={"kinds": "e2b", "limit": 1000}).json()["events"]
    agg = next(e["data"]["id"] for e in events if e["data"].get("sandbox_id") == sandbox_id
               and e["data"]["kind"] == "E2bSandbox.Created")
    return [e["data"]["kind"].split(".", 1)[1] for e in events if e["data"]["id"] == agg]


def ended_cause(h, sandbox_id: str) -> str:
    events = h.client().get("/v1/events", params={"kinds": "e2b", "limit": 1000}).json()["events"]
    agg = next(e["data"]["id"] for e in events if e["data"].get("sandbox_id") == sandbox_id)
    return next(e["data"]["cause"] for e in events if e["data"]["id"] == agg and e["data"]["kind"] == "E2bSandbox.Ended")


def test_stop_all_ends_sandboxes_and_refuses_creates(plaza):
    h, key = plaza
    from e2b import Sandbox, SandboxException

    sbx = Sandbox.create(timeout=300)
    try:
        assert sbx.commands.run("echo up").stdout == "up\n"
        assert h.client().post("/v1/plaza/stop", json={"reason": "e2b test"}).status_code == 200
        until("STOP ALL ended the sandbox",
              lambda: h.client().get("/v1/e2b/sandboxes").json()["sandboxes"] == [], timeout=60)
        with pytest.raises(SandboxException) as refused:
            Sandbox.create(timeout=60)
        assert "409" in str(refused.value) or "held" in str(refused.value).lower()
        r = httpx.post(f"{h.url}/e2b/v2/sandboxes", json={"templateID": "base"},
                       headers={"X-API-Key": key["key"]}, timeout=30)
        assert r.status_code == 409
    finally:
        h.client().post("/v1/plaza/resume", json={"reason": "e2b test done"})


GUEST_CONNECT = r"""
import socket, sys
for target in sys.argv[1:]:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    print(target, s.makefile("rb").readline().decode().strip(), flush=True)
"""


def test_network_rules_deny_a_host_and_allow_wins(plaza):
    h, key = plaza
    from e2b import Sandbox

    sbx = Sandbox.create(timeout=300, network={"deny_out": ["0.0.0.0/0"], "allow_out": ["1.0.0.1"]})
    try:
        sbx.files.write("/workspace/connect.py", GUEST_CONNECT)
        out = sbx.commands.run("python3 /workspace/connect.py 1.1.1.1:443 1.0.0.1:443", timeout=120).stdout
        answers = dict(line.split(" ", 1) for line in out.strip().splitlines())
        assert answers["1.1.1.1:443"].startswith("HTTP/1.1 403"), answers  # denied by denyOut
        assert not answers["1.0.0.1:443"].startswith("HTTP/1.1 403"), answers  # allowOut wins (200, or 502 offline)
        # the proxy's environment is the sandbox's own: a process sees it
        assert "127.0.0.1:3128" in sbx.commands.run("echo $https_proxy").stdout
        # new rules apply to the next connection: now nothing is denied but the laws' private ranges
        r = httpx.put(f"{h.url}/e2b/sandboxes/{sbx.sandbox_id}/network", json={"deny_out": []},
                      headers={"X-API-Key": key["key"]}, timeout=30)
        assert r.status_code == 204, r.text
        out = sbx.commands.run("python3 /workspace/connect.py 1.1.1.1:443 10.0.0.1:443", timeout=120).stdout
        answers = dict(line.split(" ", 1) for line in out.strip().splitlines())
        assert not answers["1.1.1.1:443"].startswith("HTTP/1.1 403"), answers
        assert answers["10.0.0.1:443"].startswith("HTTP/1.1 403"), answers  # the laws' private ranges stay
        bad = httpx.put(f"{h.url}/e2b/sandboxes/{sbx.sandbox_id}/network", json={"deny_out": ["example.com"]},
                        headers={"X-API-Key": key["key"]}, timeout=30)
        assert bad.status_code == 422
    finally:
        sbx.kill()


def test_template_build_then_build_cached_then_a_warm_sandbox(plaza):
    h, key = plaza
    from e2b import BuildException, Sandbox, Template

    name = "tpl-" + uuid.uuid4().hex[:6]

    def template():
        return (Template().from_base_image()
                .run_cmd("echo one > /workspace/one")
                .run_cmd("echo built step two")
                .set_start_cmd("while true; do date +%s%N > /tmp/tick; sleep 0.3; done", "test -s /tmp/tick"))

    first: list = []
    Template.build(template(), name, on_build_logs=lambda e: first.append(e.message))
    assert "built step two" in first and "Build cached" not in first
    second: list = []
    Template.build(template(), name, on_build_logs=lambda e: second.append(e.message))
    assert "Build cached" in second
    rows = h.client().get("/v1/e2b/templates").json()["templates"]
    assert [(r["names"], r["buildStatus"], r["tags"]) for r in rows if r["names"] == [name]] == \
        [([name], "ready", ["default"])]

    sbx = Sandbox.create(name, timeout=300)
    try:
        assert sbx.files.read("/workspace/one") == "one\n"  # what the steps made
        # warm: the start command's loop, in the snapshot's memory, still runs (/tmp is the guest's RAM)
        t0 = sbx.files.read("/tmp/tick")
        until("the start command still ticks", lambda: sbx.files.read("/tmp/tick") != t0, timeout=30)
    finally:
        sbx.kill()

    with pytest.raises(BuildException) as failed:
        Template.build(Template().from_base_image().run_cmd("echo before; exit 4"), name + "-bad")
    assert "exited 4" in str(failed.value)
    bad = [r for r in h.client().get("/v1/e2b/templates").json()["templates"] if r["names"] == [name + "-bad"]]
    assert bad[0]["buildStatus"] == "error" and "exited 4" in bad[0]["reason"]
    with pytest.raises(Exception, match="only e2bdev/base"):
        Template.build(Template().from_image("python:3.12"), name + "-img")


def test_snapshot_and_fork(plaza):
    h, key = plaza
    from e2b import Sandbox

    src = Sandbox.create(timeout=300, envs={"FROM": "source"})
    made: list = []
    try:
        src.files.write("/workspace/state.txt", "before")
        src.commands.run("while true; do date +%s%N > /tmp/alive; sleep 0.3; done", background=True)
        # the loop has written once before the snapshot is taken (a busy machine may not have run it yet)
        until("the source's loop ticks", lambda: src.files.exists("/tmp/alive"), timeout=30)
        name = "snap-" + uuid.uuid4().hex[:6]
        snap = src.create_snapshot(name)
        src.files.write("/workspace/state.txt", "after")  # the snapshot keeps what was before
        for ref in (snap.snapshot_id, name):
            child = Sandbox.create(ref, timeout=300, envs={"EXTRA": "mine"})
            made.append(child)
            assert child.files.read("/workspace/state.txt") == "before"
            assert child.commands.run("echo $FROM $EXTRA").stdout.strip() == "source mine"
            t0 = child.files.read("/tmp/alive")  # the source's process, from the snapshot's memory
            until("the snapshot's process runs on", lambda c=child, t=t0: c.files.read("/tmp/alive") != t, timeout=30)
        forks = src.fork(count=2)
        assert all(isinstance(f, Sandbox) for f in forks), forks
        made += forks
        rand = [f.commands.run("head -c 16 /dev/urandom | od -An -tx1").stdout for f in forks]
        assert rand[0] != rand[1]  # entropy refreshed after each restore
        assert all(f.files.read("/workspace/state.txt") == "after" for f in forks)
        # a cold snapshot: the disk only; its sandbox boots with the files and the source's variables,
        # and none of the source's processes (/tmp is the guest's RAM: the ticking file is not there)
        for s in made:  # fewer guests at once: a cold boot is a whole boot, and this machine is small
            s.kill()
        made.clear()
        cold = src.create_snapshot(mode="filesystem")
        child = Sandbox.create(cold.snapshot_id, timeout=300, envs={"EXTRA": "cold"})
        made.append(child)
        assert child.files.read("/workspace/state.txt") == "after"
        assert child.commands.run("echo $FROM $EXTRA").stdout.strip() == "source cold"
        assert not child.files.exists("/tmp/alive")
        assert not child.files.exists("/workspace/.e2b-snapshot-env.json")
        assert not src.files.exists("/workspace/.e2b-snapshot-env.json")
    finally:
        for s in [*made, src]:
            s.kill()


def test_the_reaper_ends_or_pauses_a_sandbox_past_its_end(plaza):
    h, key = plaza
    from e2b import Sandbox

    ends = Sandbox.create(timeout=2)
    pauses = Sandbox.create(timeout=2, lifecycle={"on_timeout": "pause"})
    try:
        def states():
            return {s["id"]: s["state"] for s in h.client().get("/v1/e2b/sandboxes").json()["sandboxes"]}

        until("the reaper ended one and paused the other",
              lambda: ends.sandbox_id not in states() and states().get(pauses.sandbox_id) == "paused", timeout=60)
        again = Sandbox.connect(pauses.sandbox_id, timeout=60)
        assert again.commands.run("echo back").stdout == "back\n"
    finally:
        pauses.kill()


def test_a_hub_restart_keeps_sandboxes_snapshots_and_templates(plaza, tmp_path):
    """Everything is the log's: after apid stops cleanly and starts again (its local node, and so every VM,
    goes with it), the templates, snapshots and paused sandboxes are listed and work; a sandbox that was
    running was paused as the hub stopped, so a connect finds its files and its process."""
    h, key = plaza
    from e2b import Sandbox, Template

    tag = uuid.uuid4().hex[:6]
    name = "keep-" + tag
    (tmp_path / "data" / "deep").mkdir(parents=True)
    (tmp_path / "data" / "hello.txt").write_text("copied in\n")
    (tmp_path / "data" / "deep" / "x.txt").write_text("x\n")
    (tmp_path / "run.sh").write_text("echo run\n")
    logs: list = []
    Template.build(Template(file_context_path=str(tmp_path)).from_base_image()
                   .copy("data", "/workspace/data/").copy("run.sh", "/workspace/bin/", mode=0o755)
                   .run_cmd("echo kept > /workspace/kept && test -x /workspace/bin/run.sh"), name,
                   on_build_logs=lambda e: logs.append(e.message))
    assert not any("Build cached" in x for x in logs)
    paused = Sandbox.create(metadata={"restart": tag}, timeout=900)
    paused.files.write("/workspace/p.txt", "paused across a restart")
    paused.pause()
    running = Sandbox.create(metadata={"restart": tag}, timeout=900)
    running.files.write("/workspace/r.txt", "in the snapshot")
    snap = running.create_snapshot("snap-" + tag)
    running.files.write("/workspace/still.txt", "written before the hub stopped")
    sleeper = running.commands.run("sleep 900", background=True)

    def owner_view():
        return ({s["id"]: s["state"] for s in h.client().get("/v1/e2b/sandboxes").json()["sandboxes"]},
                [t for t in h.client().get("/v1/e2b/templates").json()["templates"] if t["names"] == [name]])

    sandboxes, templates = owner_view()
    assert (sandboxes[paused.sandbox_id], sandboxes[running.sandbox_id]) == ("paused", "running")
    h.stop(timeout=120)  # a clean stop (SIGTERM): the running sandbox is paused first
    h.start(timeout=120)

    after, templates_after = owner_view()
    assert templates_after == templates and templates[0]["buildStatus"] == "ready"
    assert after.get(paused.sandbox_id) == "paused" and after.get(running.sandbox_id) == "paused"
    events = h.client().get("/v1/events", params={"kinds": "e2b", "limit": 1000}).json()["events"]
    agg = _agg(events, running.sandbox_id)
    assert [e["data"]["reason"] for e in events if e["data"]["id"] == agg and e["data"]["kind"] == "E2bSandbox.Paused"] \
        == ["the hub stopped"]
    snaps = httpx.get(f"{h.url}/e2b/snapshots", headers={"X-API-Key": key["key"]}, timeout=30).json()
    assert {"snapshotID": snap.snapshot_id, "names": ["snap-" + tag]} in snaps
    made = []
    try:
        woken = Sandbox.connect(running.sandbox_id)
        made.append(woken)
        assert woken.files.read("/workspace/still.txt") == "written before the hub stopped"
        assert sleeper.pid in [p.pid for p in woken.commands.list()]
        again = Sandbox.connect(paused.sandbox_id)  # woken from its sleep snapshot on the node's disk
        made.append(again)
        assert again.files.read("/workspace/p.txt") == "paused across a restart"
        child = Sandbox.create("snap-" + tag, timeout=300)
        made.append(child)
        assert child.files.read("/workspace/r.txt") == "in the snapshot"
        warm = Sandbox.create(name, timeout=300)
        made.append(warm)
        assert warm.files.read("/workspace/kept") == "kept\n"
        assert warm.files.read("/workspace/data/hello.txt") == "copied in\n"  # COPY: a folder's contents
        assert warm.files.read("/workspace/data/deep/x.txt") == "x\n"
        assert warm.commands.run("/workspace/bin/run.sh").stdout == "run\n"  # a file, with its mode
    finally:
        for s in made:
            s.kill()
