"""Moves of real microVMs between local nodes (the guide's "Placement and moves"): a hub's store and
runtime in this process, node n0 and a second node (n1, its own folder) serving their sockets, and a
third (n2) in a process whose file size limit makes it fail mid-copy.

One agent: a move to n2 fails before the finish, the import is dropped and the agent wakes on n0 with
its files; a move to n1 carries its workspace there, where it writes a file; draining n1 brings it back
to n0, where it wakes with the file; each report's bytes are the data's, not the image's."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.nodeplaza import serve
from test_agents_vm import IMAGES, guest, image, kick, roster, transcript, wait_for  # noqa: F401 - the fixtures

from agentplaza.adapters.kvm.link import NodeLink, wait_gone
from agentplaza.adapters.kvm.noded import Node
from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import nodes as node_commands
from agentplaza.domain.agents import node_id
from agentplaza.domain.base import Refusal
from agentplaza.joincode import parse
from agentplaza.runtime import moves
from agentplaza.runtime.fleet import AgentRuntime

pytestmark = pytest.mark.vm
#: n2's file size limit: its import fails at the first piece past it.
FAILING_FSIZE_BYTES = 1 << 20


def join(hub, label: str) -> str:
    cmds = hub.commands
    code = parse(node_commands.make_code(cmds, cmds.context("owner"), label, 15, "https://hub.test:7700", None).value["code"])
    return node_commands.redeem(cmds, cmds.context("hub"), code.id, code.secret, "A" * 43, "10.0.0.9").value.name


def limited_noded(folder: Path) -> tuple[subprocess.Popen, Path]:
    """A noded whose writes fail past ``FAILING_FSIZE_BYTES`` (Python ignores SIGXFSZ: the write is EFBIG)."""
    (folder / "state").mkdir(parents=True)
    sock = folder / "state" / "node.sock"
    argv = [sys.executable, "-m", "agentplaza.adapters.kvm.noded", "--socket", str(sock), "--name", "n2",
            "--vms", str(folder / "vms"), "--images", IMAGES, "--no-templates", "--exit-with-parent"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=lambda: resource.setrlimit(
        resource.RLIMIT_FSIZE, (FAILING_FSIZE_BYTES, FAILING_FSIZE_BYTES)))
    wait_for("n2's socket", sock.exists, 30)
    return proc, sock


@pytest.fixture
def nodes(folders, image, tmp_path):  # noqa: F811
    os.chmod(tmp_path, 0o755)
    hub = Hub.open(folders)
    n0 = Node("n0", folders.data / "vms", image=image)
    n1 = Node("n1", tmp_path / "n1" / "vms", image=image)
    stops = [serve(n0, folders.state / "node.sock"), serve(n1, tmp_path / "n1" / "node.sock")]
    proc, sock2 = limited_noded(tmp_path / "n2")
    rt = AgentRuntime(hub, node=str(folders.state / "node.sock"))
    hub.runtime = rt
    rt.start()
    try:
        yield hub, rt, n0, n1, sock2, tmp_path
    finally:
        rt.close()
        for link in rt.links.values():
            link.close()
        for s in stops:
            s.set()
        n0.stop_all()
        n1.stop_all()
        wait_gone(proc)
        hub.close()


def reconnected(hub, rt, cid, before):
    """After a wake: the guest's new harness has said hello (a session other than ``before``) and the
    agent is idle again (the old harness's end reads as a disconnect first)."""
    wait_for("the harness back", lambda: rt.sessions.get(cid) not in (None, before)
             and roster(hub)[cid]["status"] == "idle", 120,
             diag=lambda: (rt.sessions.get(cid), before, roster(hub)[cid],
                           [(e["kind"], e["actor"], (e["text"] or "")[:120]) for e in transcript(hub, cid)][-6:],
                           # who made it offline, if it stays so: the agent's last events and their actors
                           [(type(e).__name__, getattr(e, "actor", None)) for e in
                            hub.commands.store.events_of(uuid.UUID(roster(hub)[cid]["agent_id"]))][-8:]))
    return rt.sessions[cid]


def sha(node, cid, path):
    return guest(node, cid, f"import hashlib; print(hashlib.sha256(open({path!r},'rb').read()).hexdigest())").strip()


def test_an_agent_moves_to_a_node_and_back_with_its_workspace_and_a_failed_move_leaves_it_home(nodes):
    hub, rt, n0, n1, sock2, tmp = nodes
    owner = hub.commands.context("owner")
    assert join(hub, "atlas") == "n1" and join(hub, "flaky") == "n2"
    rt.attach_node("n1", NodeLink(tmp / "n1" / "node.sock", None).connect())
    rt.attach_node("n2", NodeLink(sock2, None).connect())
    (a,) = ac.spawn(hub.commands, owner, "builder", 1).value
    kick(hub, rt)
    wait_for("the agent idle", lambda: roster(hub).get(a, {}).get("status") == "idle" and a in rt.applied)
    guest(n0, a, "open('/workspace/before.txt','w').write('made on n0')")
    session = wait_for("the harness connected", lambda: rt.sessions.get(a))

    # Refused before anything happens: the same node, an unknown one.
    for target, code in (("n0", "same_node"), ("n7", "unknown_node")):
        with pytest.raises(Refusal) as r:
            rt.move(a, target, owner)
        assert r.value.code == code
    assert roster(hub)[a]["status"] == "idle"

    # A target that fails mid-copy: the import is dropped, the agent wakes where it was, with its files.
    with pytest.raises(Refusal) as r:
        rt.move(a, "n2", owner)
    assert r.value.code == "move_failed" and "back on node n0" in r.value.message
    assert not list((tmp / "n2" / "vms").glob(".import-*")) and not (tmp / "n2" / "vms" / f"agent-{a}").exists()
    assert roster(hub)[a]["node"] == "n0" and ac.holder(hub.commands.store.get, a).name == "n0"
    wait_for("awake on n0", lambda: n0.runs[a].machine.running())
    session = reconnected(hub, rt, a, session)
    assert guest(n0, a, "print(open('/workspace/before.txt').read())").strip() == "made on n0"
    assert any(e["kind"] == "error" and e["detail"].get("failed") for e in transcript(hub, a))

    # To n1: it sleeps, its files cross, it wakes there, and n0 lets go of it.
    out = rt.move(a, "n1", owner)
    assert (out["from"], out["to"], out["cid"]) == ("n0", "n1", a)
    assert 0 < out["bytes_moved"] < out["apparent_bytes"] and out["seconds"] > 0
    rows = roster(hub)
    assert rows[a]["node"] == "n1" and rows[a]["status"] in ("idle", "offline")  # its harness reconnects below
    assert hub.commands.store.get(node_id("n1")).holds(a) and not hub.commands.store.get(node_id("n0")).holds(a)
    assert a not in n0.runs and not (hub.folders.data / "vms" / f"agent-{a}").exists()
    wait_for("running on n1", lambda: a in n1.runs and n1.runs[a].machine.running())
    session = reconnected(hub, rt, a, session)
    assert guest(n1, a, "print(open('/workspace/before.txt').read())").strip() == "made on n0"

    # It does something there that leaves a file: 20 MB of data in its workspace.
    guest(n1, a, "import os; open('/workspace/made-on-n1.bin','wb').write(os.urandom(20_000_000))")
    want = sha(n1, a, "/workspace/made-on-n1.bin")

    # n1 is drained: its agent moves back to n0 (n0 and n2 hold no agent; the first named wins).
    drained = moves.drain(rt, "n1", owner)
    assert drained["left"] == [] and [m["to"] for m in drained["moved"]] == ["n0"]
    back = drained["moved"][0]
    assert back["bytes_moved"] >= 20_000_000 and back["bytes_moved"] < back["apparent_bytes"]
    wait_for("running on n0", lambda: a in n0.runs and n0.runs[a].machine.running())
    session = reconnected(hub, rt, a, session)
    assert sha(n0, a, "/workspace/made-on-n1.bin") == want
    assert roster(hub)[a]["node"] == "n0" and a not in n1.runs and not hub.commands.store.get(node_id("n1")).cids
    notes = [e["detail"] for e in transcript(hub, a) if e["kind"] == "note" and e["detail"].get("action") == "move"]
    assert [(d["from"], d["to"]) for d in notes] == [("n0", "n1"), ("n1", "n0")]
    print(f"\nmove n0->n1: {out['bytes_moved']} of {out['apparent_bytes']} bytes in {out['seconds']} s; "
          f"n1->n0: {back['bytes_moved']} of {back['apparent_bytes']} bytes in {back['seconds']} s")
    wait_for("idle on n0", lambda: roster(hub)[a]["status"] == "idle")
