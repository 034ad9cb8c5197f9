"""A QEMU machine's saved state: memory and disk layers, snapshots, sleep and wake, checkpoints,
forks. ``QemuMachine`` (``vmm.qemu``) takes these as a mixin; they use its process, QMP and files.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from pathlib import Path

from . import snapshot as snap
from . import spare as sparemod
from . import trace
from .backend import VMError
from .qmp import QMPError

log = logging.getLogger("vmm.qemu")

WAKE_TIMEOUT_S = 60.0
RAM_DIR_HELP = "a tmpfs such as /dev/shm, or APZ_VMM_RAM_DIR"
MIGRATE_BANDWIDTH = 1 << 40         # bytes/s: QEMU's default (32 MiB/s) would make a save take seconds
#: A checkpoint's name (``sleep`` is the sleep snapshot's own).
CHECKPOINT_NAME = re.compile(r"(?!sleep\Z)[a-z0-9][a-z0-9_-]{0,39}")


class MachineState:
    """Sleep, wake, checkpoints, restores and forks of a ``QemuMachine``."""

    # -- programs parked in a saved guest (a warm template's) ------------------------------
    def park(self, name: str, argv: list, cwd: str | None = None, env: dict | None = None,
             timeout: float = 30.0) -> None:
        """Start a program in the guest and hold it, waiting on its stdin, until ``unpark(name)``
        (a warm template is saved with its parked programs: each restored copy has them started)."""
        st = self.channel.open("exec", argv=list(argv), cwd=cwd or "/workspace", env=dict(env or {}),
                               park=name)
        st.close()
        st.read_all(timeout)
        if st.close_info.get("parked") != name:
            raise VMError(f"guest {self.spec.name} did not park {name}: {st.close_info}")
        self.parked.add(name)

    def unpark(self, name: str, end: bool = False):
        """The parked program let go (its stdin closed): a stream that carries its output and, as it
        closes, its exit code, as an ``exec`` stream does. ``end``: killed instead (not wanted here)."""
        if name not in self.parked:
            raise VMError(f"nothing is parked as {name} in {self.spec.name}")
        self.parked.discard(name)
        return self.channel.open("unpark", name=name, end=bool(end))

    # -- memory and disk state ------------------------------------------------------
    def _memory_format(self, compression: str = "zstd") -> str:
        """How this machine's memory is saved: ``mapped`` where its RAM is a file."""
        return "mapped" if self.ram_file is not None else compression

    def _migrate_caps(self, mapped: bool) -> None:
        caps = [{"capability": "events", "state": True}]
        if mapped:   # the RAM file is saved and restored beside the stream, not in it
            caps.append({"capability": "x-ignore-shared", "state": True})
        self.qmp.execute("migrate-set-capabilities", {"capabilities": caps})

    def _save_memory(self, folder: Path, compression: str = "zstd", sync: bool = True) -> tuple:
        """The stopped VM's device state and RAM into folder. (bytes on disk, RAM bytes).
        ``sync=False``: the caller fsyncs the files (after letting the guest run on)."""
        mapped = compression == "mapped"
        self._migrate_caps(mapped)
        self.qmp.execute("migrate-set-parameters", {"max-bandwidth": MIGRATE_BANDWIDTH})
        path = folder / (snap.DEVICES if mapped else snap.COMPRESSIONS[compression])
        fd, finish = snap.open_writer(path, compression)
        try:
            self.qmp.execute("getfd", {"fdname": "apzsnap"}, fds=[fd])
        finally:
            os.close(fd)
        self.qmp.execute("migrate", {"uri": "fd:apzsnap"})
        st = self._wait_migration()
        size = finish()
        if not mapped:
            return size, int(st.get("ram", {}).get("total", 0))
        ram = folder / snap.MEMORY_MAPPED
        snap.copy_ram(self.ram_file, ram, fsync=sync)
        return size + ram.stat().st_blocks * 512, ram.stat().st_size

    def _wait_migration(self, timeout: float = 300.0, what: str = "saving the machine's memory") -> dict:
        """Wait for QEMU's MIGRATION event to say completed (or failed): no polling."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            try:
                ev = self.qmp.wait_event("MIGRATION", max(0.01, left))
            except TimeoutError:
                raise VMError(f"{what} timed out") from None
            status = ev.get("data", {}).get("status")
            if status == "completed":
                return self.qmp.execute("query-migrate")
            if status in ("failed", "cancelled"):
                st = self.qmp.execute("query-migrate")
                raise VMError(f"{what} failed: {st.get('error-desc', st)}")

    def _load_memory(self, folder: Path, man: snap.Manifest, timeout: float) -> None:
        mapped = man.compression == "mapped"
        if mapped and self.ram_file is None:
            raise snap.SnapshotError(f"snapshot {man.name} keeps its RAM as a file; this host has "
                                     f"no RAM folder for it ({RAM_DIR_HELP})")
        if not mapped and self.ram_file is not None:
            raise snap.SnapshotError(f"snapshot {man.name} streams its RAM (written without a RAM "
                                     f"folder); this machine runs with one ({RAM_DIR_HELP})")
        try:
            self._migrate_caps(mapped)
            path = folder / (snap.DEVICES if mapped else snap.memory_name(man))
            fd, finish = snap.open_reader(path, man.compression)
        except (QMPError, ConnectionError, OSError) as e:
            raise VMError(f"loading the snapshot failed: {e}; {self._proc_output()}") from e
        try:
            try:
                self.qmp.execute("getfd", {"fdname": "apzsnap"}, fds=[fd])
            finally:
                os.close(fd)
            self.qmp.execute("migrate-incoming", {"uri": "fd:apzsnap"})
            self._wait_migration(timeout, "loading the snapshot")
            st = self.qmp.execute("query-status")["status"]
            if st not in ("paused", "prelaunch"):
                raise VMError(f"loading the snapshot failed: status {st}")
        except (QMPError, ConnectionError, OSError) as e:
            raise VMError(f"loading the snapshot failed: {e}; {self._proc_output()}") from e
        finally:
            finish()

    def _proc_output(self) -> str:
        if self.proc is not None and self.proc.poll() is not None and self.proc.stdout:
            try:
                return self.proc.stdout.read().decode(errors="replace").strip()[-1000:]
            except (OSError, ValueError):
                return ""
        return ""

    def _push_live(self) -> list:
        """With the VM stopped: put a new layer on the workspace and switch QEMU to
        it. Returns the frozen chain below it."""
        frozen = self.disks.layers
        new = self.disks.push(self._owner())
        try:
            self.qmp.execute("blockdev-snapshot-sync",
                             {"device": "ws", "snapshot-file": self._qemu_path(new),
                              "format": "qcow2", "mode": "existing"}, timeout=30)
        except (QMPError, OSError) as e:
            self.disks.pop(frozen)
            raise VMError(f"could not switch the workspace to a new layer: {e}") from e
        return frozen

    def _manifest(self, kind: str, name: str, label: str, layers: list, memory: bool) -> snap.Manifest:
        return snap.Manifest(kind=kind, name=name, backend=self.backend_name, shape=self.shape(),
                             volumes=self.volume_names(), layers=list(layers), memory=memory,
                             label=label, created_at=snap.now(), machine=self.spec.name)

    def _save_running(self, folder: Path, kind: str, name: str, label: str,
                      memory: bool = True, compression: str = "zstd") -> snap.Manifest:
        """Snapshot the running VM into folder and let it run on."""
        if memory is False and self._channel is not None and not self._channel.closed:
            try:   # a disk-only checkpoint: flush the guest's page cache first
                self._exec(["/bin/sync"], timeout=30)
            except Exception as e:
                log.warning("machine %s: guest sync before a disk checkpoint failed: %s",
                            self.spec.name, e)
        was_running = self.status() == "running"
        tmp = folder.with_name(folder.name + ".new")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        self.qmp.execute("stop")
        paused = True
        try:
            layers = self._push_live()
            man = self._manifest(kind, name, label, layers, memory)
            man.compression = self._memory_format(compression)
            if memory:
                man.memory_bytes, man.ram_bytes = self._save_memory(tmp, man.compression, sync=False)
            if was_running and self.running():   # the copy is taken: the guest runs on while it syncs
                self.qmp.execute("cont")
            paused = False
            for mem in snap.memory_files(man):
                with open(tmp / mem, "rb") as f:
                    os.fsync(f.fileno())
            snap.write(tmp, man)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
            return man
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            if paused and was_running and self.running():
                self.qmp.execute("cont")

    # -- host memory -------------------------------------------------------------------
    def _pids(self) -> list:
        if not self.running():
            return []
        pids = [self.proc.pid]
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            pids += [int(k) for k in kids]
        except OSError:
            pass
        return pids

    def host_memory(self) -> dict:
        """What the running machine holds on the host, in bytes: ``rss`` (VmRSS of QEMU and its jail
        helper), ``shared_files`` (the part of it that is file pages every guest shares: QEMU's
        libraries, the guest kernel file; one copy in the page cache for all), and ``own`` (what this
        guest alone costs: the processes' anonymous memory plus its RAM file's pages, mapped or not)."""
        out = {"rss": 0, "shared_files": 0, "own": 0}
        if not self.running():
            return out
        shmem = 0
        for pid in self._pids():
            try:
                st = {ln.split(":")[0]: int(ln.split()[1]) * 1024
                      for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ln.startswith(("VmRSS:", "RssAnon:", "RssFile:", "RssShmem:"))}
            except (OSError, ValueError):
                continue
            out["rss"] += st.get("VmRSS", 0)
            out["shared_files"] += st.get("RssFile", 0)
            out["own"] += st.get("RssAnon", 0)
            shmem += st.get("RssShmem", 0)
        ram = self.ram_file
        try:
            out["own"] += ram.stat().st_blocks * 512 if ram is not None else shmem
        except OSError:
            out["own"] += shmem
        return out

    def rss_bytes(self) -> int:
        """Resident memory of the QEMU process and its jail helper (VmRSS; see ``host_memory``)."""
        return self.host_memory()["rss"]

    # -- snapshots: listing ----------------------------------------------------------
    def snapshots(self) -> list:
        """Every snapshot of this machine (sleep and checkpoints), oldest first."""
        out = []
        if self.snap_dir.exists():
            for d in sorted(self.snap_dir.iterdir()):
                if d.is_dir() and not d.name.endswith(".new") and (d / snap.MANIFEST).exists():
                    try:
                        out.append(snap.read(d))
                    except snap.SnapshotError as e:
                        log.warning("machine %s: %s", self.spec.name, e)
        return sorted(out, key=lambda m: m.created_at)

    def checkpoints(self) -> list:
        """[{name, label, created_at, memory, bytes, volumes}], oldest first."""
        return [m.info() for m in self.snapshots() if m.kind == "checkpoint"]

    def _next_name(self) -> str:
        n = 0
        if self.snap_dir.exists():
            for d in self.snap_dir.iterdir():
                if d.name.startswith("snap-") and d.name[5:].isdigit():
                    n = max(n, int(d.name[5:]))
        n = max(n, int(self._state().get("last_checkpoint", 0)))
        self._set_state(last_checkpoint=n + 1)
        return f"snap-{n + 1}"

    def _gc(self) -> None:
        if self.disks.exists():
            self.disks.gc([m.layers for m in self.snapshots()])

    # -- sleep and wake -------------------------------------------------------------
    def sleep(self) -> snap.Manifest:
        """Save the machine to its sleep snapshot and end its process (host memory
        freed). ``wake()`` (or ``boot()``) brings it back where it was."""
        with self._lock:
            if not self.running():
                raise VMError(f"machine {self.spec.name} is not running")
            self._expect_exit = True
            folder = self.snap_dir / "sleep"
            tmp = folder.with_name("sleep.new")
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            # The channel stays up while the guest is saved: the guest wakes holding a
            # live channel and answers the waking host's HELLO at once (a guest that
            # saw its host leave first would have to set up a new one, ~0.3 s here).
            try:
                self.qmp.execute("stop")
                man = self._manifest("sleep", "sleep", "", self.disks.layers, True)
                man.compression = self._memory_format()
                man.memory_bytes, man.ram_bytes = self._save_memory(tmp, man.compression)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                if self.running():           # could not save: the machine runs on
                    self.qmp.execute("cont")
                    self._expect_exit = False
                raise
            try:
                self.qmp.execute("quit")
                self.proc.wait(10)
            except Exception:
                pass
            self._kill()
            # Layers only the old sleep snapshot used are merged (the content stays).
            keep = [x for m in self.snapshots() if m.kind != "sleep" for x in m.layers]
            man.layers = self.disks.compact(keep)
            self.disks.freeze_top()
            snap.write(tmp, man)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
            self._set_state(sleeping=True)
            self.phase = "sleeping"
            self._gc()
            # its wake's QEMU (or another's of its shape) started ahead, its RAM pages ready: vmm.spare
            sparemod.fill(self, folder / snap.MEMORY_MAPPED if man.compression == "mapped" else None)
            return man

    def wake(self, timeout: float = WAKE_TIMEOUT_S) -> MachineState:
        """Restore the sleep snapshot; returns once the guest's channel is back.
        While waking, ``exec``/``channel`` raise ``MachineBusy`` (a 503)."""
        with self._lock:
            if self.running():
                return self
            if not self.sleeping:
                raise VMError(f"machine {self.spec.name} is not asleep")
            folder = self.snap_dir / "sleep"
            man = snap.read(folder)
            self.phase = "waking"
            try:
                self._restore_from(folder, man, timeout)
            except BaseException:
                self.phase = "sleeping" if self.sleeping else "stopped"
                raise
            return self

    def _restore_from(self, folder: Path, man: snap.Manifest, timeout: float = WAKE_TIMEOUT_S,
                      new_top_over: list | None = None) -> None:
        """Replace whatever runs with the snapshot in folder: a new top layer over its
        frozen chain, then its memory (or a cold boot for a disk-only checkpoint)."""
        snap.check_restorable(man, self.backend_name, self.shape(), self.volume_names())
        self._expect_exit = True
        self._kill()
        prev = self.phase
        self.phase = "waking" if prev == "waking" else "restoring"
        try:
            self.disks.check(man.layers)
            self.disks.push(self._owner(), over=new_top_over or man.layers)
            trace.mark(self.spec.name, "restore: new top layer")
            self._launch(folder if man.memory else None, True, timeout)
        except BaseException:
            self.phase = prev
            raise
        self._set_state(sleeping=False)
        self.phase = "running"
        self._gc()

    # -- checkpoints -------------------------------------------------------------------
    def checkpoint(self, name: str | None = None, label: str = "",
                   disk_only: bool = False) -> str:
        """Save the whole machine (memory, devices, workspace) under a name; a running
        machine runs on. A stopped one (or ``disk_only``) gets a disk-only checkpoint
        (never used for crash recovery). Returns the name."""
        with self._lock:
            if name is not None and not CHECKPOINT_NAME.fullmatch(name):
                raise ValueError("a checkpoint name is 1-40 of a-z, 0-9, '-', '_', not 'sleep'")
            name = name or self._next_name()
            folder = self.snap_dir / name
            if folder.exists():
                raise VMError(f"checkpoint {name} exists")
            self.snap_dir.mkdir(parents=True, exist_ok=True)
            if self.running():
                self._save_running(folder, "checkpoint", name, label, memory=not disk_only)
            elif self.sleeping and not disk_only:
                sleep = self.snap_dir / "sleep"
                man = snap.read(sleep)
                tmp = folder.with_name(name + ".new")
                tmp.mkdir()
                for mem in snap.memory_files(man):
                    os.link(sleep / mem, tmp / mem)
                man.kind, man.name, man.label, man.created_at = "checkpoint", name, label, snap.now()
                snap.write(tmp, man)
                os.replace(tmp, folder)
            else:
                if not self.disks.exists():
                    raise VMError(f"machine {self.spec.name} has no workspace to checkpoint")
                layers = self.disks.freeze_top()
                man = self._manifest("checkpoint", name, label, layers, False)
                snap.write(folder, man)
                if not self.sleeping:
                    self.disks.push(self._owner())   # the next boot writes a new layer
            return name

    def restore(self, name: str, timeout: float = WAKE_TIMEOUT_S) -> str:
        """Put the machine back in checkpoint ``name`` (processes running again for a
        memory checkpoint; a cold boot on its disk for a disk-only one). First takes
        a safety checkpoint labelled ``before-restore`` and returns its name, so the
        rollback can be undone; if the restore fails the machine goes back to it."""
        with self._lock:
            folder = self.snap_dir / name
            man = snap.read(folder)
            if man.kind != "checkpoint":
                raise VMError(f"{name} is not a checkpoint")
            snap.check_restorable(man, self.backend_name, self.shape(), self.volume_names())
            safety = self.checkpoint(label=snap.BEFORE_RESTORE)
            try:
                self._restore_from(folder, man, timeout)
            except BaseException as e:
                log.error("machine %s: restore of %s failed (%s); back to %s",
                          self.spec.name, name, e, safety)
                try:
                    sf = self.snap_dir / safety
                    self._restore_from(sf, snap.read(sf), timeout)
                except BaseException as e2:
                    raise VMError(f"restore of {name} failed ({e}); going back to {safety} failed "
                                  f"too ({e2}); the machine's state is kept in {safety}") from e
                raise VMError(f"restore of {name} failed ({e}); the machine is back at {safety}") from e
            return safety

    def delete_checkpoint(self, name: str) -> None:
        with self._lock:
            folder = self.snap_dir / name
            man = snap.read(folder)
            if man.kind != "checkpoint":
                raise VMError(f"{name} is not a checkpoint")
            shutil.rmtree(folder)
            self._gc()

    # -- forks -------------------------------------------------------------------------
    def fork(self, specs: list, checkpoint: str | None = None,
             base_dir: os.PathLike | None = None, keep_alive: bool = False,
             timeout: float = WAKE_TIMEOUT_S) -> tuple:
        """N copies of this machine from a checkpoint (one is taken first when none
        is named). Each spec gives a fork its identity (name, cid, uid); each fork
        gets its own copy of the checkpoint's workspace layers and a new top, and
        runs from the checkpoint's memory. Returns (checkpoint name, machines)."""
        with self._lock:
            name = checkpoint or self.checkpoint(label="fork")
            folder = self.snap_dir / name
            man = snap.read(folder)
        forks = []
        try:
            for spec in specs:
                if spec.image is None:
                    spec.image = self._image()
                f = type(self)(spec, base_dir or self.base_dir, self.platform, keep_alive=keep_alive)
                if f.dir.resolve() == self.dir.resolve() or f.disks.exists() or f.sleeping:
                    raise VMError(f"machine {spec.name} already exists")
                snap.check_restorable(man, self.backend_name, f.shape(), f.volume_names())
                forks.append(f)
                self.disks.copy_to(man.layers, f.disks)
                dst = f.snap_dir / name
                dst.mkdir(parents=True)
                for mem in snap.memory_files(man):
                    if os.stat(folder).st_dev == os.stat(f.snap_dir).st_dev:
                        os.link(folder / mem, dst / mem)
                    else:
                        shutil.copyfile(folder / mem, dst / mem)
                fm = snap.Manifest.from_json(man.to_json())
                fm.machine, fm.label = spec.name, f"fork of {self.spec.name} at {name}"
                snap.write(dst, fm)
                with f._lock:
                    f._restore_from(dst, fm, timeout)  # a disk-only checkpoint boots cold: give it a boot's time
        except BaseException:
            for f in forks:
                f.kill()
            raise
        return name, forks
