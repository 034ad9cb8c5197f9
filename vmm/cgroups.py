"""The VM's memory, CPU and pids limits, on cgroup v2 or on cgroup v1 controllers.

``detect()`` picks the hierarchy: a delegated v2 hierarchy with the memory,
cpu and pids controllers first; else the v1 hierarchies of those controllers
(hosts that bind them to v1, such as a hybrid setup). It returns ``(None, why)``
where neither is usable.

``create(name, ...)`` makes the VM's cgroup (one folder on v2, one per controller
on v1), writes its limits and reads each back: any write that fails raises
``CgroupError`` and leaves no folder behind. The VMM process joins every folder of
the returned ``VMCgroup`` (``folders``) before it execs QEMU.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
import time
from pathlib import Path

NEEDED = ("memory", "cpu", "pids")
SLICE = "agentplaza.slice"
CPU_PERIOD_US = 100000          # cpu.max / cpu.cfs_period_us: the quota is CPUs x this
V1_UNLIMITED = "-1"             # what v1 memory.memsw.limit_in_bytes takes for no limit
#: How long ``remove`` waits for a VM's last process to leave its cgroup: QEMU ends a moment after its
#: jail's helper (by its parent-death signal), and a folder with a process in it cannot be removed.
REMOVE_WAIT_S = 5.0
REMOVE_POLL_S = 0.005


class CgroupError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class VMCgroup:
    """One VM's cgroup: its folders and the files that hold its limits."""
    version: int
    folders: tuple                  # every folder the VMM process joins (cgroup.procs)
    limit_files: dict               # "memory" | "cpu" | "pids" -> the file holding that limit

    def joiner(self):
        """A function that puts the calling process into every folder (a child's ``preexec_fn``)."""
        procs = [str(d / "cgroup.procs") for d in self.folders]

        def join() -> None:
            for p in procs:
                with open(p, "w") as f:
                    f.write(str(os.getpid()))
        return join

    def procs(self) -> list:
        """The pids in each folder, one set per folder."""
        return [set((d / "cgroup.procs").read_text().split()) for d in self.folders]

    def limits(self) -> dict:
        """The limits as the kernel reads them back: memory in bytes, cpu in CPUs, pids."""
        mem = int(self.limit_files["memory"].read_text())
        if self.version == 2:
            quota, period = self.limit_files["cpu"].read_text().split()
        else:
            quota = self.limit_files["cpu"].read_text().strip()
            period = (self.limit_files["cpu"].parent / "cpu.cfs_period_us").read_text().strip()
        return {"memory": mem, "cpu": int(quota) / int(period),
                "pids": int(self.limit_files["pids"].read_text())}

    def memory_current(self) -> int:
        d = self.limit_files["memory"].parent
        return int((d / ("memory.current" if self.version == 2 else "memory.usage_in_bytes")).read_text())

    def memory_events(self) -> dict:
        """Times the limit was hit ("max") and OOM kills ("oom_kill"); {} if unreadable."""
        d = self.limit_files["memory"].parent
        try:
            if self.version == 2:
                return {k: int(v) for k, v in (ln.split() for ln in (d / "memory.events").read_text().splitlines())}
            oom = dict(ln.split() for ln in (d / "memory.oom_control").read_text().splitlines())
            return {"max": int((d / "memory.failcnt").read_text()), "oom_kill": int(oom.get("oom_kill", 0))}
        except OSError:
            return {}

    def remove(self) -> None:
        """Remove the folders; a process still in one (the VM's own, ending) is killed and waited for, up
        to REMOVE_WAIT_S, so that no empty cgroup stays behind each stopped VM."""
        deadline = time.monotonic() + REMOVE_WAIT_S
        for d in self.folders:
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                try:
                    pids = (d / "cgroup.procs").read_text().split()
                except OSError:
                    pids = []
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                time.sleep(REMOVE_POLL_S)


def _write(f: Path, v: str) -> None:
    _write_unchecked(f, v)
    got = f.read_text().strip()
    if got != v:
        raise CgroupError(f"{f}: wrote {v!r}, reads {got!r}")


def _write_unchecked(f: Path, v: str) -> None:
    try:
        f.write_text(v)
    except OSError as e:
        raise CgroupError(f"{f}: cannot write {v!r}: {e.strerror or e}") from e


def _mounts() -> list:
    """(fstype, mount point, root inside the hierarchy, super options) of each cgroup mount."""
    out = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, right = line.split(" - ", 1)
            fields, rfields = left.split(), right.split()
            if rfields[0] in ("cgroup", "cgroup2"):
                out.append((rfields[0], fields[4], fields[3], set(rfields[2].split(","))))
    except (OSError, IndexError, ValueError):
        pass
    return out


def _own() -> dict:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    own = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                own[c] = path
    except (OSError, ValueError):
        pass
    return own


def detect() -> tuple:
    """(CgroupsV2 or CgroupsV1, "") where memory, cpu and pids limits can be written,
    else (None, why)."""
    v2, why2 = CgroupsV2.detect()
    if v2 is not None or os.environ.get("APZ_VMM_CGROUP"):
        return v2, why2
    v1, why1 = CgroupsV1.detect()
    if v1 is not None:
        return v1, ""
    return None, f"cgroup v2: {why2}; cgroup v1: {why1}"


class CgroupsV2:
    """cgroup v2: ``<parent>/vm-<name>`` with memory.max, memory.swap.max, cpu.max, pids.max."""

    version = 2

    def __init__(self, parent: Path) -> None:
        self.parent = parent

    @classmethod
    def detect(cls) -> tuple:
        mnt = next((m for fs, m, _, _ in _mounts() if fs == "cgroup2"), None)
        if mnt is None:
            return None, "no cgroup v2 hierarchy is mounted"
        override = os.environ.get("APZ_VMM_CGROUP")
        if override:
            parent = Path(override)
        else:
            # Under a systemd user manager, sit beside its slices; else at the top.
            base = Path(mnt)
            parts = [p for p in _own().get("", "/").strip("/").split("/") if p]
            for i, p in enumerate(parts):
                if p.startswith("user@") and p.endswith(".service"):
                    base = Path(mnt, *parts[:i + 1])
            parent = base / SLICE
        top = parent.parent
        try:
            have = set((top / "cgroup.controllers").read_text().split())
        except OSError as e:
            return None, f"cannot read {top}/cgroup.controllers: {e}"
        missing = [c for c in NEEDED if c not in have]
        if missing:
            return None, (f"{top} lacks the {', '.join(missing)} controller(s)"
                          f" (available: {', '.join(sorted(have)) or 'none'})")
        if not os.access(top, os.W_OK):
            return None, f"{top} is not writable by this user (not delegated)"
        return cls(parent), ""

    def _enable(self, d: Path) -> None:
        ctl = d / "cgroup.subtree_control"
        on = set(ctl.read_text().split())
        want = [c for c in NEEDED if c not in on]
        if want:
            ctl.write_text(" ".join("+" + c for c in want))

    def folders(self, name: str) -> tuple:
        """The folders a VM of this name has its cgroup in."""
        return (self.parent / f"vm-{name}",)

    def create(self, name: str, memory_bytes: int, cpus: float, pids: int) -> VMCgroup:
        d, = self.folders(name)
        cg = VMCgroup(2, (d,), {"memory": d / "memory.max", "cpu": d / "cpu.max", "pids": d / "pids.max"})
        try:
            self._enable(self.parent.parent)
            self.parent.mkdir(exist_ok=True)
            self._enable(self.parent)
            d.mkdir(exist_ok=True)
            _write(d / "memory.max", str(memory_bytes))
            if (d / "memory.swap.max").exists():     # else no swap accounting: nothing to cap
                _write(d / "memory.swap.max", "0")
            _write(d / "cpu.max", f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            _write(d / "pids.max", str(pids))
            return cg
        except (OSError, CgroupError) as e:
            cg.remove()
            raise CgroupError(f"cannot set the VM's limits: {e}") from e


class CgroupsV1:
    """cgroup v1: ``<controller mount>/<own cgroup>/agentplaza.slice/vm-<name>`` per controller.

    The VM's cgroups sit under this process's own cgroup of each controller, so they
    stay inside whatever the host already confines the daemon to. Limits:
    memory.limit_in_bytes (and memory.memsw.limit_in_bytes, the same: no swap, where
    swap is accounted), cpu.cfs_quota_us over cpu.cfs_period_us, pids.max.
    """

    version = 1

    def __init__(self, parents: dict) -> None:
        self.parents = parents          # controller -> the folder holding the VMs' cgroups

    @classmethod
    def detect(cls) -> tuple:
        mounts = {c: (m, root) for fs, m, root, opts in _mounts() if fs == "cgroup" for c in opts}
        missing = [c for c in NEEDED if c not in mounts]
        if missing:
            return None, f"no v1 hierarchy has the {', '.join(missing)} controller(s)"
        own = _own()
        parents = {}
        for c in NEEDED:
            mnt, root = mounts[c]
            path = own.get(c, "/")
            if root != "/" and path.startswith(root):
                path = path[len(root):]
            base = Path(mnt, *[p for p in path.strip("/").split("/") if p])
            if not os.access(base, os.W_OK):
                return None, f"{base} ({c}) is not writable by this user"
            parents[c] = base / SLICE
        return cls(parents), ""

    def folders(self, name: str) -> tuple:
        """The folders a VM of this name has its cgroup in (co-mounted controllers share one)."""
        return tuple(dict.fromkeys(self.parents[c] / f"vm-{name}" for c in NEEDED))

    def create(self, name: str, memory_bytes: int, cpus: float, pids: int) -> VMCgroup:
        d = {c: self.parents[c] / f"vm-{name}" for c in NEEDED}
        folders = self.folders(name)
        cg = VMCgroup(1, folders, {"memory": d["memory"] / "memory.limit_in_bytes",
                                   "cpu": d["cpu"] / "cpu.cfs_quota_us", "pids": d["pids"] / "pids.max"})
        try:
            for f in folders:
                f.parent.mkdir(exist_ok=True)
                f.mkdir(exist_ok=True)
            mem, memsw = d["memory"] / "memory.limit_in_bytes", d["memory"] / "memory.memsw.limit_in_bytes"
            # memsw can never be below the memory limit: lift it, set the limit, then cap it.
            if memsw.exists():
                _write_unchecked(memsw, V1_UNLIMITED)
            _write(mem, str(memory_bytes))
            if memsw.exists():
                _write(memsw, str(memory_bytes))
            _write(d["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(d["cpu"] / "cpu.cfs_quota_us", str(int(cpus * CPU_PERIOD_US)))
            _write(d["pids"] / "pids.max", str(pids))
            return cg
        except (OSError, CgroupError) as e:
            cg.remove()
            raise CgroupError(f"cannot set the VM's limits: {e}") from e
