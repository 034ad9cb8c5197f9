"""Agents in real microVMs: node n0 in this process, a real hub's store and runtime, real guests.

Few boots on purpose (each takes seconds under TCG): two builders boot at once; one is wiped.
Checks: roles come from the hub (a forged claim is ignored; a CID the plaza never gave out has no
role), a guest reaches nothing but its channel's services (no network, no other guest, no private
address, not the hub's routes through egress), no key inside, every refused call is in the
transcript, and a told message runs the harness's loop to its end."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from support.nodeplaza import hub_with_node

from agentplaza.commands import agents as ac
from agentplaza.projections.agents import agents_table
from agentplaza.projections.agents import transcript as read_transcript
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.modelrelay import NO_GATEWAY
from vmm.channel import Channel

pytestmark = pytest.mark.vm
IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(
    Path(os.environ["APZ_DATA_DIR"]) / "images" if os.environ.get("APZ_DATA_DIR")
    else Path.home() / ".local/share/agentplaza/images")

GUEST_RPC = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect("/run/apz/channel.sock")
s.sendall(b"harness\n"); f = s.makefile("rb")
for line in sys.stdin:
    s.sendall(line.encode()); print(f.readline().decode().strip(), flush=True)
"""

GUEST_EGRESS = r"""
import socket, sys
for target in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX); s.connect("/run/apz/channel.sock")
    s.sendall(b"egress\n" + f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
    print(target, s.makefile("rb").readline().decode().strip(), flush=True)
"""

GUEST_WALLS = r"""
import errno, socket
res = []
for fam, addr in [(socket.AF_INET, ("10.0.2.2", 80)), (socket.AF_INET, ("192.168.1.1", 443)),
                  (socket.AF_INET, ("169.254.169.254", 80))]:
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)
    try:
        s.connect(addr); res.append("CONNECTED")
    except OSError as e:
        res.append(errno.errorcode.get(e.errno, str(e.errno)))
try:
    v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); v.settimeout(3); v.connect((4, 1024)); res.append("CONNECTED")
except OSError as e:
    res.append(errno.errorcode.get(e.errno, str(e.errno)))
for svc in (b"exec\n", b"start\n", b"facts\n"):
    s = socket.socket(socket.AF_UNIX); s.connect("/run/apz/channel.sock"); s.sendall(svc)
    res.append("OPEN" if s.recv(100) else "CLOSED")
print(" ".join(res))
"""


@pytest.fixture(scope="module")
def image():
    from vmm.image import ensure_image

    return ensure_image(IMAGES)


def wait_for(what, fn, timeout=180.0, diag=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f": {diag()}" if diag else ""))


@pytest.fixture
def plaza(folders, image, tmp_path):
    with hub_with_node(folders, image, tmp_path) as plaza:
        yield plaza


def kick(hub, rt):
    """What apid's follower does after a command: the read models catch up, then the runtime looks."""
    hub.read_models.catch_up()
    rt.kick()


def roster(hub):
    hub.read_models.catch_up()
    return {r["cid"]: r for r in hub.read_models.rows(agents_table)}


def transcript(hub, cid):
    hub.read_models.catch_up()
    return read_transcript(hub.read_models, cid, 0, 1000)


def guest(node, cid, script, *args, stdin=b""):
    rc, out = node.runs[cid].machine.exec(["python3", "-c", script, *args], stdin=stdin, timeout=120)
    assert rc == 0, out
    return out.decode()


#: In a guest: how many harness processes it runs (the words split, so that this program is not one).
HARNESSES = r"""
import os
mark = b"import " + b"harness"
print(sum(mark in open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()))
"""


def test_agents_boot_roles_come_from_the_hub_and_the_walls_hold(plaza):
    hub, node, rt = plaza
    owner = hub.commands.context("owner")
    a, b = ac.spawn(hub.commands, owner, "builder", 2).value
    kick(hub, rt)
    wait_for("both agents idle", lambda: all(roster(hub).get(c, {}).get("status") == "idle" for c in (a, b)))
    facts = rt.facts
    assert facts["backend"] == "qemu-microvm" and facts["isolation"] and facts["cpus"] >= 1

    # A forged role claim is ignored: the hub answers with the role the owner gave (and its cid).
    lines = [{"op": "hello", "role": "orchestrator", "cid": b}, {"op": "tool", "tool": "plaza_agent_spawn", "args": {}},
             {"op": "decide", "tool": "vm.read_file", "args": {"path": "/root/.ssh/id_rsa"}},
             {"op": "tool", "tool": "plaza_status", "args": {}}]
    out = guest(node, a, GUEST_RPC, stdin="".join(json.dumps(x) + "\n" for x in lines).encode())
    hello, spawn, secret, status = [json.loads(x) for x in out.splitlines()]
    assert ("error" in hello, hello["cid"], hello["role"], hello["tier"]) == (False, a, "builder", "worker")
    assert "vm.shell" in hello["tools"] and "plaza_agent_spawn" not in hello["tools"]
    assert "C-005" in spawn["error"]["message"]
    assert secret["effect"] == "deny" and secret["law"] == "C-002b"
    assert status["result"]["role"] == "builder"

    # No network, no other guest, no host-side service but the three the node carries.
    assert guest(node, a, GUEST_WALLS).split() == ["ENETUNREACH"] * 3 + ["EAFNOSUPPORT", "CLOSED", "CLOSED", "CLOSED"]

    # Through egress: no private address, not the hub's own routes, no metadata.
    out = guest(node, a, GUEST_EGRESS, "127.0.0.1:7700", "127.0.0.1:443", "localhost:80", "10.0.2.2:80",
                "192.168.1.1:443", "169.254.169.254:80", "[::1]:443", "[fd00::1]:443")
    assert [line.split(" ", 2)[1:] for line in out.splitlines()] == [["HTTP/1.1", "403 Forbidden"]] * 8, out

    # No key in the guest: only the placeholder.
    out = guest(node, a, "import os,glob\nprint(sorted({open(p,'rb').read().count(b'sk-') for p in glob.glob('/proc/[0-9]*/environ')}))")
    assert out.strip() == "[0]", out

    entries = transcript(hub, a)
    calls = [(e["tool"], e["detail"]["effect"]) for e in entries if e["kind"] == "tool_call"]
    assert ("plaza_agent_spawn", "deny") in calls and ("vm.read_file", "deny") in calls
    assert any(e["kind"] == "note" and e["detail"].get("claimed") == {"role": "orchestrator", "cid": b} for e in entries)
    decided = [r.data for r in hub.store.read(0) if r.kind.startswith("ToolCall.")]
    assert len(decided) >= 3  # every decision is also the law book's event (issue 4's decide_call)
    egress = [e for e in entries if e["kind"] == "egress"]
    assert len(egress) == 8 and all(e["detail"]["verdict"] == "refused" for e in egress)

    # A CID the plaza never gave out has no role: its streams are refused at the hub.
    x, y = socket.socketpair()
    guest_end = Channel.over_socket(x, role="guest").start()
    hub_end = Channel.over_socket(y, role="host", on_open=lambda st: rt._on_stream("harness", 77, st)).start()
    st = guest_end.open("harness")
    st.write(b'{"op": "hello", "role": "orchestrator"}\n')
    with pytest.raises(Exception, match="no role"):
        st.read(timeout=10)
    guest_end.close()
    hub_end.close()

    # Told work runs the loop: the harness takes it, asks the model (this in-process hub has no HTTP address, so no gateway), reports.
    ac.tell(hub.commands, owner, b, "Introduce yourself in one line.")
    rt.work_for(b)
    wait_for("the item done", lambda: any(e["kind"] == "done" for e in transcript(hub, b)), 60)
    entries = transcript(hub, b)
    told = next(i for i, e in enumerate(entries) if e["kind"] == "told")
    kinds = [(e["kind"], e["text"]) for e in entries[told:] if e["kind"] in ("told", "error", "done")]
    assert kinds == [("told", "Introduce yourself in one line."), ("error", NO_GATEWAY), ("done", NO_GATEWAY)]
    # It was asked to name itself when it first said hello; with no model to answer, it is role-cid.
    assert roster(hub)[b]["name"] == f"builder-{b}"
    assert wait_for("idle again", lambda: roster(hub)[b]["status"] == "idle", 30)

    # Sleep: the VM is saved and stopped; work wakes it where it was and the loop runs again.
    ac.sleep(hub.commands, owner, b)
    kick(hub, rt)
    wait_for("asleep", lambda: b in rt.asleep and not node.runs[b].machine.running())
    assert roster(hub)[b]["status"] == "asleep"
    ac.tell(hub.commands, owner, b, "Again, please.")
    kick(hub, rt)
    rt.work_for(b)
    wait_for("the second item done", lambda: sum(e["kind"] == "done" for e in transcript(hub, b)) == 2, 120,
             diag=lambda: (rt.asleep, [(e["kind"], e["actor"], (e["text"] or "")[:80]) for e in transcript(hub, b)][-8:],
                           roster(hub)[b], node.runs[b].harness_log.read_text()[-1500:]))
    assert b not in rt.asleep and node.runs[b].machine.running()
    # the harness it slept with went on (held by channeld, let go by the node): one, not a second beside it
    assert guest(node, b, HARNESSES).strip() == "1"

    # Wipe: the workspace is made new and the agent comes back.
    guest(node, b, "open('/workspace/keep.txt','w').write('x')")
    ac.wipe(hub.commands, owner, b)
    kick(hub, rt)
    wait_for("the wiped agent back", lambda: roster(hub)[b]["status"] == "idle" and b in node.runs
             and node.runs[b].machine.running() and rt.applied.get(b, (0, 0, 0))[2] == 1)
    assert guest(node, b, "import os; print(os.path.exists('/workspace/keep.txt'))").strip() == "False"

    # Stop: the machine goes, the agent is offline.
    ac.stop(hub.commands, owner, a)
    kick(hub, rt)
    wait_for("agent a's machine stopped", lambda: a not in node.runs and roster(hub)[a]["status"] == "offline",
             diag=lambda: (rt.busy, rt.applied, list(node.runs)))


def test_apid_starts_node_n0_and_an_owner_spawn_comes_up_idle(folders, image, tmp_path):
    from support.hubproc import HubProcess

    os.chmod(tmp_path, 0o755)
    h = HubProcess(folders)
    h.env.update(APZ_NODE="local", APZ_IMAGE_DIR=IMAGES)
    h.start()
    try:
        assert "apid: node n0 connected (local)" in h.output
        with h.client() as c:
            node = c.get("/v1/nodes").json()["nodes"][0]
            assert node["online"] is True and node["facts"]["backend"] == "qemu-microvm" and node["facts"]["accel"] in ("kvm", "tcg")
            (agent,) = c.post("/v1/agents", json={"role": "researcher"}).json()["agents"]
            wait_for("idle", lambda: c.get(f"/v1/agents/{agent['cid']}").json()["agent"]["status"] == "idle")
            assert c.post(f"/v1/agents/{agent['cid']}/stop", json={}).json()["agent"]["status"] == "offline"
        # The first agent of its shape was saved as the warm template; the CLI lists and removes it.
        from support.hubproc import cli

        listed = wait_for("the warm template", lambda: (r := cli(h, "--json", "templates", "list")).returncode == 0
                          and json.loads(r.stdout)["templates"] and json.loads(r.stdout)["templates"], 60)
        key = listed[0]["key"]
        assert listed[0]["memory_mib"] and listed[0]["bytes"] > 0
        assert key in cli(h, "templates", "list").stdout
        assert cli(h, "templates", "rm", key).returncode == 1  # asks first; no terminal to answer
        assert cli(h, "templates", "rm", key, "--yes").returncode == 0
        assert json.loads(cli(h, "--json", "templates", "list").stdout)["templates"] == []
        gone = cli(h, "templates", "rm", key, "--yes")
        assert gone.returncode == 1 and "no template" in gone.stderr
        assert cli(h, "templates", "rm", "../x", "--yes").returncode == 1
    finally:
        h.stop()


def test_fork_copies_the_machine_at_a_checkpoint_and_a_hub_restart_keeps_workspaces(plaza):
    from agentplaza.domain.base import Refusal

    hub, node, rt = plaza
    owner = hub.commands.context("owner")
    (a,) = ac.spawn(hub.commands, owner, "builder", 1).value
    ac.update(hub.commands, owner, a, {"permission_mode": "ask"})
    kick(hub, rt)
    wait_for("the agent idle", lambda: roster(hub).get(a, {}).get("status") == "idle")
    guest(node, a, "open('/workspace/mark.txt','w').write('from a')")

    # Bad input changes nothing: no agent, no checkpoint.
    before = set(roster(hub))
    for n, checkpoint, code in ((0, None, "invalid_count"), (17, None, "invalid_count"), (1, "snap-99", "unknown_checkpoint")):
        with pytest.raises(Refusal) as r:
            rt.fork(a, n, checkpoint, owner)
        assert r.value.code == code
    assert set(roster(hub)) == before and node.runs[a].machine.checkpoints() == []

    # Two forks: a checkpoint is taken, each fork is a builder of its own, started from a copy of that machine.
    done = rt.fork(a, 2, None, owner)
    f1, f2 = done["forks"]
    kick(hub, rt)
    wait_for("both forks idle", lambda: all(roster(hub).get(c, {}).get("status") == "idle" for c in (f1, f2)), 240,
             diag=lambda: [(c, [(e["kind"], (e["text"] or "")[:100]) for e in transcript(hub, c)][-4:]) for c in (f1, f2)])
    rows = roster(hub)
    for f in (f1, f2):
        assert (rows[f]["role"], rows[f]["forked_from"], rows[f]["fork_checkpoint"]) == ("builder", a, done["checkpoint"])
        assert rows[f]["permission_mode"] == "ask" and rows[f]["agent_id"] != rows[a]["agent_id"]
        assert guest(node, f, "print(open('/workspace/mark.txt').read())").strip() == "from a"
        assert guest(node, f, HARNESSES).strip() == "1"     # the copy's harness connected as the fork
    assert [c["name"] for c in node.runs[a].machine.checkpoints()] == [done["checkpoint"]]
    guest(node, f1, "open('/workspace/mark.txt','w').write('f1 changed it')")
    assert guest(node, a, "print(open('/workspace/mark.txt').read())").strip() == "from a"
    assert guest(node, f2, "print(open('/workspace/mark.txt').read())").strip() == "from a"
    assert any(e["kind"] == "note" and e["detail"].get("forks") == [f1, f2] for e in transcript(hub, a))

    # The hub (and its node's machines) go down and come back: each workspace is where it was, a fork
    # boots from its own files (not forked again).
    rt.close()
    node.stop_all()
    rt2 = AgentRuntime(hub, node=str(hub.folders.state / "node.sock"))
    hub.runtime = rt2
    rt2.start()
    try:
        kick(hub, rt2)
        wait_for("all three back", lambda: all(c in node.runs and node.runs[c].machine.running() and c in rt2.applied
                                               for c in (a, f1, f2)), 300)
        assert guest(node, f1, "print(open('/workspace/mark.txt').read())").strip() == "f1 changed it"
        assert guest(node, a, "print(open('/workspace/mark.txt').read())").strip() == "from a"
    finally:
        rt2.close()


#: From a guest: its kernel pool's next bytes, and whether channeld serves ``unpark`` (or ``park``) to it.
GUEST_OWN = r"""
import os, socket
res = [os.urandom(16).hex()]
for svc in (b"unpark\n", b"park\n"):
    s = socket.socket(socket.AF_UNIX); s.connect("/run/apz/channel.sock"); s.sendall(svc)
    res.append("OPEN" if s.recv(100) else "CLOSED")
print(" ".join(res))
"""


def test_agents_restored_from_the_warm_template_go_on_each_as_itself(folders, image, tmp_path):
    # The first agent boots cold and is saved as the template with its harness parked; the next two
    # are restored from it at once and their parked harnesses let go: each says hello as its own cid
    # (the node's word), draws its own randomness, and no guest can ask for a park or an unpark.
    with hub_with_node(folders, image, tmp_path, templates_dir=folders.data / "templates") as (hub, node, rt):
        owner = hub.commands.context("owner")
        (a,) = ac.spawn(hub.commands, owner, "builder", 1).value
        kick(hub, rt)
        wait_for("the first agent idle", lambda: roster(hub).get(a, {}).get("status") == "idle")
        assert node.runs[a].machine.booted_from == "cold"
        b, c = ac.spawn(hub.commands, owner, "builder", 2).value
        kick(hub, rt)
        wait_for("both restored agents idle",
                 lambda: all(roster(hub).get(x, {}).get("status") == "idle" for x in (b, c)))
        assert all(node.runs[x].machine.booted_from.startswith("template:") for x in (b, c))
        assert all(node.runs[x].machine.parked == set() for x in (a, b, c))
        for x in (a, b, c):
            wait_for(f"{x}'s hello", lambda x=x: f"connected as cid {x} " in node.runs[x].harness_log.read_text())
            assert all(f"connected as cid {y} " not in node.runs[x].harness_log.read_text() for y in {a, b, c} - {x})
        outs = [guest(node, x, GUEST_OWN).split() for x in (a, b, c)]
        assert len({o[0] for o in outs}) == 3, outs
        assert all(o[1:] == ["CLOSED", "CLOSED"] for o in outs), outs
