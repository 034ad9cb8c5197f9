"""Walls around each VMM process: namespaces, a private root, no privileges, its cgroups.

``spawn(argv, JailSpec)`` starts this file as a helper (real root, outside):

1. the caller moves the helper into the VM's cgroups (``vmm.cgroups``; limits were written before)
   while the helper's interpreter starts, then hands it argv and the spec on its stdin;
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

The helper is ``vmm/jail_helper.py``, run as a script; it imports only the standard library.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("vmm.jail")
#: The helper script (root, outside): kept apart so what stays resident beside each VM is small.
HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jail_helper.py")

@dataclasses.dataclass
class JailSpec:
    root: str                       # an empty host folder to build the private root on
    uid: int                        # unprivileged host uid QEMU runs as (root inside its userns)
    ro: dict = dataclasses.field(default_factory=dict)    # jail path -> host path, read-only
    rw: dict = dataclasses.field(default_factory=dict)    # jail path -> host path, writable
    devices: tuple = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
    cgroups: tuple = ()          # cgroup folders to join first (one on v2, one per controller on v1)
    #: descriptor number (as a string) -> host file, opened read-only by the helper (root) and passed to
    #: QEMU: a file the VM's uid could not open itself (a data volume's 0600 image)
    fds: dict = dataclasses.field(default_factory=dict)


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
    """Start argv inside the jail (its stdin /dev/null). Returns the helper's Popen; kill it and the VM goes.

    The helper is moved into the VM's cgroups from here while its interpreter starts, and reads argv and
    the spec from its stdin only then, so nothing it forks starts outside them. The first move into a
    cgroup after a quiet spell waits for the kernel (an RCU grace period: 10 to 25 ms here), about as long
    as the helper's start: done one after the other, as the helper once did itself, a wake paid both."""
    cfg = json.dumps({"argv": argv, "spec": dataclasses.asdict(spec)}).encode()
    proc = subprocess.Popen([sys.executable, "-S", HELPER], stdin=subprocess.PIPE, start_new_session=True,
                            **popen_kw)
    try:
        for folder in spec.cgroups:
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write(str(proc.pid))
        proc.stdin.write(cfg)
        proc.stdin.close()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


# -- the helper (runs as a script) ----------------------------------------------
