"""QEMU microvm backend, driven over QMP.

The machine: ``-M microvm -nodefaults -no-user-config``, no network device,
the kernel and initramfs of the guest image, its root disk read-only, the
agent's workspace disk, up to 4 read-only data volumes, the channel (a
virtio-serial port over a unix socket, or vhost-vsock where the host has it),
the console to a log file, QMP on a unix socket, QEMU's seccomp sandbox on.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import zlib
from pathlib import Path

from . import cgroups as cgroupsmod
from . import jail as jailmod
from . import ram_sweep, recovery, trace
from . import snapshot as snap
from . import spare as sparemod
from .backend import Backend, Machine, MachineBusy, MachineSpec, VMError, machines_dir
from .channel import Channel
from .disks import Chain, DiskError
from .probe import Platform, host_tsc_khz, probe
from .qemu_jail import JailLayout
from .qemu_state import WAKE_TIMEOUT_S, MachineState
from .qmp import QMP, QMPError

log = logging.getLogger("vmm.qemu")
UID_BASE = int(os.environ.get("APZ_VMM_UID_BASE", "200000"))
SANDBOX = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
ENTROPY_BYTES = 64                  # fresh host entropy mixed into a restored guest's pool
#: Where each running guest's RAM lives as a file (a tmpfs: no writeback, limits and OOM as for anonymous
#: memory). A snapshot then saves the file's pages and a small device stream; a restore copies them back.
RAM_DIR = os.environ.get("APZ_VMM_RAM_DIR", "/dev/shm")
#: TCG's translated-code cache (MiB). QEMU 7.2's default is 1 GiB, of which a booted guest fills ~80 MiB
#: (huge pages, never given back); the guest's hot code fits well in this.
TCG_TB_MIB = int(os.environ.get("APZ_VMM_TB_MIB", "32"))


def make_workspace(path: Path, size_mib: int) -> None:
    tmp = path.with_suffix(".new")
    with open(tmp, "wb") as f:
        f.truncate(size_mib << 20)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "apz-ws", "-E", "root_owner=0:0", str(tmp)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise VMError(f"mkfs.ext4 for the workspace failed: {r.stdout.decode()[-500:]}")
    os.replace(tmp, path)


#: The longest path a unix socket's address holds (``sun_path``, its NUL not counted).
UNIX_PATH_MAX = 107


def bind_unix(s: socket.socket, path: Path) -> None:
    """Bind ``s`` at ``path``, however deep: a longer path than a socket address holds (a node's state
    folder deep in a test's or a user's tree) is reached through its folder's descriptor
    (``/proc/self/fd/N/name``); the socket is made at ``path`` all the same."""
    if len(os.fsencode(str(path))) <= UNIX_PATH_MAX:
        s.bind(str(path))
        return
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        s.bind(f"/proc/self/fd/{dfd}/{path.name}")
    finally:
        os.close(dfd)


class QemuMachine(MachineState, JailLayout, Machine):
    backend_name = "qemu-microvm"

    def __init__(self, spec: MachineSpec, base_dir: os.PathLike | None = None,
                 platform: Platform | None = None, templates=None,
                 keep_alive: bool = False) -> None:
        spec.validate()
        self.spec = spec
        self.platform = platform or probe()
        self.base_dir = machines_dir(base_dir)
        self.dir = self.base_dir / spec.name
        self.run_dir = self.dir / "run"
        self.disks = Chain(self.dir / "disks")
        self.snap_dir = self.dir / "snapshots"
        self.console_log = self.run_dir / "console.log"
        self.templates = templates          # vmm.templates.Templates, or None: always boot cold
        self.keep_alive = keep_alive        # recover when the guest stops by itself
        self.proc: subprocess.Popen | None = None
        self.qmp: QMP | None = None
        self._channel: Channel | None = None
        self.cgroup: cgroupsmod.VMCgroup | None = None
        self._cgroups = None                # the hierarchy self.cgroup is in (vmm.cgroups)
        self._spare: jailmod.Spare | None = None   # a helper started ahead, taken for this start (vmm.jail)
        self._spare_vm = None           # the QEMU started ahead that runs this machine (vmm.spare)
        self.jailed = False
        self.notes: list = []          # why a wall or a limit is not there
        self.boot_seconds: float | None = None
        self.restore_seconds: float | None = None
        self.booted_from = ""          # "cold", "template:<key>", "snapshot:<name>"
        self.recoveries: list = []     # (time, what it recovered from) of each recovery
        self.on_exit = None            # called (plan, rc) after a guest stopped by itself was handled
        self.phase = "sleeping" if self.sleeping else "stopped"   # running, waking, restoring, exited
        self._lock = threading.RLock()
        self._expect_exit = False
        self._ram: Path | None = None   # the RAM file of the running process
        #: Programs the running guest holds started (channeld's ``park``, ``hold``), each let go by ``unpark``.
        self.parked: set = set()
        self._legacy_workspace()

    @property
    def ram_file(self) -> Path | None:
        """The running guest's RAM as a file (None: not running, or this host has no RAM folder and
        the RAM is anonymous)."""
        return self._ram

    def _ram_prefix(self) -> str:
        return f"apz-vm-{self.spec.name}-{zlib.crc32(str(self.dir.resolve()).encode()):08x}-"

    # -- files ---------------------------------------------------------------------
    @property
    def workspace(self) -> Path:
        """The top layer of the workspace (the file the running guest writes)."""
        return self.disks.top

    def _legacy_workspace(self) -> None:
        old = self.dir / "workspace.ext4"
        if old.exists() and not self.disks.exists():
            self.disks.adopt_base(old)

    def _state(self) -> dict:
        try:
            return json.loads((self.dir / "state.json").read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def _set_state(self, **kw) -> None:
        d = dict(self._state(), **kw)
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "state.json.new"
        tmp.write_text(json.dumps(d))
        os.replace(tmp, self.dir / "state.json")

    @property
    def sleeping(self) -> bool:
        """Saved to its sleep snapshot, no process (survives a daemon restart)."""
        return bool(self._state().get("sleeping")) and (self.snap_dir / "sleep" / snap.MANIFEST).exists()

    def wipe(self) -> None:
        """Make the workspace new (the machine must be stopped). Snapshots go too:
        they stand on the workspace that is wiped."""
        with self._lock:
            if self.running():
                raise VMError("cannot wipe a running machine's workspace")
            self._expect_exit = True
            if self.snap_dir.exists():
                shutil.rmtree(self.snap_dir)
            self.disks.wipe()
            self._set_state(sleeping=False)
            self.phase = "stopped"

    def _uid(self) -> int:
        if self.spec.uid is not None:
            return self.spec.uid
        if self.spec.cid is not None:
            return UID_BASE + self.spec.cid
        return UID_BASE + 10000 + zlib.crc32(self.spec.name.encode()) % 50000

    def _jail_ok(self) -> bool:
        return bool(self.spec.jail and jailmod.available()[0])

    def _owner(self) -> int | None:
        if self._spare_vm is not None:   # a spare QEMU runs as its own uid (vmm.spare)
            return self._spare_vm.uid
        return self._uid() if self._jail_ok() else None

    def _image(self):
        if self.spec.image is not None:
            return self.spec.image
        from .image import ensure_image
        self.spec.image = ensure_image()
        return self.spec.image

    # -- command line ----------------------------------------------------------------
    def kernel_cmdline(self) -> str:
        s, p = self.spec, self.platform
        cmdline = ["console=ttyS0", "panic=-1", "quiet", "reboot=t",
                   f"apz.disks={2 + len(s.volumes)}",
                   f"apz.channel={'vsock' if p.channel == 'virtio-vsock' else 'serial'}"]
        tsc = host_tsc_khz()
        if tsc:
            cmdline.append(f"tsc_early_khz={tsc}")
        if s.volumes:
            cmdline.append("apz.vols=" + ",".join(v.name for v in s.volumes))
        img = self._image()
        extra = getattr(img, "cmdline", "")   # the tuned image's own words
        if extra:
            cmdline.append(extra)
        tcg = getattr(img, "cmdline_tcg", "") if p.accel != "kvm" else ""
        if tcg:
            cmdline.append(tcg)
        return " ".join(cmdline)

    def command(self, paths: dict, incoming: bool = False, qmp: bool = True) -> list:
        """QEMU argv; ``paths`` maps kernel/initrd/rootfs/workspace/vol<i>/run to the
        paths QEMU sees (inside its jail or on the host). ``incoming``: wait for a
        migration stream (a restore) instead of running the guest. QEMU connects to the
        host's ``qmp.sock`` and ``channel.sock`` in ``run`` (listening before it starts)."""
        s, p = self.spec, self.platform
        accel = p.accel
        run = paths["run"]
        wsfmt = paths.get("workspace_format", "qcow2")
        serial_pci = p.channel != "virtio-vsock" and getattr(self._image(), "channel_bus", "mmio") == "pci"
        machine = "microvm" + (",memory-backend=ram" if paths.get("ram") else "") + (",pcie=on" if serial_pci else "")
        argv = [p.qemu or "qemu-system-x86_64",
                "-M", machine, "-accel", accel if accel == "kvm" else f"tcg,tb-size={TCG_TB_MIB}",
                "-cpu", "host" if accel == "kvm" else "max",
                "-m", str(s.memory_mib), "-smp", str(s.vcpus),
                "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
                "-chardev", f"file,id=con,path={run}/console.log", "-serial", "chardev:con"]
        if paths.get("ram"):
            argv += ["-object", f"memory-backend-file,id=ram,size={s.memory_mib}M,"
                                f"mem-path={paths['ram']},share=on"]
        if qmp:   # QEMU connects to the host's sockets: no waiting for a socket to appear
            argv += ["-chardev", f"socket,id=qmp,path={run}/qmp.sock,server=off",
                     "-mon", "chardev=qmp,mode=control"]
        argv += ["-kernel", paths["kernel"], "-initrd", paths["initrd"],
                "-append", self.kernel_cmdline(),
                "-drive", f"id=root,file={paths['rootfs']},format=raw,if=none,readonly=on",
                "-device", "virtio-blk-device,drive=root,serial=apz-root",
                "-drive", f"id=ws,file={paths['workspace']},format={wsfmt},if=none,cache=writeback"
                          + (",node-name=wsn,file.node-name=wsf" if paths.get("ws_nodes") else ""),
                "-device", "virtio-blk-device,drive=ws,serial=apz-ws"]
        for i, _v in enumerate(s.volumes):
            if paths.get(f"vol{i}_fd") is not None:   # a descriptor the jail's helper opened (read-only)
                argv += ["-add-fd", f"fd={paths[f'vol{i}_fd']},set={i + 1},opaque=apz-vol{i}"]
            argv += ["-drive", f"id=vol{i},file={paths[f'vol{i}']},format=raw,if=none,readonly=on",
                     "-device", f"virtio-blk-device,drive=vol{i},serial=apz-vol{i}"]
        if p.channel == "virtio-vsock":
            argv += ["-device", f"vhost-vsock-device,guest-cid={s.cid or 3}"]
        else:
            argv += ["-chardev", f"socket,id=chan,path={run}/channel.sock,server=off",
                     "-device", "virtio-serial-pci" if serial_pci else "virtio-serial-device",
                     "-device", "virtserialport,chardev=chan,name=apz.channel"]
        # Free page reporting: the guest hands pages it freed back, and QEMU discards them.
        argv += ["-device", "virtio-balloon-device,free-page-reporting=on"]
        if incoming:
            argv += ["-incoming", "defer"]
        argv += ["-sandbox", SANDBOX]
        return argv

    def shape(self) -> dict:
        """What a memory snapshot must match to restore into this machine."""
        img = self._image()
        return {"vcpus": self.spec.vcpus, "memory_mib": self.spec.memory_mib,
                "workspace_mib": self.spec.workspace_mib, "image": img.key,
                "artifacts": dict(img.manifest.get("artifacts", {})),
                "cmdline": self.kernel_cmdline(), "vmm_version": snap.VMM_VERSION,
                "accel": self.platform.accel, "channel": self.platform.channel}

    def volume_names(self) -> list:
        return [v.name for v in self.spec.volumes]

    # -- lifecycle --------------------------------------------------------------------
    def boot(self, wait_ready: bool = True, timeout: float = 60.0) -> QemuMachine:
        """Start the machine: a sleeping one wakes; a new one of a shape that has a
        warm template restores from it; otherwise a cold boot (which, with templates
        on and no volumes, saves the template once the guest is ready)."""
        with self._lock:
            if self.running():
                raise VMError(f"machine {self.spec.name} is already running")
            if self.sleeping:
                return self.wake(timeout)
            trace.mark(self.spec.name, "boot")
            tmpl = None
            # Only a machine that starts from a fresh workspace may become its shape's template: one
            # booted again over its own workspace (an agent stopped, or booted after an upgrade changed
            # the key) would hand its files and memory to every machine restored from it.
            fresh = not self.disks.exists()
            if self.templates is not None and not self.spec.volumes and fresh:
                tmpl = self.templates.find(self)
            if tmpl is not None:
                key, folder, man = tmpl
                try:
                    trace.mark(self.spec.name, "template found")
                    self.templates.copy_workspace(folder, man, self.disks)
                    trace.mark(self.spec.name, "workspace copied")
                    self._restore_from(folder, man, timeout, new_top_over=man.layers)
                    self.booted_from = f"template:{key}"
                    return self
                except (VMError, DiskError, snap.SnapshotError) as e:
                    log.warning("machine %s: template %s failed (%s); booting cold",
                                self.spec.name, key, e)
                    self.notes.append(f"template {key} not used: {e}")
                    self.kill()
                    self.disks.wipe()
            self._launch(None, wait_ready, timeout)
            self.booted_from = "cold"
            if wait_ready and fresh and self.templates is not None and not self.spec.volumes:
                try:
                    self.templates.save(self)
                    found = self.templates.find(self)   # its copies will be restored: a QEMU ahead (vmm.spare)
                    sparemod.fill(self, found[1] / snap.MEMORY_MAPPED if found else None)
                except Exception as e:  # a template is an optimisation; never fail the boot
                    log.warning("machine %s: template not saved: %s", self.spec.name, e)
                    self.notes.append(f"template not saved: {e}")
            return self

    def _launch(self, incoming: Path | None, wait_ready: bool = True,
                timeout: float = 60.0, spare_ok: bool = True) -> None:
        with sparemod.starting() as st:   # no spare QEMU is made while a start runs (vmm.spare)
            self._start(incoming, wait_ready, timeout, spare_ok, st)

    def _start(self, incoming: Path | None, wait_ready: bool, timeout: float, spare_ok: bool,
               st: sparemod.starting | None = None) -> None:
        """Spawn QEMU on the current workspace chain (or take the QEMU started ahead: ``vmm.spare``); with
        ``incoming`` (a snapshot folder) load its memory and resume instead of booting."""
        if self.platform.qemu is None:
            raise VMError("qemu-system-x86_64 is not installed (apt: qemu-system-x86)")
        if self.platform.channel == "virtio-vsock":
            raise VMError("the vsock channel's host side is not built yet; this host has "
                          "/dev/vhost-vsock, use the virtio-serial channel (see docs/vmm.md)")
        t0 = time.monotonic()
        self.parked = set()
        img = self._image()
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir()
        owner = self._owner()
        if not self.disks.exists():
            self.disks.create(make_workspace, self.spec.workspace_mib, owner)
        self.disks.fix_modes(owner)
        for v in self.spec.volumes:
            if not Path(v.image).is_file():
                raise VMError(f"volume {v.name}: no image at {v.image}")

        host_paths = {"kernel": str(img.kernel), "initrd": str(img.initrd), "rootfs": str(img.rootfs),
                      "workspace": str(self.disks.top), "run": str(self.run_dir)}
        for i, v in enumerate(self.spec.volumes):
            host_paths[f"vol{i}"] = str(Path(v.image).resolve())
        man = snap.read(incoming) if incoming is not None else None
        mapped = man is not None and man.memory and man.compression == "mapped"
        sp = sparemod.take(self) if spare_ok and mapped else None
        # with QEMU already up, the snapshot's RAM is what a restore waits for: from now, into pages the
        # spare has ready, and what it had ready beyond the snapshot's pages given back before the guest runs
        filling = self._fill_ram(sp.ram, incoming / snap.MEMORY_MAPPED, sp) if sp is not None else None

        trace.mark(self.spec.name, "launch: files ready")
        sp = self._setup_cgroup(sp)
        trace.mark(self.spec.name, "cgroup made" if sp is None else "cgroup made (spare QEMU)")
        use_jail = self.spec.jail
        if use_jail:
            ok, why = jailmod.available()
            if not ok:
                self.notes.append(f"no jail: {why}")
                log.warning("machine %s runs without its jail: %s", self.spec.name, why)
                use_jail = False
        self._expect_exit = False
        listeners: dict = {}
        resumed, fallback = False, None
        try:
            if sp is not None:   # QEMU is up: the snapshot's RAM into its file, the workspace handed over
                self.proc, self.qmp, self.jailed, self._ram, self._spare_vm = sp.helper.proc, sp.qmp, True, sp.ram, sp
                chan = sparemod.adopt(self, sp, self.disks.top)
                trace.mark(self.spec.name, "spare QEMU adopted")
            else:
                filling = self._make_ram(host_paths, owner, incoming, man)
                listeners = {n: self._listen(n, owner) for n in ("qmp.sock", "channel.sock")}
                trace.mark(self.spec.name, "RAM file made, sockets listening")
                if use_jail:
                    self._spawn_jailed(host_paths, incoming is not None)
                else:
                    argv = self.command(host_paths, incoming is not None)
                    self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, start_new_session=True,
                                                 preexec_fn=self.cgroup.joiner() if self.cgroup else None)
                trace.mark(self.spec.name, "QEMU spawned")
                try:
                    self.qmp = QMP.over_socket(self._accept(listeners["qmp.sock"], "QMP", 10), timeout=10)
                except (OSError, QMPError) as e:   # QEMU ended while it started: say why
                    try:
                        self.proc.wait(5)
                    except subprocess.TimeoutExpired:
                        pass
                    raise VMError(f"QEMU did not start ({e}): {self._proc_output()}") from e
                trace.mark(self.spec.name, "QMP connected")
                chan = self._accept(listeners["channel.sock"], "the channel", 10)
            self._connect_channel(chan, hello=incoming is None)
            trace.mark(self.spec.name, "channel connected")
            if incoming is not None:
                if filling is not None:
                    filling.join()
                    if filling.error is not None:
                        raise VMError(f"could not load the snapshot's RAM: {filling.error}")
                    trace.mark(self.spec.name, "RAM filled")
                self._load_memory(incoming, man, timeout)
                trace.mark(self.spec.name, "devices loaded")
                resumed = True
                self.qmp.execute("cont")
                trace.mark(self.spec.name, "cont")
                self._refresh_guest(max(1.0, timeout - (time.monotonic() - t0)))
                trace.mark(self.spec.name, "guest refreshed (HELLO)")
                self.restore_seconds = time.monotonic() - t0
                self.booted_from = f"snapshot:{man.name}"
            elif wait_ready:
                if st is not None:   # a cold boot: the rest is the guest's (a spare may be made beside it)
                    st.host_part_done()
                self.wait_ready(max(1.0, timeout - (time.monotonic() - t0)))
                trace.mark(self.spec.name, "guest HELLO")
                self.boot_seconds = time.monotonic() - t0
        except BaseException as e:
            self.kill()
            self._expect_exit = False
            if sp is None or resumed or not isinstance(e, (VMError, DiskError, QMPError, OSError)):
                raise
            fallback = e
        finally:
            for sock in listeners.values():
                sock.close()
        if fallback is not None:   # the spare QEMU refused: a QEMU of its own, as without one
            log.warning("machine %s: the spare QEMU not used (%s)", self.spec.name, fallback)
            self.notes.append(f"spare QEMU not used: {fallback}")
            return self._launch(incoming, wait_ready, timeout, spare_ok=False)
        self.phase = "running"
        if self.jailed and self.cgroup is not None:   # the next start's helper, once this one is up (vmm.jail)
            jailmod.fill_spare(self._cgroups.folders)
            if incoming is not None:   # a restore: more may follow; their QEMU started ahead (vmm.spare)
                sparemod.fill(self, incoming / snap.MEMORY_MAPPED if mapped else None)
        if self.keep_alive:
            threading.Thread(target=self._watch, args=(self.proc,), daemon=True,
                             name=f"vmm-watch-{self.spec.name}").start()

    def cgroup_name(self) -> str:
        """The machine's cgroup: its name and a digest of its folder, so that two nodes (or two test runs)
        on one host that both run a machine "agent-3" never share one memory limit."""
        return f"{self.spec.name}.{zlib.crc32(str(self.dir.resolve()).encode()):08x}"

    def _setup_cgroup(self, sp=None):
        """The VM's cgroup, with its limits. Returns ``sp`` (a spare QEMU, ``vmm.spare``) with its folders
        now the VM's, or None when there was none or it could not be claimed."""
        cg, why = cgroupsmod.detect()
        if cg is None:
            self.notes.append(f"no limits: {why}")
            log.warning("machine %s runs without cgroup limits: %s", self.spec.name, why)
            if sp is not None:
                sparemod.end(sp)
            return None
        mem = (self.spec.memory_mib + self.spec.memory_overhead_mib) << 20
        # A jailed start takes the spare helper (or QEMU) when one is ready: its cgroup folders become the
        # VM's (vmm.jail: no move into a cgroup on this path), and the limits are written into them here.
        if sp is not None and jailmod.claim(sp.helper, cg.folders(self.cgroup_name())) is None:
            sparemod.end(sp)
            sp = None
        self._spare = jailmod.take_spare(cg.folders, self.cgroup_name()) if self._jail_ok() and sp is None else None
        try:
            self.cgroup = cg.create(self.cgroup_name(), mem, self.spec.cpu_max or self.spec.vcpus,
                                    self.spec.pids_max)
        except cgroupsmod.CgroupError as e:
            if self._spare is not None:
                jailmod.end_spare(self._spare)
                self._spare = None
            if sp is not None:
                sparemod.end(sp)
            raise VMError(f"machine {self.spec.name} not started: {e}") from e
        self._cgroups = cg
        return sp

    def _inner_disks(self) -> str:
        return "/vm/disks"

    def _qemu_path(self, host: Path) -> str:
        """A file of the disks folder as QEMU sees it."""
        return f"/vm/disks/{host.name}" if self.jailed else str(host)

    def _make_ram(self, host_paths: dict, owner: int | None, incoming: Path | None,
                  man) -> threading.Thread | None:
        """The guest's RAM file, sized (and for a mapped snapshot, filled from its ``memory.ram``
        by a thread while QEMU starts: the caller joins it before the device state loads)."""
        root = Path(RAM_DIR)
        self._ram = None
        if not root.is_dir() or not os.access(root, os.W_OK | os.X_OK):
            return None
        room = os.statvfs(root)
        if room.f_bavail * room.f_frsize < self.spec.memory_mib << 20:
            # a tmpfs too small for the guest (a container's 64 MiB /dev/shm) would kill QEMU with SIGBUS
            # when the guest touches a page past its end: the guest's RAM stays anonymous memory instead
            log.warning("machine %s: %s has less room than the guest's %d MiB; its RAM is not a file",
                        self.spec.name, root, self.spec.memory_mib)
            return None
        prefix = self._ram_prefix()
        for stale in root.glob(prefix + "*"):   # left by a process that did not end through us
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        ram_sweep.sweep_once(root)                # and other machines' (vmm.ram_sweep), in the background
        # a fresh name each run (mkdtemp: 0700, never one someone else made in a shared tmpfs)
        ram = Path(tempfile.mkdtemp(prefix=prefix, dir=root)) / "ram"
        self._ram = ram
        fd = os.open(ram, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, self.spec.memory_mib << 20)
        finally:
            os.close(fd)
        if owner is not None:
            os.chown(ram.parent, owner, owner)
            os.chown(ram, owner, owner)
        host_paths["ram"] = str(ram)
        if man is None or not man.memory or man.compression != "mapped":
            return None
        return self._fill_ram(ram, incoming / snap.MEMORY_MAPPED)

    def _fill_ram(self, ram: Path, src: Path, sp=None) -> threading.Thread:
        class Fill(threading.Thread):
            error = None

            def run(self) -> None:
                try:
                    snap.copy_ram(src, ram, skip_zeros=False)
                    if sp is not None:
                        sparemod.give_back_rest(sp, src)
                except OSError as e:
                    self.error = e
        t = Fill(daemon=True, name=f"vmm-ram-{self.spec.name}")
        t.start()
        return t

    def _listen(self, name: str, owner: int | None) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = self.run_dir / name
        bind_unix(s, path)
        if owner is not None:
            os.chown(path, owner, owner)
        os.chmod(path, 0o600)
        s.listen(1)
        return s

    def _accept(self, listener: socket.socket, what: str, timeout: float) -> socket.socket:
        """QEMU's connection, or the reason it will not come: woken by the connection or by the
        process's end (a pidfd), never by a timer."""
        import selectors
        sel = selectors.DefaultSelector()
        pidfd = os.pidfd_open(self.proc.pid)
        try:
            sel.register(listener, selectors.EVENT_READ)
            sel.register(pidfd, selectors.EVENT_READ)
            for key, _ in sel.select(timeout):
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    return conn
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise VMError(f"QEMU exited with {self.proc.returncode}: {out.strip()[-2000:]}")
            raise VMError(f"QEMU did not connect to {what} within {timeout:g} s")
        finally:
            sel.close()
            os.close(pidfd)

    def _connect_channel(self, s: socket.socket, hello: bool = True) -> None:
        self._refreshed = threading.Event()

        def on_hello(h: dict) -> None:
            if h.get("reply") and "refreshed" in h:
                self._refresh_reply = h
                self._refreshed.set()
        ch = Channel.over_socket(s, role="host", on_hello=on_hello)
        # A restored guest may still hold streams of the host it was saved with;
        # start this host's ids somewhere else so they never collide.
        ch._next_id = 2 * random.randrange(1, 1 << 29)
        self._channel = ch.start(hello=hello)

    def wait_ready(self, timeout: float = 60.0) -> dict:
        try:
            return self._channel.wait_ready(timeout)
        except (TimeoutError, Exception) as e:
            raise VMError(f"guest {self.spec.name} did not reach its channel service ({e}); "
                          f"console:\n{self.console()[-2000:]}") from e

    @property
    def channel(self) -> Channel:
        if self.phase in ("waking", "restoring"):
            raise MachineBusy(f"machine {self.spec.name} is {self.phase}")
        if self._channel is None:
            raise VMError("machine not booted")
        return self._channel

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exec(self, argv: list, stdin: bytes = b"", timeout: float = 60.0, **meta) -> tuple:
        """Run a program in the guest over the channel: (exit code, output)."""
        if self.phase in ("waking", "restoring"):
            raise MachineBusy(f"machine {self.spec.name} is {self.phase}")
        return self._exec(argv, stdin, timeout, **meta)

    def _exec(self, argv: list, stdin: bytes = b"", timeout: float = 60.0, **meta) -> tuple:
        if self._channel is None:
            raise VMError("machine not booted")
        st = self._channel.open("exec", argv=list(argv), **meta)
        if stdin:
            st.write(stdin)
        st.close()
        out = st.read_all(timeout)
        return st.close_info.get("exit"), out

    def _refresh_guest(self, timeout: float = 30.0) -> None:
        """A restored guest resumes with the clock and random pool it was frozen
        with. Before any work reaches it, the host's HELLO carries its wall clock
        and fresh entropy; channeld sets the clock, mixes the bytes into the pool
        and answers ``refreshed``. That answer is channel-ready for a restore."""
        hello = {"version": 1, "role": "host", "time": time.time(),
                 "entropy": os.urandom(ENTROPY_BYTES).hex()}
        from .channel import HELLO
        with self._channel._lock:
            self._channel._send_locked(HELLO, 0, json.dumps(hello).encode())
        if not self._refreshed.wait(timeout):
            raise VMError(f"restored guest {self.spec.name} did not answer on its channel; "
                          f"console:\n{self.console()[-2000:]}")
        if not self._refresh_reply.get("refreshed"):
            raise VMError(f"restored guest {self.spec.name} could not set its clock or entropy")
        self.parked = {n for n in self._refresh_reply.get("held") or () if isinstance(n, str)}  # see channeld

    def stop(self, timeout: float = 20.0) -> int:
        with self._lock:
            self._expect_exit = True
            if self.proc is None:
                return 0
            if self.running():
                try:
                    if self._channel is not None and not self._channel.closed:
                        st = self._channel.open("shutdown")
                        st.close()
                    self.proc.wait(timeout)
                except Exception:
                    try:
                        self.qmp.execute("quit")
                        self.proc.wait(5)
                    except Exception:
                        pass
            if self.running():
                self.kill()
            self.phase = "stopped"
            return self._cleanup()

    def kill(self) -> None:
        with self._lock:
            self._expect_exit = True
            self._kill()
            if self.phase not in ("waking", "restoring"):
                self.phase = "sleeping" if self.sleeping else "stopped"

    def _kill(self) -> None:
        if self._spare is not None:   # taken for a start that failed before it spawned
            jailmod.end_spare(self._spare)
            self._spare = None
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self._cleanup()

    def _cleanup(self) -> int:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        rc = self.proc.returncode if self.proc is not None else 0
        if not self.running() and self._ram is not None:   # the guest's memory goes with its process
            shutil.rmtree(self._ram.parent, ignore_errors=True)
            self._ram = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self._spare_vm is not None and not self.running():
            sparemod.release(self._spare_vm)
            self._spare_vm = None
        jroot = self.dir / "jail"
        if jroot.exists():
            try:
                jroot.rmdir()
            except OSError:
                pass
        return rc or 0

    def console(self) -> str:
        try:
            return self.console_log.read_text(errors="replace")
        except OSError:
            return ""

    def pause(self) -> None:
        self.qmp.execute("stop")

    def resume(self) -> None:
        self.qmp.execute("cont")

    def status(self) -> str:
        try:
            return self.qmp.execute("query-status")["status"]
        except (QMPError, OSError, AttributeError):
            return "stopped"

    # -- crash recovery -----------------------------------------------------------------
    def _watch(self, proc: subprocess.Popen) -> None:
        proc.wait()
        with self._lock:
            if proc is not self.proc or self._expect_exit:
                return
            p = self._on_exit(proc.returncode)
        if self.on_exit is not None:
            self.on_exit(p, proc.returncode)

    def _on_exit(self, rc) -> recovery.Plan:
        now = time.time()
        self._cleanup()
        recent = [t for t, _ in self.recoveries]
        p = recovery.plan(now, recent, self.snapshots(), enabled=self.keep_alive,
                          deliberate=self._expect_exit)
        if p.action == "exit":
            log.warning("machine %s exited (rc %s) and stays exited: %s", self.spec.name, rc, p.reason)
            self.phase = "exited"
            return p
        log.warning("machine %s exited by itself (rc %s): %s", self.spec.name, rc, p.reason)
        self.recoveries.append((now, p.snapshot or "cold"))
        try:
            if p.action == "snapshot":
                folder = self.snap_dir / p.snapshot
                self._restore_from(folder, snap.read(folder))
            else:
                self._launch(None, True, WAKE_TIMEOUT_S)
                self.booted_from = "cold"
        except Exception as e:
            log.error("machine %s: recovery failed: %s", self.spec.name, e)
            self.phase = "exited"
            return recovery.Plan("exit", reason=f"recovery failed: {e}")
        return p

    # -- moves ----------------------------------------------------------------------------
    def export(self):
        """The sleeping machine's files as a ``vmm.move.Export`` (stops nothing)."""
        from .move import Export
        with self._lock:
            if not self.sleeping or self.running():
                raise VMError(f"machine {self.spec.name} must be asleep to be exported")
            return Export(self.dir)

    def release(self) -> None:
        """Let go of a moved machine: its files here are removed."""
        with self._lock:
            self._expect_exit = True
            self._kill()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.phase = "stopped"




class QemuBackend(Backend):
    name = QemuMachine.backend_name

    def __init__(self, platform: Platform | None = None, templates=None,
                 recover: bool = True) -> None:
        """``templates``: a ``vmm.templates.Templates`` store (None: always boot cold);
        ``recover=False`` turns crash recovery off for every machine (noded --no-recover)."""
        self.platform = platform or probe()
        self.templates = templates
        self.recover = recover

    def machine(self, spec: MachineSpec, base_dir: os.PathLike | None = None,
                keep_alive: bool = False) -> QemuMachine:
        return QemuMachine(spec, base_dir, self.platform, templates=self.templates,
                           keep_alive=keep_alive and self.recover)
