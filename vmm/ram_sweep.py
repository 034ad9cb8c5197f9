"""RAM folders no process uses any more: what a machine left when its process died without ending it.

A running guest's RAM is a file in the RAM folder (``/dev/shm``, ``APZ_VMM_RAM_DIR``), in a folder named
``apz-vm-<machine>-<crc>-*`` (``QemuMachine._ram_prefix``) or ``apz-vm-spare.<pid>.<n>-*`` (vmm.spare). A
machine's next start removes its own old ones, and a spare's by its process id; but a machine whose process
was killed and that is never started again (a test's, a removed agent's) left its folder: about the guest's
RAM in a tmpfs, for good.

So once a process, off any start's path, a sweep removes each such folder that is older than
``ORPHAN_AGE_S`` and whose files no process maps or holds open (read from ``/proc/*/maps`` and
``/proc/*/fd`` by device and inode, so a jailed QEMU that sees the file at another path counts too). A
process whose maps cannot be read (a hub that is not root beside VMs of other uids; a container's init,
even to root) could use a folder only if it started after the folder was made (a QEMU opens its RAM file
when it starts, and no file of it is passed to an older process): such a folder is kept. A folder is only
removed when it is known to be unused.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

log = logging.getLogger("vmm.ram_sweep")

#: The prefix every RAM folder of a machine or a spare has.
PREFIX = "apz-vm-"
#: A folder younger than this is never removed: a start makes it some time before its QEMU maps the file.
ORPHAN_AGE_S = 300.0

_started = False
_lock = threading.Lock()


def _boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def _started_at(pid: str, boot: float) -> float:
    """When process ``pid`` started (seconds since the epoch)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()   # (the name may hold spaces and parentheses)
    return boot + int(rest[19]) / os.sysconf("SC_CLK_TCK")


def files_in_use() -> tuple[set[tuple[int, int]], float]:
    """(device, inode) of every file some process maps or holds open; and when the newest process whose
    files could not be read started (0.0: none)."""
    used: set[tuple[int, int]] = set()
    newest_unknown = 0.0
    boot = _boot_time()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(maxsplit=5)
                    if len(parts) >= 6 and parts[4] != "0":
                        major, minor = parts[3].split(":")
                        used.add((os.makedev(int(major, 16), int(minor, 16)), int(parts[4])))
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue   # closed meanwhile, or a socket or pipe of no file
                used.add((st.st_dev, st.st_ino))
        except (FileNotFoundError, ProcessLookupError):
            continue   # ended meanwhile
        except PermissionError:
            try:
                newest_unknown = max(newest_unknown, _started_at(pid, boot))
            except (OSError, ValueError, IndexError):
                continue   # ended meanwhile
    return used, newest_unknown


def orphans(root: Path, now: float | None = None, age_s: float = ORPHAN_AGE_S) -> list[Path]:
    """The RAM folders in ``root`` that are older than ``age_s`` and hold no file in use."""
    now = time.time() if now is None else now
    candidates = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for e in entries:
        if not e.name.startswith(PREFIX) or not e.is_dir(follow_symlinks=False):
            continue
        try:
            made = e.stat(follow_symlinks=False).st_mtime
            if now - made < age_s:
                continue
            inner = [os.stat(Path(e.path) / n, follow_symlinks=False) for n in os.listdir(e.path)]
        except OSError:
            continue
        candidates.append((Path(e.path), made, {(s.st_dev, s.st_ino) for s in inner}))
    if not candidates:
        return []
    used, newest_unknown = files_in_use()
    return [d for d, made, files in candidates if not files & used and newest_unknown < made]


def sweep(root: Path) -> list[Path]:
    """Remove the orphaned RAM folders of ``root``; the ones removed."""
    gone = orphans(root)
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
        log.warning("removed %s: a machine's RAM folder that no process uses (its process died)", d)
    return gone


def sweep_once(root: Path) -> None:
    """``sweep(root)`` in a background thread, the first time this process asks."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    threading.Thread(target=sweep, args=(root,), name="vmm-ram-sweep", daemon=True).start()
