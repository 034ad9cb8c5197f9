"""Crash recovery in real microVMs: the test kills an agent's QEMU process, as a guest crash would end it.

The node starts it again with the same CID, workspace and spec, from its newest snapshot with memory (a
checkpoint here), so the file written before the checkpoint and the process started before it are
back; the node log and the transcript say what it recovered from. Three recoveries within ten minutes
are allowed; a fourth crash leaves it exited (and the hub does not boot it again). With recovery off
(``noded --no-recover``) the first crash leaves it exited."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import pytest
from test_agents_vm import guest, image, kick, plaza, roster, transcript, wait_for  # noqa: F401 - the fixtures

from agentplaza.commands import agents as ac
from vmm.recovery import MAX_RECOVERIES

pytestmark = pytest.mark.vm

# A process started before the checkpoint: it is running again after a recovery from it.
SLEEPER = ("import subprocess as s; s.Popen(['sleep', '3600'], stdin=s.DEVNULL, stdout=s.DEVNULL, "
           "stderr=s.DEVNULL, start_new_session=True)")
SLEEPING = ("import glob\nprint(sum(open(p, 'rb').read() == b'sleep\\x003600\\x00' for p in glob.glob('/proc/[0-9]*/cmdline')))")


def crash(node, cid) -> int:
    """Kill the machine's process (SIGKILL: nothing in the guest or the node is told). Where QEMU is
    jailed this is the jail's helper, and QEMU dies with it (tests/vmm/test_jail.py)."""
    proc = node.runs[cid].machine.proc
    os.kill(proc.pid, signal.SIGKILL)
    return proc.pid


def recovered(hub, cid) -> list:
    return [e for e in transcript(hub, cid) if e["kind"] == "note" and "was recovered from" in (e["text"] or "")]


def test_a_crashed_guest_comes_back_from_its_checkpoint_and_a_fourth_crash_leaves_it_exited(plaza, caplog):  # noqa: F811
    hub, node, rt = plaza
    owner = hub.commands.context("owner")
    (a,) = ac.spawn(hub.commands, owner, "builder", 1).value
    kick(hub, rt)
    wait_for("the agent idle", lambda: roster(hub).get(a, {}).get("status") == "idle")
    guest(node, a, "open('/workspace/mark.txt','w').write('before the crash')")
    guest(node, a, SLEEPER)
    name = node.op_checkpoint({"cid": a, "label": "test"})["name"]
    run = node.runs[a]

    caplog.set_level(logging.WARNING)
    for n in range(1, MAX_RECOVERIES + 1):
        old = crash(node, a)
        wait_for(f"recovery {n}", lambda n=n: len(recovered(hub, a)) == n, 240,
                 diag=lambda: [(e["kind"], (e["text"] or "")[:120]) for e in transcript(hub, a)][-6:])
        wait_for("its harness back", lambda: roster(hub)[a]["status"] == "idle", 120)
        assert node.runs[a] is run and run.machine.running() and run.machine.proc.pid != old
        note = recovered(hub, a)[-1]
        assert note["detail"]["from"] == f"snapshot:{name}" and note["detail"]["recoveries"] == n, note
        # The same workspace and the processes of the checkpoint, running again.
        assert guest(node, a, "print(open('/workspace/mark.txt').read())").strip() == "before the crash"
        assert guest(node, a, SLEEPING).strip() == "1"
    assert f"agent {a}: the VM exited by itself" in caplog.text and f"recovered from snapshot:{name}" in caplog.text

    # The fourth crash within ten minutes: it stays exited, and the hub leaves it stopped.
    ram = run.machine.ram_file
    crash(node, a)
    wait_for("exited", lambda: a not in node.runs and roster(hub)[a]["run"] == "stopped", 120,
             diag=lambda: [(e["kind"], (e["text"] or "")[:120]) for e in transcript(hub, a)][-6:])
    (last,) = [e for e in transcript(hub, a) if e["kind"] == "error" and e["detail"].get("reason")]
    assert f"{MAX_RECOVERIES} recoveries within 10 minutes; staying exited" in last["text"], last
    assert len(recovered(hub, a)) == MAX_RECOVERIES
    assert not [e for e in transcript(hub, a) if "did not start" in (e["text"] or "")]  # not booted again
    kick(hub, rt)
    assert a not in node.runs and roster(hub)[a]["status"] == "offline"
    assert ram is None or not ram.parent.exists()        # its RAM folder went with its process

    # Recovery off (noded --no-recover): the first crash leaves a new agent exited.
    node.backend.recover = False
    (b,) = ac.spawn(hub.commands, owner, "builder", 1).value
    kick(hub, rt)
    wait_for("agent b idle", lambda: roster(hub).get(b, {}).get("status") == "idle")
    assert not node.runs[b].machine.keep_alive
    ram = node.runs[b].machine.ram_file
    crash(node, b)
    wait_for("b exited", lambda: b not in node.runs and roster(hub)[b]["run"] == "stopped", 120)
    assert ram is None or not ram.parent.exists()        # (once left in the RAM folder for good)
    assert recovered(hub, b) == []
    (last,) = [e for e in transcript(hub, b) if e["kind"] == "error" and e["detail"].get("reason")]
    assert "recovery is off" in last["text"]
    assert not [e for e in transcript(hub, b) if "did not start" in (e["text"] or "")]  # not booted again


def test_noded_has_the_no_recover_option():
    out = subprocess.run([sys.executable, "-m", "agentplaza.adapters.kvm.noded", "--help"],
                         capture_output=True, text=True, timeout=60).stdout
    assert "--no-recover" in out
