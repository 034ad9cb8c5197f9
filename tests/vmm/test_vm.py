"""Real boots under the host's accelerator (TCG here). Few on purpose: each takes seconds."""
import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.checked_thread import started
from support.deadline import until

from vmm import cgroups
from vmm.backend import VMError
from vmm.channel import ChannelClosed

pytestmark = pytest.mark.vm

NO_NET = r"""
import errno, socket
res = []
for fam, addr in [(socket.AF_INET, ("10.0.2.2", 80)), (socket.AF_INET, ("1.1.1.1", 53)),
                  (socket.AF_INET6, ("2606:4700:4700::1111", 53)), (socket.AF_INET, ("127.0.0.1", 9))]:
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr); res.append("CONNECTED")
    except OSError as e:
        res.append(errno.errorcode.get(e.errno, str(e.errno)))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("8.8.8.8", 53)); res.append("SENT")
except OSError as e:
    res.append(errno.errorcode.get(e.errno, str(e.errno)))
try:
    v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); v.settimeout(3); v.connect((2, 1024)); res.append("CONNECTED")
except OSError as e:
    res.append(errno.errorcode.get(e.errno, str(e.errno)))
print(" ".join(res))
"""

VIA_CHANNEL = r"""
import socket
s = socket.socket(socket.AF_UNIX); s.connect("/run/apz/channel.sock")
s.sendall(b"gateway\n"); s.sendall(b"ping"); s.shutdown(socket.SHUT_WR)
print(s.makefile("rb").read().decode())
"""


#: channeld's priority in the guest (vmm/guest/channeld.py's NICE; that file runs only in the guest).
NICE = int(re.search(r"^NICE = (-?\d+)$", (Path(__file__).resolve().parents[2] / "vmm" / "guest" / "channeld.py")
                     .read_text(), re.M).group(1))


def _qemu_pid(m):
    kids = Path(f"/proc/{m.proc.pid}/task/{m.proc.pid}/children").read_text().split()
    return int(kids[0]) if m.jailed else m.proc.pid


def test_guest_boots_to_channel_only_lo_and_no_way_out(make_machine):
    m = make_machine("walls", memory_mib=192)
    m.boot(timeout=60)
    assert m.channel.peer_hello["role"] == "guest"
    rc, out = m.exec(["ls", "/sys/class/net"])
    assert rc == 0 and out.split() == [b"lo"]
    # channeld runs ahead of the guest's own programs; what it starts runs at the ordinary priority
    rc, out = m.exec(["sh", "-c", "cut -d' ' -f19 /proc/1/stat; cut -d' ' -f19 /proc/self/stat"])
    assert rc == 0 and out.split() == [str(NICE).encode(), b"0"], out
    rc, out = m.exec(["python3", "-c", NO_NET])
    # 127.0.0.1:9 is lo with nothing listening; every other address has no route
    assert out.decode().split() == ["ENETUNREACH", "ENETUNREACH", "ENETUNREACH", "ECONNREFUSED",
                                    "ENETUNREACH", "EAFNOSUPPORT"], out
    # the one way out is the channel: a guest program reaches a host service
    def serve():
        st = m.channel.accept(30)
        assert st.meta["service"] == "gateway"
        assert st.read_all(30) == b"ping"
        st.write(b"pong")
        st.close()
    t = started(serve)
    rc, out = m.exec(["python3", "-c", VIA_CHANNEL])
    t.join(30)
    assert out.strip() == b"pong"
    # flow control over the real port: 1 MiB through the guest's echo service
    blob = os.urandom(1 << 20)
    st = m.channel.open("echo")
    w = started(lambda: (st.write(blob), st.close()))
    assert st.read_all(120) == blob
    w.join(30)
    # the guest's memory is the spec's
    rc, out = m.exec(["sh", "-c", "grep MemTotal /proc/meminfo"])
    assert int(out.split()[1]) <= 192 * 1024
    # pause / resume over QMP
    m.pause()
    assert m.status() == "paused"
    m.resume()
    assert m.status() == "running"
    # the walls around QEMU itself: always there for root (CI); without root no jail can be built
    assert m.jailed == (os.geteuid() == 0), m.notes
    if m.jailed:
        pid = _qemu_pid(m)
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(l.split(":", 1) for l in status.splitlines())
        assert int(fields["CapEff"].strip(), 16) == 0 and int(fields["CapBnd"].strip(), 16) == 0
        assert fields["NoNewPrivs"].strip() == "1"
        assert fields["Seccomp"].strip() == "2"          # QEMU's -sandbox filter
        assert fields["Uid"].split()[0] == str(m._uid())
        for ns in ("mnt", "user", "pid", "net"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
        top = sorted(os.listdir(f"/proc/{pid}/root"))
        assert "home" not in top and "root" not in top and "etc" not in top, top
        assert "vm" in top
    assert m.stop() == 0
    assert not m.running()


def test_data_volume_shared_by_two_guests_and_read_only(make_machine, tmp_path):
    from vmm.backend import Volume
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "hello.txt").write_text("shared data\n")
    img = tmp_path / "corpus.ext4"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(src), str(img), "16M"], check=True)
    os.chmod(img, 0o644)
    before = hashlib.sha256(img.read_bytes()).hexdigest()
    vol = Volume("corpus", img)
    a, b = make_machine("vola", volumes=(vol,)), make_machine("volb", volumes=(vol,))
    ta = started(a.boot)
    b.boot()
    ta.join(120)
    probe = ("import errno\nprint(open('/data/corpus/hello.txt').read().strip())\n"
             "try:\n open('/data/corpus/new','w')\nexcept OSError as e: print(errno.errorcode[e.errno])\n"
             "try:\n open('/data/corpus/hello.txt','a')\nexcept OSError as e: print(errno.errorcode[e.errno])\n"
             "print([l.split()[3] for l in open('/proc/mounts') if ' /data/corpus ' in l][0])\n")
    for m in (a, b):
        rc, out = m.exec(["python3", "-c", probe])
        lines = out.decode().split()
        assert lines[:3] == ["shared", "data", "EROFS"] and lines[3] == "EROFS", out
        opts = lines[4].split(",")
        assert "ro" in opts and "nosuid" in opts and "nodev" in opts
    a.stop(), b.stop()
    assert hashlib.sha256(img.read_bytes()).hexdigest() == before


def test_workspace_survives_restart_and_goes_with_wipe(make_machine):
    m = make_machine("ws")
    m.boot()
    assert m.exec(["sh", "-c", "echo kept > /workspace/note && sync"])[0] == 0
    m.stop()
    m.boot()
    assert m.exec(["cat", "/workspace/note"]) == (0, b"kept\n")
    m.stop()
    m.wipe()
    m.boot()
    rc, _ = m.exec(["cat", "/workspace/note"])
    assert rc != 0
    m.stop()


# Fills all but this much of the guest's available memory (one touched page at a time).
HOG_SPARE_MIB = 24
HOG = ("n = int([l.split()[1] for l in open('/proc/meminfo') if l.startswith('MemAvailable')][0]) * 1024"
       f" - ({HOG_SPARE_MIB} << 20)\nb = b'x' * n\nprint(n)")


def test_memory_cpu_and_pids_limits_enforced(make_machine):
    cg, why = cgroups.detect()
    assert cg is not None, f"no cgroup controllers usable for the VM's limits here: {why}"
    # 16 MiB over the guest's memory: less than QEMU itself takes once the guest has touched it all
    m = make_machine("mem", memory_mib=256, memory_overhead_mib=16, cpu_max=1.5, pids_max=128)
    m.boot()
    limit = (256 + 16) << 20
    assert m.cgroup.limits() == {"memory": limit, "cpu": 1.5, "pids": 128}
    qemu = str(_qemu_pid(m))
    assert all(qemu in procs for procs in m.cgroup.procs()), m.cgroup.folders
    assert m.cgroup.memory_current() <= limit
    # the guest fills its memory: QEMU goes past the cap and the host kernel kills it
    with pytest.raises(ChannelClosed):
        m.exec(["python3", "-c", HOG], timeout=120)
    until("QEMU is killed at its memory limit", lambda: m.proc.poll() is not None, 30)
    assert m.cgroup.memory_events()["oom_kill"] >= 1


def test_a_limit_the_kernel_refuses_stops_a_real_start(make_machine):
    cg, why = cgroups.detect()
    assert cg is not None, f"no cgroup controllers usable for the VM's limits here: {why}"
    # the kernel takes a CPU quota of at least 1 ms a period: 0.5 ms cannot be written
    m = make_machine("lim", cpu_max=0.005)
    with pytest.raises(VMError, match="lim not started: .*cannot write '500'"):
        m.boot()
    assert m.proc is None and m.cgroup is None and not m.running()
    assert not any(f.exists() for f in cg.folders(m.cgroup_name()))        # no half-made cgroup stays behind


def test_a_guest_whose_init_cannot_go_on_says_why_and_ends(make_machine, monkeypatch):
    # the guest's /init waits a while for a disk the command line promises and that never comes, then
    # says why on the console and ends the guest (-no-reboot: QEMU exits) rather than hanging
    from vmm.qemu import QemuMachine
    plain = QemuMachine.kernel_cmdline
    monkeypatch.setattr(QemuMachine, "kernel_cmdline", lambda self: plain(self) + " apz.disks=3")
    m = make_machine("noroot", memory_mib=192)
    with pytest.raises(VMError, match="apz-init: only 2 of 3 disks"):
        m.boot(timeout=120)
    until("QEMU to end after the guest's init failed", lambda: not m.running(), 30)


def test_a_jailed_start_takes_the_spare_helper_and_a_stopped_vm_leaves_no_cgroup(make_machine):
    """After a jailed start the process keeps one jail helper started ahead in cgroup folders of its own
    (vmm.jail): the next start takes it (no move into a cgroup on its path), gets its own limits and names,
    and every folder goes when the VM stops, the spare's too once nothing takes it."""
    from vmm import jail
    from vmm import spare as spare_qemu

    cg, why = cgroups.detect()
    assert cg is not None, f"no cgroup controllers usable for the VM's limits here: {why}"
    first = make_machine("spare-a", memory_mib=192)
    first.boot(timeout=60)
    assert first.jailed, first.notes
    spare = until("a spare helper is started after the first start", lambda: jail.spare_ready(cg.folders), 30)
    second = make_machine("spare-b", memory_mib=192, memory_overhead_mib=40, pids_max=96)
    second.boot(timeout=60)
    assert second.proc.pid == spare                         # the spare became the VM's helper
    assert second.cgroup.limits()["memory"] == (192 + 40) << 20 and second.cgroup.limits()["pids"] == 96
    assert all(str(_qemu_pid(second)) in p and str(spare) in p for p in second.cgroup.procs())
    assert all(f.name == f"vm-{second.cgroup_name()}" for f in second.cgroup.folders)
    assert second.exec(["/bin/true"])[0] == 0
    folders = first.cgroup.folders + second.cgroup.folders
    first.kill()
    second.kill()
    assert not [f for f in folders if f.exists()]            # QEMU ends after its helper: waited for
    nxt = until("the next spare helper", lambda: jail.spare_ready(cg.folders), 30)
    jail._end_spares()                                       # what the process's exit does
    spare_qemu._end_all()
    assert not Path(f"/proc/{nxt}").exists() or Path(f"/proc/{nxt}/stat").read_text().split()[2] == "Z"
    leftovers = [n for f in cg.folders("x") for n in os.listdir(f.parent) if n.startswith(f"vm-spare.{os.getpid()}.")]
    assert not leftovers, leftovers
