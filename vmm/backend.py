"""The backend interface every hypervisor backend implements.

A backend boots a ``MachineSpec`` into a running ``Machine``. QEMU microvm is
the backend here (``vmm.qemu``); Firecracker and Cloud Hypervisor backends
fit the same interface on hosts that have them.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import re
from pathlib import Path

MAX_VOLUMES = 4
VOLUME_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,19}")


class VMError(RuntimeError):
    """A machine could not be started or driven; the message says why."""


class MachineBusy(VMError):
    """The machine is waking or being restored; a request that cannot wait gets a 503."""
    status = 503
    retry_after = 1


@dataclasses.dataclass(frozen=True)
class Volume:
    """A read-only data volume: an ext4 image mounted at /data/<name>."""
    name: str
    image: Path

    def __post_init__(self) -> None:
        if not VOLUME_NAME.fullmatch(self.name):
            raise ValueError(f"bad volume name {self.name!r}: 1-20 of a-z, 0-9, '-', not starting with '-'")


@dataclasses.dataclass
class MachineSpec:
    name: str                               # unique on this node; names the machine's folder
    vcpus: int = 1
    memory_mib: int = 256
    image: object | None = None          # vmm.image.Image; None: the cached image (built on need)
    workspace_mib: int = 1024               # size of the per-agent workspace disk (sparse)
    volumes: tuple = ()                     # up to 4 Volume
    pids_max: int = 256                     # cgroup pids.max for the VMM process
    memory_overhead_mib: int = 192          # cgroup memory.max = memory_mib + this (QEMU itself)
    cpu_max: float | None = None         # cgroup cpu.max in CPUs; default: vcpus
    jail: bool = True                       # run QEMU in its jail (namespaces, pivot_root, no caps)
    uid: int | None = None               # host uid the jailed QEMU runs as; default from the name
    cid: int | None = None               # vsock guest CID (used where vhost-vsock exists)

    def validate(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", self.name):
            raise ValueError(f"bad machine name {self.name!r}")
        if not 1 <= self.vcpus <= 64:
            raise ValueError("vcpus must be 1..64")
        if not 64 <= self.memory_mib <= 1 << 20:
            raise ValueError(f"memory_mib must be 64..{1 << 20} (64 MiB to 1 TiB)")
        if len(self.volumes) > MAX_VOLUMES:
            raise ValueError(f"a machine takes at most {MAX_VOLUMES} volumes")
        names = [v.name for v in self.volumes]
        if len(set(names)) != len(names):
            raise ValueError("volume names must be unique")


def machines_dir(explicit: os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get("APZ_DATA_DIR"):
        return Path(os.environ["APZ_DATA_DIR"]) / "vms"
    return Path.home() / ".local/share/agentplaza/vms"


class Machine(abc.ABC):
    """One microVM. Lifecycle: boot() -> [pause()/resume()] -> stop() or kill()."""

    spec: MachineSpec

    @abc.abstractmethod
    def boot(self, wait_ready: bool = True, timeout: float = 60.0) -> Machine:
        """Start the VM; with wait_ready, return once the guest's channel said HELLO."""

    @abc.abstractmethod
    def stop(self, timeout: float = 20.0) -> int:
        """Clean shutdown (the guest syncs its disks); kill if it does not go in time."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Stop at once, no questions asked."""

    @abc.abstractmethod
    def console(self) -> str:
        """The guest's serial console so far (from its log file)."""

    @abc.abstractmethod
    def pause(self) -> None:
        """Freeze the vCPUs."""

    @abc.abstractmethod
    def resume(self) -> None:
        """Unfreeze the vCPUs."""

    @property
    @abc.abstractmethod
    def channel(self):
        """The host end of the guest channel (``vmm.channel.Channel``)."""

    @abc.abstractmethod
    def running(self) -> bool:
        ...

    # -- snapshots (see docs/vmm.md "Snapshots") -----------------------------------
    def sleep(self):
        """Save to the sleep snapshot and end the process (host memory freed)."""
        raise NotImplementedError

    def wake(self, timeout: float = 60.0) -> Machine:
        """Restore the sleep snapshot; the channel reconnects."""
        raise NotImplementedError

    def checkpoint(self, name: str | None = None, label: str = "", disk_only: bool = False) -> str:
        """Save the whole machine under a name; returns the name."""
        raise NotImplementedError

    def checkpoints(self) -> list:
        raise NotImplementedError

    def restore(self, name: str) -> str:
        """Back to a checkpoint; returns the name of the ``before-restore`` safety checkpoint."""
        raise NotImplementedError

    def delete_checkpoint(self, name: str) -> None:
        raise NotImplementedError

    def fork(self, specs: list, checkpoint: str | None = None) -> tuple:
        """(checkpoint, [machines]): copies of this machine, each with its own identity."""
        raise NotImplementedError


class Backend(abc.ABC):
    name: str

    @abc.abstractmethod
    def machine(self, spec: MachineSpec, base_dir: os.PathLike | None = None) -> Machine:
        """A (not yet booted) machine for spec, its files under base_dir/<name>."""
