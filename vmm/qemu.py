"""QEMU microvm backend, driven over QMP.

The machine: ``-M microvm -nodefaults -no-user-config``, no network device,
the kernel and initramfs of the guest image, its root disk read-only, the
agent's workspace disk, up to 4 read-only data volumes, the channel (a
virtio-serial port over a unix socket, or vhost-vsock where the host has it),
the console to a log file, QMP on a unix socket, QEMU's seccomp sandbox on.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import zlib
from pathlib import Path
from typing import Optional

from . import jail as jailmod
from .backend import Backend, Machine, MachineSpec, VMError, machines_dir
from .channel import Channel
from .probe import Platform, probe
from .qmp import QMP, QMPError

log = logging.getLogger("vmm.qemu")
UID_BASE = int(os.environ.get("APZ_VMM_UID_BASE", "200000"))
SANDBOX = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"


def host_tsc_khz() -> Optional[int]:
    """The host TSC frequency, for the guest's tsc_early_khz= (parallel boots under
    TCG hang calibrating against the PIT without it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and "@" in line and "GHz" in line:
                return int(float(line.rsplit("@", 1)[1].strip().rstrip("GHz").strip()) * 1e6)
    except (OSError, ValueError):
        pass
    try:
        out = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
        for line in out.splitlines():
            if "tsc: Detected" in line and "MHz" in line:
                mhz = float(line.split("Detected", 1)[1].split("MHz")[0])
                return int(mhz * 1000)
    except OSError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return int(float(line.split(":")[1]) * 1000)
    except (OSError, ValueError):
        pass
    return None


def make_workspace(path: Path, size_mib: int) -> None:
    tmp = path.with_suffix(".new")
    with open(tmp, "wb") as f:
        f.truncate(size_mib << 20)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "apz-ws", "-E", "root_owner=0:0", str(tmp)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise VMError(f"mkfs.ext4 for the workspace failed: {r.stdout.decode()[-500:]}")
    os.replace(tmp, path)


class QemuMachine(Machine):
    def __init__(self, spec: MachineSpec, base_dir: Optional[os.PathLike] = None,
                 platform: Optional[Platform] = None) -> None:
        spec.validate()
        self.spec = spec
        self.platform = platform or probe()
        self.dir = machines_dir(base_dir) / spec.name
        self.run_dir = self.dir / "run"
        self.workspace = self.dir / "workspace.ext4"
        self.console_log = self.run_dir / "console.log"
        self.proc: Optional[subprocess.Popen] = None
        self.qmp: Optional[QMP] = None
        self._channel: Optional[Channel] = None
        self.cgroup: Optional[Path] = None
        self.jailed = False
        self.notes: list = []          # why a wall or a limit is not there
        self.boot_seconds: Optional[float] = None

    # -- files ---------------------------------------------------------------------
    def wipe(self) -> None:
        """Make the workspace new (the machine must be stopped)."""
        if self.running():
            raise VMError("cannot wipe a running machine's workspace")
        for p in (self.workspace, self.workspace.with_suffix(".new")):
            if p.exists():
                p.unlink()

    def _uid(self) -> int:
        if self.spec.uid is not None:
            return self.spec.uid
        if self.spec.cid is not None:
            return UID_BASE + self.spec.cid
        return UID_BASE + 10000 + zlib.crc32(self.spec.name.encode()) % 50000

    def _image(self):
        if self.spec.image is not None:
            return self.spec.image
        from .image import ensure_image
        return ensure_image()

    # -- command line ----------------------------------------------------------------
    def command(self, paths: dict) -> list:
        """QEMU argv; ``paths`` maps kernel/initrd/rootfs/workspace/vol<i>/run to the
        paths QEMU sees (inside its jail or on the host)."""
        s, p = self.spec, self.platform
        accel = p.accel
        cmdline = ["console=ttyS0", "panic=-1", "quiet", "reboot=t",
                   f"apz.disks={2 + len(s.volumes)}",
                   f"apz.channel={'vsock' if p.channel == 'virtio-vsock' else 'serial'}"]
        tsc = host_tsc_khz()
        if tsc:
            cmdline.append(f"tsc_early_khz={tsc}")
        if s.volumes:
            cmdline.append("apz.vols=" + ",".join(v.name for v in s.volumes))
        run = paths["run"]
        argv = [p.qemu or "qemu-system-x86_64",
                "-M", "microvm", "-accel", accel, "-cpu", "host" if accel == "kvm" else "max",
                "-m", str(s.memory_mib), "-smp", str(s.vcpus),
                "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
                "-chardev", f"file,id=con,path={run}/console.log", "-serial", "chardev:con",
                "-qmp", f"unix:{run}/qmp.sock,server=on,wait=off",
                "-kernel", paths["kernel"], "-initrd", paths["initrd"],
                "-append", " ".join(cmdline),
                "-drive", f"id=root,file={paths['rootfs']},format=raw,if=none,readonly=on",
                "-device", "virtio-blk-device,drive=root,serial=apz-root",
                "-drive", f"id=ws,file={paths['workspace']},format=raw,if=none,cache=writeback",
                "-device", "virtio-blk-device,drive=ws,serial=apz-ws"]
        for i, _v in enumerate(s.volumes):
            argv += ["-drive", f"id=vol{i},file={paths[f'vol{i}']},format=raw,if=none,readonly=on",
                     "-device", f"virtio-blk-device,drive=vol{i},serial=apz-vol{i}"]
        if p.channel == "virtio-vsock":
            argv += ["-device", f"vhost-vsock-device,guest-cid={s.cid or 3}"]
        else:
            argv += ["-chardev", f"socket,id=chan,path={run}/channel.sock,server=on,wait=off",
                     "-device", "virtio-serial-device",
                     "-device", "virtserialport,chardev=chan,name=apz.channel"]
        argv += ["-sandbox", SANDBOX]
        return argv

    # -- lifecycle --------------------------------------------------------------------
    def boot(self, wait_ready: bool = True, timeout: float = 60.0) -> "QemuMachine":
        if self.running():
            raise VMError(f"machine {self.spec.name} is already running")
        if self.platform.qemu is None:
            raise VMError("qemu-system-x86_64 is not installed (apt: qemu-system-x86)")
        if self.platform.channel == "virtio-vsock":
            raise VMError("the vsock channel's host side is not built yet; this host has "
                          "/dev/vhost-vsock, use the virtio-serial channel (see docs/vmm.md)")
        t0 = time.monotonic()
        img = self._image()
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.run_dir.mkdir()
        if not self.workspace.exists():
            make_workspace(self.workspace, self.spec.workspace_mib)
        for v in self.spec.volumes:
            if not Path(v.image).is_file():
                raise VMError(f"volume {v.name}: no image at {v.image}")

        host_paths = {"kernel": str(img.kernel), "initrd": str(img.initrd), "rootfs": str(img.rootfs),
                      "workspace": str(self.workspace), "run": str(self.run_dir)}
        for i, v in enumerate(self.spec.volumes):
            host_paths[f"vol{i}"] = str(Path(v.image).resolve())

        self._setup_cgroup()
        use_jail = self.spec.jail
        if use_jail:
            ok, why = jailmod.available()
            if not ok:
                self.notes.append(f"no jail: {why}")
                log.warning("machine %s runs without its jail: %s", self.spec.name, why)
                use_jail = False
        try:
            if use_jail:
                self._spawn_jailed(host_paths)
            else:
                argv = self.command(host_paths)
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             preexec_fn=self._join_cgroup_fn())
            self.qmp = self._connect_qmp(timeout=10)
            self._connect_channel()
            if wait_ready:
                self.wait_ready(max(1.0, timeout - (time.monotonic() - t0)))
                self.boot_seconds = time.monotonic() - t0
        except BaseException:
            self.kill()
            raise
        return self

    def _join_cgroup_fn(self):
        if self.cgroup is None:
            return None
        procs = str(self.cgroup / "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        return join

    def _setup_cgroup(self) -> None:
        cg, why = jailmod.Cgroups.detect()
        if cg is None:
            self.notes.append(f"no limits: {why}")
            log.warning("machine %s runs without cgroup limits: %s", self.spec.name, why)
            return
        mem = (self.spec.memory_mib + self.spec.memory_overhead_mib) << 20
        try:
            self.cgroup = cg.create(self.spec.name, mem, self.spec.cpu_max or self.spec.vcpus,
                                    self.spec.pids_max)
        except jailmod.CgroupError as e:
            raise VMError(f"machine {self.spec.name} not started: {e}") from e

    def _spawn_jailed(self, host_paths: dict) -> None:
        uid = self._uid()
        jroot = self.dir / "jail"
        jroot.mkdir(exist_ok=True)
        os.chown(self.run_dir, uid, uid)
        os.chown(self.workspace, uid, uid)
        os.chmod(self.workspace, 0o600)
        inner = {"kernel": "/vm/vmlinux", "initrd": "/vm/initrd", "rootfs": "/vm/rootfs.ext4",
                 "workspace": "/vm/workspace.ext4", "run": "/vm/run"}
        ro = {inner[k]: host_paths[k] for k in ("kernel", "initrd", "rootfs")}
        for i in range(len(self.spec.volumes)):
            inner[f"vol{i}"] = f"/vm/vol{i}.ext4"
            ro[inner[f"vol{i}"]] = host_paths[f"vol{i}"]
        for jp, hp in jailmod.qemu_files(self.platform.qemu, self.platform.accel).items():
            ro[jp] = hp
        devices = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
        if self.platform.accel == "kvm":
            devices += ("/dev/kvm",)
        spec = jailmod.JailSpec(root=str(jroot), uid=uid, ro=ro,
                                rw={inner["workspace"]: host_paths["workspace"], inner["run"]: host_paths["run"]},
                                devices=devices, cgroup=str(self.cgroup) if self.cgroup else None)
        argv = self.command(inner)
        argv[0] = os.path.realpath(self.platform.qemu)
        self.proc = jailmod.spawn(argv, spec, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        self.jailed = True

    def _connect_qmp(self, timeout: float) -> QMP:
        sock = self.run_dir / "qmp.sock"
        end = time.monotonic() + timeout
        while not sock.exists():
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise VMError(f"QEMU exited with {self.proc.returncode}: {out.strip()[-2000:]}")
            if time.monotonic() > end:
                raise VMError("QEMU's QMP socket did not appear")
            time.sleep(0.005)
        return QMP(str(sock)).connect(timeout)

    def _connect_channel(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(self.run_dir / "channel.sock"))
        self._channel = Channel.over_socket(s, role="host").start()

    def wait_ready(self, timeout: float = 60.0) -> dict:
        try:
            return self._channel.wait_ready(timeout)
        except (TimeoutError, Exception) as e:
            raise VMError(f"guest {self.spec.name} did not reach its channel service ({e}); "
                          f"console:\n{self.console()[-2000:]}") from e

    @property
    def channel(self) -> Channel:
        if self._channel is None:
            raise VMError("machine not booted")
        return self._channel

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exec(self, argv: list, stdin: bytes = b"", timeout: float = 60.0, **meta) -> tuple:
        """Run a program in the guest over the channel: (exit code, output)."""
        st = self.channel.open("exec", argv=list(argv), **meta)
        if stdin:
            st.write(stdin)
        st.close()
        out = st.read_all(timeout)
        return st.close_info.get("exit"), out

    def stop(self, timeout: float = 20.0) -> int:
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
        return self._cleanup()

    def kill(self) -> None:
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
        if self.cgroup is not None:
            jailmod.Cgroups.remove(self.cgroup)
            self.cgroup = None
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

    def rss_bytes(self) -> int:
        """Resident memory of the QEMU process (inside the jail: the helper's child)."""
        if not self.running():
            return 0
        pids = [self.proc.pid]
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            pids += [int(k) for k in kids]
        except OSError:
            pass
        total = 0
        for pid in pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                pass
        return total


class QemuBackend(Backend):
    name = "qemu-microvm"

    def __init__(self, platform: Optional[Platform] = None) -> None:
        self.platform = platform or probe()

    def machine(self, spec: MachineSpec, base_dir: Optional[os.PathLike] = None) -> QemuMachine:
        return QemuMachine(spec, base_dir, self.platform)
