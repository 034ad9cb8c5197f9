"""Snapshots on real guests (TCG here). Few on purpose: each boot takes seconds.

A counter process in the guest writes an increasing number to /tmp/count (a
tmpfs: guest memory only). If it keeps counting from where it was after a
wake or a restore, the guest's memory survived; a reboot would lose the file.
"""
import os
import signal
import time
from pathlib import Path

import pytest
from support.deadline import until

from vmm import MachineBusy, VMError
from vmm.backend import MachineSpec
from vmm.disks import data_extents
from vmm.move import move
from vmm.qemu import QemuMachine
from vmm.templates import Templates

pytestmark = pytest.mark.vm
WRONG_BY_S = 3600       # how far the guest's clock is set back before it sleeps

COUNTER = ("(i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count;"
           " sleep 0.05; done) >/dev/null 2>&1 </dev/null &")


def start_counter(m):
    assert m.exec(["/bin/sh", "-c", COUNTER])[0] == 0
    assert wait_count(m, 1) >= 1


def count(m) -> int:
    rc, out = m.exec(["cat", "/tmp/count"])
    assert rc == 0, out
    return int(out)


def wait_count(m, above: int) -> int:
    """The counter's value once it is past ``above`` (it is running)."""
    def past():
        try:
            n = count(m)
        except (AssertionError, ValueError):
            return None
        return n if n > above else None
    return until(f"the guest's counter passes {above}", past, 60, every=0.05)


def guest_file(m, path):
    rc, out = m.exec(["cat", path])
    return out.decode() if rc == 0 else None


def qemu_pid(m) -> int:
    if m.jailed:
        kids = Path(f"/proc/{m.proc.pid}/task/{m.proc.pid}/children").read_text().split()
        return int(kids[0])
    return m.proc.pid


def test_sleep_wake_keeps_memory_and_files_then_moves(make_machine, tmp_path):
    m = make_machine("sleeper")
    m.boot()
    start_counter(m)
    assert m.exec(["/bin/sh", "-c", "echo before-sleep > /workspace/note"])[0] == 0
    n = count(m)
    # The guest's clock goes an hour wrong before the sleep: only a clock set from the host on
    # wake reads, at wake, between the host's clock before wake() and after that read.
    assert m.exec(["date", "-s", f"@{int(time.time()) - WRONG_BY_S}"])[0] == 0
    man = m.sleep()
    assert not m.running() and m.sleeping and m.rss_bytes() == 0
    assert man.memory and man.format == 1 and man.backend == "qemu-microvm"
    assert man.memory_bytes < (m.spec.memory_mib << 20) // 2    # unused memory takes no space
    host_before = time.time()
    m.wake()
    rc, out = m.exec(["date", "+%s.%N"])
    host_after = time.time()
    assert rc == 0 and host_before <= float(out) <= host_after, (host_before, out, host_after)
    assert m.booted_from == "snapshot:sleep" and m.phase == "running"
    after = count(m)
    assert after >= n            # not a reboot: /tmp (guest memory) kept the count
    assert wait_count(m, after) > after          # and the process still counts
    assert guest_file(m, "/workspace/note") == "before-sleep\n"
    # a second sleep and a wake via boot(); then a move to another base folder
    m.sleep()
    assert m.disks.layers == ["base.ext4", "L0001.qcow2"]    # the wake's layer merged: no growth
    other = tmp_path / "node2"
    moved = move(m, other)
    assert not m.dir.exists() and moved.sleeping
    f = moved.move_figures
    assert f["bytes_sent"] < f["apparent_bytes"] / 5       # holes were not sent
    try:
        moved.boot()
        n2 = count(moved)
        assert n2 >= after and wait_count(moved, n2) > n2
        assert guest_file(moved, "/workspace/note") == "before-sleep\n"
    finally:
        moved.kill()


def test_checkpoint_rollback_and_undo(make_machine):
    m = make_machine("cp")
    m.boot()
    start_counter(m)
    at_cp = count(m)  # read before the checkpoint: the counter goes on between its snapshot and a read after it
    cp = m.checkpoint(label="before upgrade")
    assert cp == "snap-1"
    assert m.exec(["/bin/sh", "-c", "echo risky > /workspace/after"])[0] == 0
    later = wait_count(m, at_cp + 20)
    disk = m.checkpoint(label="files only", disk_only=True)
    safety = m.restore(cp)
    got = {c["name"]: c for c in m.checkpoints()}
    assert got[safety]["label"] == "before-restore" and got[safety]["memory"]
    assert got[cp]["label"] == "before upgrade" and not got[disk]["memory"]
    assert guest_file(m, "/workspace/after") is None             # file written after cp: gone
    back = count(m)
    assert at_cp <= back < later                                  # memory of the checkpoint
    assert wait_count(m, back) > back
    m.restore(safety)                                             # undo the rollback
    assert guest_file(m, "/workspace/after") == "risky\n"
    assert count(m) >= later
    m.delete_checkpoint(disk)
    assert disk not in {c["name"] for c in m.checkpoints()}
    with pytest.raises(VMError):
        m.restore("snap-99")
    m.kill()


def test_forks_diverge(make_machine, vm_dir):
    src = make_machine("src")
    src.boot()
    start_counter(src)
    assert src.exec(["/bin/sh", "-c", "echo shared > /workspace/base"])[0] == 0
    name, forks = src.fork([MachineSpec("fork-a", image=src.spec.image, cid=101),
                            MachineSpec("fork-b", image=src.spec.image, cid=102)])
    try:
        a, b = forks
        assert a.booted_from == f"snapshot:{name}" and b.running()
        assert a.disks.dir != b.disks.dir != src.disks.dir
        assert a.exec(["/bin/sh", "-c", "echo A > /workspace/mine"])[0] == 0
        assert b.exec(["/bin/sh", "-c", "echo B > /workspace/mine"])[0] == 0
        assert guest_file(a, "/workspace/mine") == "A\n" and guest_file(b, "/workspace/mine") == "B\n"
        assert guest_file(src, "/workspace/mine") is None
        assert guest_file(a, "/workspace/base") == "shared\n"
        assert count(a) >= 1 and wait_count(b, count(b)) > 0     # the counter came along
        ra = a.exec(["head", "-c", "16", "/dev/urandom"])[1]
        rb = b.exec(["head", "-c", "16", "/dev/urandom"])[1]
        assert ra != rb                                          # fresh entropy each
    finally:
        for f in forks:
            f.kill()
        src.kill()


def test_template_restore_reaches_ready(guest_image, vm_dir, tmp_path):
    tpl = Templates(tmp_path / "templates")
    spec = dict(image=guest_image, memory_mib=192)
    first = QemuMachine(MachineSpec("t1", **spec), vm_dir, templates=tpl)
    second = QemuMachine(MachineSpec("t2", **spec), vm_dir, templates=tpl)
    try:
        first.boot()
        assert first.booted_from == "cold"
        listed = tpl.list()
        assert len(listed) == 1 and listed[0]["memory_mib"] == 192
        assert first.exec(["/bin/sh", "-c", "echo first > /workspace/x"])[0] == 0
        second.boot()
        assert second.booted_from == f"template:{listed[0]['key']}"
        assert second.exec(["echo", "ready"]) == (0, b"ready\n")
        assert guest_file(second, "/workspace/x") is None            # its own workspace copy
        assert tpl.remove(listed[0]["key"]) and tpl.list() == []
        assert second.exec(["/bin/sh", "-c", "echo ok > /workspace/y && cat /workspace/y"]) == (0, b"ok\n")
    finally:
        first.kill()
        second.kill()


#: Held by channeld until unparked (stdin closed): then says what it draws from the guest's pool.
PARKED = {"waiter": {"argv": ["/bin/sh", "-c", "cat >/dev/null; echo released; head -c 16 /dev/urandom | od -An -tx1"],
                     "cwd": "/workspace"},
          # a Python program parked as the node parks its harness: its random module was seeded in the template;
          # it takes a while to get to its wait, and the template is saved only once it is there
          "py": {"argv": ["/usr/bin/python3", "-S", "-c",
                          "import os, random, sys, time; sys.path.insert(0, '/opt/apz'); import contract; "
                          "time.sleep(1.5); open('/tmp/py-waits', 'w').close(); "
                          "contract.unparked(); print(random.getrandbits(64), os.urandom(16).hex())"],
                 "cwd": "/workspace", "env": {"APZ_HARNESS_PARKED": "1"}}}


def test_template_holds_a_parked_program_each_copy_lets_go_with_its_own_randomness(guest_image, vm_dir,
                                                                                    tmp_path):
    tpl = Templates(tmp_path / "templates", parked=PARKED)
    spec = dict(image=guest_image, memory_mib=192)
    ms = [QemuMachine(MachineSpec(f"p{i}", **spec, cid=40 + i), vm_dir, templates=tpl) for i in range(3)]
    try:
        for m in ms:
            m.boot()
        assert ms[0].booted_from == "cold" and all(m.booted_from.startswith("template:") for m in ms[1:])
        outs, pys = [], []
        for m in ms:
            assert m.parked == {"waiter", "py"}
            # each copy has the Python program where it waits, not still on its way there
            assert m.exec(["test", "-e", "/tmp/py-waits"])[0] == 0
            st = m.unpark("waiter")
            st.close()
            out = st.read_all(30)
            assert st.close_info.get("exit") == 0 and out.startswith(b"released\n"), out
            outs.append(out)
            st = m.unpark("py")
            st.close()
            out = st.read_all(60)
            assert st.close_info.get("exit") == 0, out
            pys.append(out.split())
            assert m.parked == set()
            with pytest.raises(VMError):
                m.unpark("waiter")
        assert len(set(outs)) == 3        # the copies reseeded: no two draw the same bytes
        # the parked Python program: its random module and the kernel's pool are its own in each copy
        assert len({p[0] for p in pys}) == 3 and len({p[1] for p in pys}) == 3, pys
        # unparked once only: channeld holds nothing more of that name
        st = ms[1].channel.open("unpark", name="waiter")
        st.close()
        st.read_all(30)
        assert st.close_info.get("exit") == 127
    finally:
        for m in ms:
            m.kill()


def test_crash_recovery_from_checkpoint_then_stays_exited(guest_image, vm_dir):
    m = QemuMachine(MachineSpec("crashy", image=guest_image), vm_dir, keep_alive=True)
    try:
        m.boot()
        start_counter(m)
        m.checkpoint()
        assert m.exec(["/bin/sh", "-c", "echo lost > /workspace/after"])[0] == 0
        for i in range(3):
            old = m.proc
            os.kill(qemu_pid(m), signal.SIGKILL)
            until("the machine recovers", lambda: m.proc is not old and m.phase == "running", 30)
            assert m.phase == "running" and len(m.recoveries) == i + 1
            assert m.recoveries[-1][1] == "snap-1"
            assert guest_file(m, "/workspace/after") is None      # back at the checkpoint
            assert wait_count(m, 0) > 0                            # its memory, counting
        os.kill(qemu_pid(m), signal.SIGKILL)                       # the fourth in ten minutes
        until("the machine stays exited", lambda: m.phase == "exited", 30)
        assert m.phase == "exited" and not m.running() and len(m.recoveries) == 3
        with pytest.raises((MachineBusy, VMError)):
            m.exec(["true"])
    finally:
        m.kill()


def _spare_ready(m):
    """The spare ready for ``m``; the reason at once where its making failed (``spare.last_error``)."""
    from vmm import spare as spare_qemu
    key = spare_qemu.key_of(m)
    with spare_qemu._lock:
        sp = spare_qemu._ready.get(key)
        failed = sp is None and key not in spare_qemu._wanted and spare_qemu.last_error
    assert not failed, f"no spare QEMU: {spare_qemu.last_error}"
    return sp


def test_a_wake_takes_the_qemu_started_ahead_in_its_own_walls_and_keeps_the_guest(make_machine, vm_dir,
                                                                                    monkeypatch):
    """After a jailed start the process starts the next restore's QEMU ahead (vmm.spare): a wake of a
    machine of that shape takes it. It has the jail (no capabilities, seccomp, its own namespaces, its own
    uid, not the host's), the machine's limits and cgroup, the machine's workspace and memory, a refreshed
    clock; nothing of the spare is left once the machine stops. A spare that cannot take the workspace
    gives way to a QEMU of the machine's own."""
    from vmm import spare as spare_qemu
    if os.geteuid() != 0:
        pytest.skip("spare QEMUs are jailed: root only")
    from vmm import qemu
    room = os.statvfs(qemu.RAM_DIR) if os.path.isdir(qemu.RAM_DIR) else None
    if room is None or room.f_bavail * room.f_frsize < 2 * (192 << 20):
        pytest.skip(f"a spare's RAM file and the machine's need room in {qemu.RAM_DIR} (a container's "
                    f"64 MiB /dev/shm has none): no spare is made there")
    monkeypatch.setattr(spare_qemu, "last_error", None)   # (one of an earlier test in this process)
    # a machines folder deep in a tree, as CI's: a socket's path there is past the 108 bytes an address holds
    deep = vm_dir / ("deep-" * 12) / "machines"
    deep.mkdir(parents=True)
    for d in (deep.parent, deep):
        os.chmod(d, 0o755)
    m = make_machine("ahead", base_dir=deep, memory_mib=192, memory_overhead_mib=40)
    assert len(str(deep / ".spare.4194304.64" / "run" / "channel.sock")) > 108
    m.boot()
    start_counter(m)
    assert m.exec(["/bin/sh", "-c", "echo kept > /workspace/note"])[0] == 0
    assert m.exec(["date", "-s", f"@{int(time.time()) - WRONG_BY_S}"])[0] == 0
    m.sleep()
    sp = until("a QEMU started ahead", lambda: _spare_ready(m), 60)
    spare_dir, spare_ram = sp.dir, sp.ram
    # a fresh RAM file, pages allocated (zeros) where the sleep snapshot has data, nothing else
    with open(m.snap_dir / "sleep" / "memory.ram", "rb") as f:
        assert sp.ready_pages == list(data_extents(f.fileno(), os.fstat(f.fileno()).st_size))
    assert spare_ram.stat().st_blocks * 512 == sum(b - a for a, b in sp.ready_pages)
    assert not any(p.name.startswith("L") for p in (sp.dir / "disks").iterdir())   # none of a workspace
    host_before = time.time()
    m.wake()
    assert m.proc is sp.helper.proc and m._spare_vm is sp                  # the spare is this machine's QEMU
    rc, out = m.exec(["date", "+%s.%N"])
    assert rc == 0 and host_before <= float(out) <= time.time()
    assert guest_file(m, "/workspace/note") == "kept\n"
    n = count(m)
    assert wait_count(m, n) > n                                            # the same processes go on
    pid = qemu_pid(m)
    fields = dict(ln.split(":", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert int(fields["CapEff"].strip(), 16) == 0 and fields["Seccomp"].strip() == "2"
    assert int(fields["Uid"].split()[0]) == sp.uid >= spare_qemu.SPARE_UID_BASE
    # made at a low priority, it runs at the ordinary one once taken: its helper and every QEMU thread
    for task in [Path(f"/proc/{m.proc.pid}")] + list(Path(f"/proc/{pid}/task").iterdir()):
        assert (task / "stat").read_text().rsplit(")", 1)[1].split()[16] == "0", task
    for ns in ("mnt", "user", "pid", "net"):
        assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
    assert m.cgroup.limits()["memory"] == (192 + 40) << 20
    assert all(str(pid) in p for p in m.cgroup.procs())
    assert m.ram_file == sp.ram and sp.ram.stat().st_uid == sp.uid and not spare_ram.exists()
    assert sp.ready_pages == []                                            # used or given back
    assert sp.ram.parent.name.startswith(m._ram_prefix())                  # named as the machine's
    ram_now = sp.ram
    # the workspace's writes go to the machine's own top layer, and survive another sleep and wake
    assert m.exec(["/bin/sh", "-c", "echo after > /workspace/note2; sync"])[0] == 0
    m.sleep()
    assert not spare_dir.exists() and not ram_now.parent.exists()          # nothing of the spare left
    # a spare that refuses the workspace: the wake goes on with a QEMU of its own
    until("the next QEMU started ahead", lambda: _spare_ready(m), 60)

    def refuse(*a, **k):
        raise spare_qemu.DiskError("refused for the test")
    monkeypatch.setattr(spare_qemu, "adopt", refuse)
    m.wake()
    assert m._spare_vm is None and any("spare QEMU not used" in n for n in m.notes), m.notes
    assert guest_file(m, "/workspace/note2") == "after\n"
    assert wait_count(m, count(m)) > 0
    m.kill()
    spare_qemu._end_all()
    assert not [p for p in m.base_dir.iterdir() if p.name.startswith(spare_qemu.PREFIX)]
