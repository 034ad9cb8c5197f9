"""Walls around each VMM process: namespaces, a private root, no privileges, its cgroups.

``spawn(argv, JailSpec)`` starts this file as a helper (real root, outside):

1. the helper joins the VM's cgroups (``vmm.cgroups``; limits were written before, by the caller);
2. unshares mount, PID, network, IPC and UTS namespaces and forks; the child is
   PID 1 of the new PID namespace, dies with the helper (PDEATHSIG);
3. the child builds a private root on a tmpfs holding only QEMU, its libraries,
   its firmware, a few device nodes and the VM's own files (bind mounts,
   read-only except the VM's run folder and workspace disk), pivot_roots into
   it and drops the old root;
4. it unshares a user namespace; the helper maps root inside to an
   unprivileged host uid (``JailSpec.uid``); the child drops every capability
   (bounding set, securebits, capset), sets no_new_privs and execs QEMU, which
   then also installs its own seccomp filter (``-sandbox on``).

Needs root (CAP_SYS_ADMIN) on the host. ``available()`` checks at run time and
says why not where a wall cannot be built.

This file runs as a script for the helper, so it imports only the standard library.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("vmm.jail")

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 38, 24, 28
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
SYS_pivot_root, SYS_capset = 155, 126
SECBITS_LOCKED_ALL = 0x3f  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED and their locks

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src, target, fstype, flags, data=None) -> None:
    _check(_libc.mount(src and str(src).encode(), str(target).encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), data and data.encode()), f"mount {src} on {target}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


@dataclasses.dataclass
class JailSpec:
    root: str                       # an empty host folder to build the private root on
    uid: int                        # unprivileged host uid QEMU runs as (root inside its userns)
    ro: dict = dataclasses.field(default_factory=dict)    # jail path -> host path, read-only
    rw: dict = dataclasses.field(default_factory=dict)    # jail path -> host path, writable
    devices: tuple = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
    cgroups: tuple = ()          # cgroup folders to join first (one on v2, one per controller on v1)


# -- the parent side -------------------------------------------------------------
def available() -> tuple:
    """(True, "") if the jail can be built here, else (False, why)."""
    if os.geteuid() != 0:
        return False, "the jail needs root to build namespaces and bind mounts (running unjailed)"
    try:
        maxns = int(Path("/proc/sys/user/max_user_namespaces").read_text())
        if maxns == 0:
            return False, "user namespaces are disabled (user.max_user_namespaces=0)"
    except OSError:
        pass
    return True, ""


def qemu_files(qemu: str, accel: str = "tcg") -> dict:
    """Host files QEMU needs inside its jail: binary, shared libraries, accel module, firmware.
    Worked out once per QEMU binary (``ldd`` at every start cost a wake tens of milliseconds)."""
    qemu = os.path.realpath(qemu)
    st = os.stat(qemu)
    key = (qemu, accel, st.st_mtime_ns, st.st_size)
    if key not in _QEMU_FILES:
        _QEMU_FILES[key] = _qemu_files(qemu, accel)
    return dict(_QEMU_FILES[key])


_QEMU_FILES: dict = {}


def _qemu_files(qemu: str, accel: str) -> dict:
    files = {qemu: qemu}
    objs = [qemu]
    moddir = "/usr/lib/x86_64-linux-gnu/qemu"
    if accel == "tcg":
        mod = f"{moddir}/accel-tcg-x86_64.so"
        if os.path.exists(mod):
            files[mod] = mod
            objs.append(mod)
    for obj in objs:
        out = subprocess.run(["ldd", obj], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            for p in parts:
                if p.startswith("/"):
                    files[p] = os.path.realpath(p)
    for fw in ("bios-microvm.bin", "qboot.rom", "linuxboot_dma.bin", "linuxboot.bin", "pvh.bin"):
        p = f"/usr/share/qemu/{fw}"
        if os.path.exists(p):
            files[p] = os.path.realpath(p)
    return files


def spawn(argv: list, spec: JailSpec, **popen_kw) -> subprocess.Popen:
    """Start argv inside the jail. Returns the helper's Popen; kill it and the VM goes."""
    cfg = json.dumps({"argv": argv, "spec": dataclasses.asdict(spec)})
    return subprocess.Popen([sys.executable, "-S", os.path.abspath(__file__), cfg],
                            start_new_session=True, **popen_kw)


# -- the helper (runs as a script) ----------------------------------------------
def _drop_all_caps() -> None:
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _check(_libc.prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_ALL, 0, 0, 0), "securebits")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    hdr = Header(0x20080522, 0)
    data = (Data * 2)()
    _check(_libc.syscall(SYS_capset, ctypes.byref(hdr), ctypes.byref(data)), "capset")


def _build_root(spec: dict) -> None:
    root = Path(spec["root"])
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("jail", root, "tmpfs", MS_NOSUID, "mode=755,size=1m")

    def bind(host: str, inner: str, ro: bool, dev: bool = False) -> None:
        t = root / inner.lstrip("/")
        t.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isdir(host):
            t.mkdir(exist_ok=True)
        else:
            t.touch()
        _mount(host, t, None, MS_BIND)
        flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if dev else MS_NODEV) | (MS_RDONLY if ro else 0)
        _mount(None, t, None, flags)

    for inner, host in spec["ro"].items():
        bind(host, inner, True)
    for inner, host in spec["rw"].items():
        bind(host, inner, False)
    for dev in spec["devices"]:
        if os.path.exists(dev):
            bind(dev, dev, False, dev=True)
    (root / "proc").mkdir()
    _mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    (root / "tmp").mkdir(mode=0o1777)
    os.chdir(root)
    (root / ".old").mkdir()
    _check(_libc.syscall(SYS_pivot_root, b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    # The root itself goes read-only: QEMU can write only its run folder and workspace.
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _helper(cfg: dict) -> int:
    spec, argv = cfg["spec"], cfg["argv"]
    for folder in spec.get("cgroups") or ():
        with open(os.path.join(folder, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    # PID/net/IPC/UTS namespaces here; the child makes its own mount namespace,
    # so its pivot_root does not move this helper's root.
    _unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(to_child_w), os.close(to_parent_r)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _unshare(CLONE_NEWNS)
            _build_root(spec)
            _libc.sethostname(b"vmm", 3)
            _unshare(CLONE_NEWUSER)
            os.write(to_parent_w, b"u")
            if os.read(to_child_r, 1) != b"m":
                os._exit(111)
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
            _drop_all_caps()
            os.execv(argv[0], argv)
        except BaseException as e:  # report and die; never fall through to the parent's code
            try:
                os.write(2, f"vmm jail: {e}\n".encode())
            finally:
                os._exit(112)
    os.close(to_child_r), os.close(to_parent_w)
    if os.read(to_parent_r, 1) == b"u":
        uid = int(spec["uid"])
        Path(f"/proc/{pid}/setgroups").write_text("deny")
        Path(f"/proc/{pid}/uid_map").write_text(f"0 {uid} 1\n")
        Path(f"/proc/{pid}/gid_map").write_text(f"0 {uid} 1\n")
        os.write(to_child_w, b"m")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda sig, _f: os.kill(pid, sig))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    return os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8


if __name__ == "__main__":
    rc = _helper(json.loads(sys.argv[1]))
    sys.exit(rc if rc >= 0 else 128 - rc)
