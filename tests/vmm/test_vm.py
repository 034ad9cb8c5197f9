"""Real boots under the host's accelerator (TCG here). Few on purpose: each takes seconds."""
import hashlib
import os
import subprocess
import threading
from pathlib import Path

import pytest

from vmm.jail import Cgroups

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


def _qemu_pid(m):
    kids = Path(f"/proc/{m.proc.pid}/task/{m.proc.pid}/children").read_text().split()
    return int(kids[0]) if m.jailed else m.proc.pid


def test_guest_boots_to_channel_only_lo_and_no_way_out(make_machine):
    m = make_machine("walls", memory_mib=192)
    m.boot(timeout=60)
    assert m.channel.peer_hello["role"] == "guest"
    rc, out = m.exec(["ls", "/sys/class/net"])
    assert rc == 0 and out.split() == [b"lo"]
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
    t = threading.Thread(target=serve)
    t.start()
    rc, out = m.exec(["python3", "-c", VIA_CHANNEL])
    t.join(30)
    assert out.strip() == b"pong"
    # flow control over the real port: 1 MiB through the guest's echo service
    blob = os.urandom(1 << 20)
    st = m.channel.open("echo")
    w = threading.Thread(target=lambda: (st.write(blob), st.close()))
    w.start()
    assert st.read_all(120) == blob
    w.join()
    # the guest's memory is the spec's
    rc, out = m.exec(["sh", "-c", "grep MemTotal /proc/meminfo"])
    assert int(out.split()[1]) <= 192 * 1024
    # pause / resume over QMP
    m.pause()
    assert m.status() == "paused"
    m.resume()
    assert m.status() == "running"
    # the walls around QEMU itself
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
    ta = threading.Thread(target=a.boot)
    ta.start()
    b.boot()
    ta.join()
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


def test_memory_limit_enforced_where_cgroups_allow(make_machine):
    cg, why = Cgroups.detect()
    if cg is None:
        pytest.skip(f"no delegated cgroup v2 hierarchy here: {why}")
    m = make_machine("mem", memory_mib=128, memory_overhead_mib=160)
    m.boot()
    assert m.cgroup is not None
    assert (m.cgroup / "memory.max").read_text().strip() == str((128 + 160) << 20)
    assert str(_qemu_pid(m)) in (m.cgroup / "cgroup.procs").read_text().split()
    assert int((m.cgroup / "memory.current").read_text()) <= (128 + 160) << 20
    m.stop()
