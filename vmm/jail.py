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

import atexit
import dataclasses
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
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


#: How a helper's Popen is made: its stdin carries argv and the spec, its output is the VM's log.
HELPER_OUTPUT = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}


#: Sent to a spare QEMU's helper (``spawn(spare_of=...)``) when a machine takes it: it clears its parent-death
#: signal, so the machine's QEMU outlives this process as every other machine's does.
KEEP_SIGNAL = signal.SIGUSR1


def spawn(argv: list, spec: JailSpec, spare: Spare | None = None, spare_of: int | None = None,
          **popen_kw) -> subprocess.Popen:
    """Start argv inside the jail (its stdin /dev/null). Returns the helper's Popen; kill it and the VM goes.
    With ``spare`` (``take_spare``: a helper started ahead, already in the VM's cgroups) it only hands
    that helper argv and the spec. ``spare_of``: a QEMU started ahead (``vmm.spare``), which dies with this
    process (its helper's parent-death signal) until ``KEEP_SIGNAL`` says a machine took it.

    The helper is moved into the VM's cgroups from here while its interpreter starts, and reads argv and
    the spec from its stdin only then, so nothing it forks starts outside them. The first move into a
    cgroup after a quiet spell waits for the kernel (an RCU grace period: 10 to 25 ms here), about as long
    as the helper's start: done one after the other, as the helper once did itself, a wake paid both."""
    cfg = json.dumps({"argv": argv, "spec": dataclasses.asdict(spec), "spare_of": spare_of}).encode()
    if spare is not None:
        proc = spare.proc
    else:
        proc = subprocess.Popen([sys.executable, "-S", HELPER], stdin=subprocess.PIPE, start_new_session=True,
                                **popen_kw)
    try:
        if spare is None:
            _join(proc.pid, spec.cgroups)
        proc.stdin.write(cfg)
        proc.stdin.close()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def _join(pid: int, folders) -> None:
    for folder in folders:
        with open(os.path.join(folder, "cgroup.procs"), "w") as f:
            f.write(str(pid))


# -- a spare helper, started ahead -------------------------------------------------
# Moving a process into a cgroup waits for an RCU grace period when no move happened just before (10 to
# 25 ms here), on every start of a VM: a wake's path. So once a jailed VM has started, this process keeps
# one helper started ahead, in cgroup folders of its own (``vm-spare.<pid>.<n>``, no limits), blocked on
# its stdin. A start takes it: its folders are renamed to the VM's (the process moves with them, no
# migration), the VM's limits are written into them, and it gets argv and the spec; the next spare is
# started in the background. A spare holds about 10 MiB; it ends at this process's exit (its stdin
# closes, and atexit removes its folders), and a spare left by a killed process is removed by the next.

@dataclasses.dataclass
class Spare:
    proc: subprocess.Popen
    folders: tuple                  # its cgroup folders now (renamed to the VM's by take_spare)


_spare_lock = threading.Lock()
_spare: dict = {}                   # the VMs' cgroup parents -> the Spare ready there
_filling: dict = {}                 # the VMs' cgroup parents -> set once the spare being started is ready
#: A start that finds the next spare still starting waits for it, at most this long: side by side, a
#: second helper's move into its cgroup waited behind the spare's (vmm.jail), and both were slower.
SPARE_WAIT_S = 1.0
_counter = itertools.count(1)
SPARE_PREFIX = "vm-spare."


def _parents(folders) -> tuple:
    return tuple(str(Path(f).parent) for f in folders)


def take_spare(folders_of, name: str) -> Spare | None:
    """The spare helper with its folders renamed to the VM's (``folders_of(name)``), or None when there is
    none ready under the same cgroup parents. ``folders_of`` is the hierarchy's ``folders``."""
    target = tuple(folders_of(name))
    key = _parents(target)
    with _spare_lock:
        starting = _filling.get(key)
    if starting is not None:
        starting.wait(SPARE_WAIT_S)
    with _spare_lock:
        spare = _spare.pop(key, None)
    return claim(spare, target) if spare is not None else None


def claim(spare: Spare, target: tuple) -> Spare | None:
    """``spare`` with its cgroup folders renamed to ``target`` (a VM's), or None (it is ended) when its
    process is gone or a folder cannot be renamed."""
    target = tuple(target)
    if spare.proc.poll() is not None or any(os.path.exists(t) for t in target):
        end_spare(spare)
        return None
    done = []
    try:
        for src, dst in zip(spare.folders, target):
            os.rename(src, dst)
            done.append((src, dst))
    except OSError as e:
        log.debug("spare helper not taken: %s", e)
        for src, dst in reversed(done):
            try:
                os.rename(dst, src)
            except OSError:
                pass
        end_spare(spare)
        return None
    spare.folders = target
    return spare


def spare_ready(folders_of) -> int | None:
    """The pid of the spare helper ready under these cgroup parents, or None."""
    with _spare_lock:
        spare = _spare.get(_parents(folders_of("x")))
    return spare.proc.pid if spare is not None else None


def fill_spare(folders_of) -> None:
    """Start the next spare helper under the same cgroup parents, in the background (once at a time)."""
    key = _parents(folders_of("x"))
    with _spare_lock:
        if key in _spare or key in _filling:
            return
        _filling[key] = threading.Event()
    threading.Thread(target=_fill, args=(folders_of, key), name="vmm-spare", daemon=True).start()


def _fill(folders_of, key) -> None:
    spare = None
    try:
        _sweep(key)
        folders = folders_of(f"spare.{os.getpid()}.{next(_counter)}")
        proc = subprocess.Popen([sys.executable, "-S", HELPER], stdin=subprocess.PIPE, start_new_session=True,
                                **HELPER_OUTPUT)
        spare = Spare(proc, tuple(str(f) for f in folders))
        for f in spare.folders:
            os.mkdir(f)
        _join(proc.pid, spare.folders)
        with _spare_lock:
            if key not in _spare:
                _spare[key], spare = spare, None
    except OSError as e:
        log.debug("no spare helper: %s", e)
    finally:
        if spare is not None:
            end_spare(spare)
        with _spare_lock:
            _filling.pop(key).set()


def end_spare(spare: Spare) -> None:
    """Stop a spare helper that no VM took and remove its folders."""
    try:
        spare.proc.kill()
        spare.proc.wait(5)
    except (OSError, subprocess.TimeoutExpired):
        pass
    for f in spare.folders:
        try:
            os.rmdir(f)
        except OSError:
            pass


def left_by_gone_process(name: str, prefix: str) -> bool:
    """Whether ``name`` is ``<prefix><pid>.<...>`` of a process other than this one that is gone (what a
    spare's folders are named: the process that made them removes them, or the next one does)."""
    if not name.startswith(prefix):
        return False
    owner = name[len(prefix):].split(".")[0]
    return owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}")


def _sweep(key) -> None:
    """Remove the empty folders of spares left by processes that are gone."""
    for parent in key:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for n in names:
            if left_by_gone_process(n, SPARE_PREFIX):
                try:
                    os.rmdir(os.path.join(parent, n))
                except OSError:
                    pass


@atexit.register
def _end_spares() -> None:
    with _spare_lock:
        spares = list(_spare.values())
        _spare.clear()
    for spare in spares:
        end_spare(spare)


# -- the helper (runs as a script) ----------------------------------------------
