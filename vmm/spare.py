"""A QEMU started ahead, in its jail and cgroup, for the next restore of a machine of the same shape.

A wake spent about half its host time starting QEMU in its jail before QMP answered (34-68 ms: the helper's
walls, QEMU's own start) while the snapshot's RAM was copied beside it. So after a sleep, a restore, or a
template saved, this process starts a QEMU for the next restore of that shape in the background, and
keeps it waiting with ``-incoming defer``:

- **When**: once no start has run in this process for ``QUIET_S`` (``starting``), so that its making never
  takes CPU from a start; one spare a process (the shape made last); ``APZ_VMM_SPARE_QEMU=0``: none.
- **What it has**: the shape's command line (memory, vCPUs, the image's kernel, initramfs and root, the
  kernel command line) and files of its own, none of any machine's: a folder ``<machines>/.spare.<pid>.<n>``
  with ``run/`` (its QMP and channel sockets, already connected to this process, and its console log) and
  ``disks/`` (one empty qcow2 layer of the workspace's size, no backing file), a fresh RAM file
  (``apz-vm-spare.<pid>.<n>-*`` in the RAM folder), cgroup folders of its own (``vm-spare.<pid>.q<n>``, no
  limits yet), and a uid of its own (``SPARE_UID_BASE + pid * 64 + n % 64``, never one a live process or
  a running VM of this process holds). Nothing of any machine is in its jail. Its RAM file has pages allocated (zeros) where the
  snapshot most likely restored next has data (``fill``'s hint: the snapshot just slept, restored, or the
  template): a restore then copies into pages that exist, about half the copy's time. Unused for
  ``READY_PAGES_S`` those pages go back; unused for ``IDLE_S`` the spare is ended.
- **A restore takes it** (``take``: a jailed machine with a RAM folder, no volumes and the same command
  line; each spare once): its RAM folder is renamed as the machine's and the snapshot's RAM copied into it
  at once (then the ready pages the snapshot has no data for are punched out, before the guest runs); its
  cgroup folders are renamed to the machine's and the machine's limits written into them
  (``vmm.jail.claim``); the machine's workspace layers are moved into the spare's ``disks/`` folder (the
  one its jail has bound) and that folder renamed to the machine's (``adopt``; on an error every file goes
  back); its ``run/`` folder becomes the machine's. Over QMP the machine's new top layer is opened as the
  top's file and the layer below, read-only, as its backing (``blockdev-add``, ``blockdev-reopen``); the
  images stay inactive until ``cont``, when QEMU reads the top's header again. Then the device state loads
  and the guest is refreshed (clock, entropy) as for any restore. The machine runs as the spare's uid (it
  owns the run folder, the RAM file and the top layer; the frozen layers are root's and read-only).
- **A spare no one takes** dies with this process: its helper has a parent-death signal (cleared when a
  machine takes it, ``vmm.jail.KEEP_SIGNAL``: a machine's QEMU outlives the process that started it, as any
  other), it is ended at exit, and what a dead process's spares left is removed by the next one's.
- A take that fails before the guest resumes falls back to a QEMU of the machine's own
  (``QemuMachine._start``).
"""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import itertools
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import cgroups as cgroupsmod
from . import jail as jailmod
from .disks import BASE, DiskError, data_extents, qemu_img
from .qmp import QMP, QMPError

log = logging.getLogger("vmm.spare")
ON = os.environ.get("APZ_VMM_SPARE_QEMU", "1") != "0"
#: Unused this long, a spare gives back the RAM pages it had ready (``fill``'s hint), keeping its QEMU.
READY_PAGES_S = float(os.environ.get("APZ_VMM_SPARE_PAGES_S", "60"))
#: Unused this long, a spare is ended (it holds QEMU's start: about 20-30 MiB, and a sparse RAM file).
IDLE_S = float(os.environ.get("APZ_VMM_SPARE_IDLE_S", "600"))
#: A spare is made at this nice value (the worker thread's, which its helper and QEMU inherit), and put back
#: at 0 when a machine takes it: its making never holds back a start that begins meanwhile.
MAKE_NICE = 19
#: A spare is made only once no start has run in this process for this long: made beside a start (or the
#: next one, back to back), its QEMU's start took CPU from it on a 2-core host.
QUIET_S = float(os.environ.get("APZ_VMM_SPARE_QUIET_S", "0.25"))
SPARE_UID_BASE = int(os.environ.get("APZ_VMM_SPARE_UID_BASE", "1200000"))
PREFIX = ".spare."
RAM_PREFIX = "apz-vm-spare."
TOP = "spare.qcow2"
CONNECT_S = 10.0


@dataclasses.dataclass
class SpareVM:
    key: tuple
    helper: jailmod.Spare           # the jail's helper (QEMU's parent) and its cgroup folders
    dir: Path                       # <machines>/.spare.<pid>.<n>: run/, disks/, jail/
    ram: Path
    uid: int
    qmp: QMP
    channel: socket.socket
    made: float = 0.0
    ready_pages: list = dataclasses.field(default_factory=list)   # (start, end) allocated in its RAM file

    @property
    def top(self) -> Path:
        return self.dir / "disks" / TOP


_lock = threading.Lock()
_ready: dict = {}                   # key -> SpareVM
_wanted: dict = {}                  # key -> the machine to make one like (queued for the worker)
_uids: set = set()                  # uids of spares made and not yet ended with their machine
_counter = itertools.count(1)
_work: queue.Queue = queue.Queue()
_making = None                      # the key of the spare being made now
_starts = 0                         # starts under way in this process (``starting``)
_quiet_since = 0.0                  # when the last one ended
_quiet = threading.Condition(_lock)
_worker: threading.Thread | None = None
#: Why the last spare was not made (or a turn of the worker failed); None while every one was. The log
#: has each (``vmm.spare``, warning): a spare is an optimisation, so no start waits on or fails with it.
last_error: str | None = None


def key_of(m) -> tuple | None:
    """What a spare for machine ``m`` must match, or None when ``m`` cannot take one."""
    if not ON or m.spec.volumes or not m._jail_ok() or m.platform.channel == "virtio-vsock":
        return None
    cg, _why = cgroupsmod.detect()
    root = Path(_ram_dir())
    if cg is None or not root.is_dir() or not os.access(root, os.W_OK | os.X_OK):
        return None
    img = m._image()
    argv, _spec = m._jail_plan(dict(_paths(m, Path("/x")), ram="/x/ram"), 0, True, spare=True)
    return (str(m.base_dir.resolve()), tuple(argv), str(img.kernel), str(img.initrd), str(img.rootfs),
            jailmod._parents(cg.folders("x")), m.spec.workspace_mib)


def _paths(m, d: Path) -> dict:
    img = m._image()
    return {"kernel": str(img.kernel), "initrd": str(img.initrd), "rootfs": str(img.rootfs),
            "workspace": str(d / "disks" / TOP), "run": str(d / "run"), "disks": str(d / "disks")}


def take(m) -> SpareVM | None:
    """The ready spare for machine ``m`` (removed from the ready set), or None."""
    key = key_of(m)
    if key is None:
        return None
    with _lock:
        sp = _ready.pop(key, None)
    if sp is None:
        return None
    try:   # its RAM folder is named as the machine's (what a later start of it sweeps, not a spare's)
        if sp.helper.proc.poll() is not None:
            raise OSError("the spare QEMU has ended")
        ram = Path(tempfile.mkdtemp(prefix=m._ram_prefix(), dir=sp.ram.parent.parent))
        os.rename(sp.ram.parent, ram)
        sp.ram = ram / sp.ram.name
    except OSError as e:
        log.debug("spare QEMU not taken: %s", e)
        end(sp)
        return None
    return sp


def fill(m, hint: Path | None = None) -> None:
    """Start a spare like machine ``m`` in the background, unless one is ready or being made. ``hint``: a
    snapshot's ``memory.ram`` (the one most likely restored next); the spare's RAM file has pages ready
    where it holds data, so that a restore copies into them rather than allocating each (half its time)."""
    key = key_of(m)
    if key is None:
        return
    global _worker
    with _lock:
        if key in _ready or key in _wanted:
            return
        _wanted[key] = (m, hint)
        if _worker is None or not _worker.is_alive():   # one long-lived thread: a spare's parent-death
            # signal follows the thread that made it
            _worker = threading.Thread(target=_run, name="vmm-spare-qemu", daemon=True)
            _worker.start()
    _work.put(key)


class starting:
    """``with starting() as st:`` around a machine's start: no spare is made while one runs, nor just after.
    ``st.host_part_done()``: what is left of this start is the guest's own boot (its QEMU spawned, in its
    cgroups, connected), so a spare may be made beside it from now: the making's forks and cgroup moves
    can no longer hold back this start's, and its CPU (at ``MAKE_NICE``) goes to the host's other core
    while the guest boots, rather than to the restore that comes next (which then finds its QEMU ready)."""

    def __init__(self):
        self._open = False

    def __enter__(self):
        global _starts
        with _lock:
            _starts += 1
            self._open = True
        return self

    def host_part_done(self) -> None:
        global _starts, _quiet_since
        with _lock:
            if not self._open:
                return
            self._open = False
            _starts -= 1
            _quiet_since = time.monotonic()
            _quiet.notify_all()

    def __exit__(self, *exc):
        self.host_part_done()


def _wait_quiet() -> None:
    with _lock:
        while True:
            left = _quiet_since + QUIET_S - time.monotonic()
            if _starts == 0 and left <= 0:
                return
            _quiet.wait(left if _starts == 0 else None)


def _run() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MAKE_NICE)
    except OSError:
        pass
    while True:   # the one worker of this process: nothing ends it (each failure is noted, see ``last_error``)
        try:
            _turn()
        except Exception as e:
            _failed(f"the spare worker's turn failed: {e!r}")


def _failed(why: str) -> None:
    global last_error
    last_error = why
    log.warning("no spare QEMU: %s", why)


def _turn() -> None:
    """One turn of the worker: make the spare asked for (if any), then end the stale and idle ones."""
    global _making
    try:
        key = _work.get(timeout=min(IDLE_S, READY_PAGES_S) / 4)
    except queue.Empty:
        key = None
    if key is not None:
        _wait_quiet()
    with _lock:
        m, hint = _wanted.get(key) or (None, None)
        _making = key if m is not None else None
    sp = None
    try:
        if m is not None:
            try:
                sp = _make(m, key, hint)
            except Exception as e:   # an optimisation: a restore starts its own QEMU without one
                _failed(str(e))
    finally:
        with _lock:
            _wanted.pop(key, None)
            # one spare a process, of the shape started last: any other (and an idle one) is ended
            now = time.monotonic()
            stale = [k for k, s in _ready.items() if sp is not None or now - s.made > IDLE_S]
            gone = [_ready.pop(k) for k in stale]
            for k, s in list(_ready.items()):   # unused a while: its ready pages go back (a take waits)
                if s.ready_pages and now - s.made > READY_PAGES_S:
                    try:
                        _punch(s.ram, s.ready_pages)
                        s.ready_pages = []
                    except OSError as e:         # its RAM file is gone: so is the spare
                        _failed(f"a spare's ready pages: {e}")
                        gone.append(_ready.pop(k))
            if sp is not None:
                _ready[key], sp = sp, None
            _making = None
            _quiet.notify_all()
        for s in gone + ([sp] if sp is not None else []):
            try:
                end(s)
            except Exception as e:
                _failed(f"ending a spare: {e!r}")


def _uid(n: int) -> int:
    """A uid for a new spare: of this process's range, held by none of its spares and by no live process.
    A machine that took a spare keeps its uid and outlives the process that made it, so once that
    process's pid is reused, the new process's range holds uids a running machine may still have."""
    live = _live_uids()
    with _lock:
        for i in range(64):
            uid = SPARE_UID_BASE + os.getpid() * 64 + (n + i) % 64
            if uid not in _uids and uid not in live:
                _uids.add(uid)
                return uid
    raise OSError("no spare uid free")


def _live_uids() -> set[int]:
    """The real uids of every process now running (from /proc)."""
    found = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    found.add(int(line.split()[1]))
                    break
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
    return found


def release_uid(uid: int | None) -> None:
    with _lock:
        _uids.discard(uid)


def _ram_dir() -> str:
    from . import qemu  # (qemu imports this module)
    return qemu.RAM_DIR


def _make(m, key: tuple, hint: Path | None = None) -> SpareVM:
    _sweep(m)
    n = next(_counter)
    d = m.base_dir / f"{PREFIX}{os.getpid()}.{n}"
    cg, why = cgroupsmod.detect()
    if cg is None:
        raise OSError(why)
    folders = tuple(str(f) for f in cg.folders(f"spare.{os.getpid()}.q{n}"))
    uid = _uid(n)
    made: list = []
    try:
        for sub in ("", "run", "disks", "jail"):
            (d / sub).mkdir()
        os.chown(d / "run", uid, uid)
        qemu_img("create", "-q", "-f", "qcow2", str(d / "disks" / TOP), f"{m.spec.workspace_mib}M")
        os.chown(d / "disks" / TOP, uid, uid)
        os.chmod(d / "disks" / TOP, 0o600)
        room = os.statvfs(_ram_dir())
        if room.f_bavail * room.f_frsize < m.spec.memory_mib << 20:
            raise OSError("the RAM folder has less room than the guest")
        ram = Path(tempfile.mkdtemp(prefix=f"{RAM_PREFIX}{os.getpid()}.{n}-", dir=_ram_dir())) / "ram"
        fd = os.open(ram, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, m.spec.memory_mib << 20)
        finally:
            os.close(fd)
        os.chown(ram.parent, uid, uid)
        os.chown(ram, uid, uid)
        ready = _ready_pages(ram, hint)
        paths = dict(_paths(m, d), ram=str(ram))
        listeners = {}
        from .qemu import bind_unix  # (qemu imports this module)
        for name in ("qmp.sock", "channel.sock"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            bind_unix(s, d / "run" / name)   # a machines folder deep in a tree: past a socket address's 108 bytes
            os.chown(d / "run" / name, uid, uid)
            os.chmod(d / "run" / name, 0o600)
            s.listen(1)
            listeners[name] = s
        try:
            for f in folders:
                os.mkdir(f)
                made.append(f)
            argv, spec = m._jail_plan(paths, uid, True, spare=True, jroot=d / "jail")
            spec.cgroups = folders
            proc = jailmod.spawn(argv, spec, spare_of=os.getpid(), **jailmod.HELPER_OUTPUT)
            helper = jailmod.Spare(proc, folders)
            made = []
            try:
                q = QMP.over_socket(_accept(listeners["qmp.sock"], proc), timeout=CONNECT_S)
                chan = _accept(listeners["channel.sock"], proc)
            except BaseException:
                _end_helper(helper)
                raise
        finally:
            for s in listeners.values():
                s.close()
        return SpareVM(key, helper, d, ram, uid, q, chan, time.monotonic(), ready)
    except BaseException:
        for f in made:
            try:
                os.rmdir(f)
            except OSError:
                pass
        release_uid(uid)
        _remove_files(d, locals().get("ram"))
        raise


def _ready_pages(ram: Path, hint: Path | None) -> list:
    """Allocate ``ram``'s pages where ``hint`` (a snapshot's RAM file) holds data; returns those regions."""
    if hint is None:
        return []
    try:
        fi = os.open(hint, os.O_RDONLY)
    except OSError:
        return []
    try:
        regions = list(data_extents(fi, min(os.fstat(fi).st_size, os.stat(ram).st_size)))
    finally:
        os.close(fi)
    fd = os.open(ram, os.O_RDWR)
    try:
        for start, end in regions:
            os.posix_fallocate(fd, start, end - start)
    finally:
        os.close(fd)
    return regions


_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 1, 2
_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)


def _punch(path: Path, regions) -> None:
    """Give back the pages of ``regions`` of a tmpfs file (they read as zeros again)."""
    fd = os.open(path, os.O_RDWR)
    try:
        for start, end in regions:
            if end > start and _libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, start,
                                                end - start) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"punching {path}: {os.strerror(e)}")
    finally:
        os.close(fd)


def give_back_rest(sp: SpareVM, src: Path) -> None:
    """After a restore's copy into ``sp``'s RAM file, and before its guest runs: the pages the spare had
    ready where the snapshot ``src`` holds none go back (zeros to the guest, as they were in the snapshot)."""
    if not sp.ready_pages:
        return
    fi = os.open(src, os.O_RDONLY)
    try:
        data = list(data_extents(fi, os.fstat(fi).st_size))
    finally:
        os.close(fi)
    rest, i = [], 0
    for start, end in sp.ready_pages:          # ready regions minus the snapshot's (both sorted)
        while start < end:
            while i < len(data) and data[i][1] <= start:
                i += 1
            if i == len(data) or data[i][0] >= end:
                rest.append((start, end))
                break
            if data[i][0] > start:
                rest.append((start, data[i][0]))
            start = data[i][1]
    _punch(sp.ram, rest)
    sp.ready_pages = []


def _accept(listener: socket.socket, proc: subprocess.Popen) -> socket.socket:
    listener.settimeout(0.05)
    deadline = time.monotonic() + CONNECT_S
    while time.monotonic() < deadline:   # off any start's path: a short poll is enough here
        try:
            conn, _ = listener.accept()
            conn.settimeout(None)
            return conn
        except TimeoutError:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise OSError(f"spare QEMU exited with {proc.returncode}: {out.strip()[-500:]}") from None
    raise OSError("spare QEMU did not connect")


def _end_helper(helper: jailmod.Spare) -> None:
    try:
        os.killpg(helper.proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        helper.proc.wait(5)
    except subprocess.TimeoutExpired:
        pass
    if helper.proc.stdout:
        helper.proc.stdout.close()
    cgroupsmod.VMCgroup(0, tuple(Path(f) for f in helper.folders), {}).remove()


def _remove_files(d: Path, ram: Path | None) -> None:
    """A spare's own files: its RAM folder, its run folder, its folder; its disks folder only while it
    holds nothing but the spare's layer (a machine's workspace is never removed here)."""
    if ram is not None:
        shutil.rmtree(ram.parent, ignore_errors=True)
    shutil.rmtree(d / "run", ignore_errors=True)
    try:
        (d / "disks" / TOP).unlink(missing_ok=True)
        for sub in ("disks", "jail", ""):
            if (d / sub).exists():
                (d / sub).rmdir()
    except OSError as e:
        log.warning("spare folder %s not removed: %s", d, e)


def release(sp: SpareVM) -> None:
    """After the machine that took ``sp`` has ended: its uid is free again, what is left of its folder goes."""
    _remove_files(sp.dir, None)
    release_uid(sp.uid)


def end(sp: SpareVM) -> None:
    """End a spare no machine took and remove what it had."""
    for c in (sp.qmp, sp.channel):
        try:
            c.close()
        except OSError:
            pass
    _end_helper(sp.helper)
    _remove_files(sp.dir, sp.ram)
    release_uid(sp.uid)


def _sweep(m) -> None:
    """Remove what spares of processes that are gone left: their folders and RAM folders."""
    for parent, prefix in ((m.base_dir, PREFIX), (Path(_ram_dir()), RAM_PREFIX)):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if jailmod.left_by_gone_process(name, prefix):
                if prefix == PREFIX:
                    _remove_files(parent / name, None)
                else:
                    shutil.rmtree(parent / name, ignore_errors=True)


def adopt(m, sp: SpareVM, new_top: Path) -> socket.socket:
    """Make the spare machine ``m``'s QEMU: its workspace (``new_top`` is the layer ``m.disks.push`` made
    for this start), run folder and RAM file; the caller has claimed its cgroup folders. Returns the
    channel's connection. Raises (``DiskError``, ``OSError``) if the workspace cannot be handed over; the
    workspace is then where it was."""
    try:   # a taken spare is the machine's: it outlives this process as any machine's QEMU does
        os.kill(sp.helper.proc.pid, jailmod.KEEP_SIGNAL)
    except OSError:
        pass
    _renice(sp.helper.proc.pid)
    layers = m.disks.layers
    new_top = Path(new_top)
    if len(layers) < 2 or new_top.name != layers[-1]:
        raise DiskError("the spare's workspace: no chain to put it on")
    if _virtual_size(new_top) != _virtual_size(sp.top):
        raise DiskError("the spare's workspace is not of this machine's size")
    os.chown(new_top, sp.uid, sp.uid)
    src, spare_disks = m.disks.dir, sp.dir / "disks"
    # the machine's layers into the folder the spare's jail has bound, and that folder in the machine's
    # place; on any error every file goes back where it was (nothing of a workspace is ever left here)
    moved = []
    try:
        for name in os.listdir(src):
            os.rename(src / name, spare_disks / name)
            moved.append(name)
        os.rename(spare_disks, src)
    except OSError:
        for name in moved:
            os.rename(spare_disks / name, src / name)
        raise
    os.rename(sp.dir / "run", m.run_dir)
    below = layers[-2]
    try:   # the top over its file, the layer below read-only as its backing (images are inactive until cont)
        sp.qmp.execute("blockdev-add", {"driver": "file", "node-name": "wst",
                                        "filename": f"/vm/disks/{new_top.name}"})
        sp.qmp.execute("blockdev-add", {
            "driver": "raw" if below == BASE else "qcow2", "node-name": "wsb", "read-only": True,
            "file": {"driver": "file", "filename": f"/vm/disks/{below}"}})
        sp.qmp.execute("blockdev-reopen", {"options": [
            {"driver": "qcow2", "node-name": "wsn", "file": "wst", "backing": "wsb"}]})
    except (QMPError, OSError) as e:
        raise DiskError(f"the spare QEMU did not take the workspace: {e}") from e
    finally:   # the spare's own empty layer: no longer QEMU's (or QEMU is ended), never one of the machine's
        (src / TOP).unlink(missing_ok=True)
    return sp.channel


def _renice(pid: int) -> None:
    """The helper and every thread of its QEMU back at nice 0 (they were made at ``MAKE_NICE``)."""
    tids = [pid]
    try:
        for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            tids += [int(t) for t in os.listdir(f"/proc/{kid}/task")]
    except OSError:
        pass
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, 0)
        except OSError:
            pass


def _virtual_size(path: Path) -> int:
    with open(path, "rb") as f:
        head = f.read(32)
    return int.from_bytes(head[24:32], "big") if head[:4] == b"QFI\xfb" else -1


@atexit.register
def _end_all() -> None:
    """End every spare: those ready, and the one being made once it is (none queued is made after)."""
    deadline = time.monotonic() + CONNECT_S + 5
    with _lock:
        for k in [k for k in _wanted if k != _making]:
            del _wanted[k]
        while _making is not None and time.monotonic() < deadline:
            _quiet.wait(0.1)
        spares = list(_ready.values())
        _ready.clear()
    for sp in spares:
        end(sp)
