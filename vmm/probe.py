"""What this host can run: the hypervisor, the channel, and the isolation it gives.

The facts are read from /proc and /sys (``read_facts``); the choice is a pure
function of them (``decide``). The presence of /dev/kvm alone proves nothing:
on a PVM host (``kvm_pvm``) /dev/kvm exists and accepts KVM_CREATE_VM, but an
ordinary guest kernel dies in emulation failures, so we use QEMU's TCG there.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
from pathlib import Path

HW_KVM = "hardware-kvm"
PVM = "pvm"
NONE = "none"

ISOLATION_HW = "hardware virtualization"
ISOLATION_TCG = "emulation (QEMU does not treat TCG as a security boundary)"


@dataclasses.dataclass(frozen=True)
class Facts:
    kvm_modules: frozenset        # loaded modules among kvm, kvm_intel, kvm_amd, kvm_pvm
    cpu_flags: frozenset          # vmx / svm if the CPU shows them
    dev_kvm: bool
    dev_vhost_vsock: bool
    qemu: str | None = None    # path of qemu-system-x86_64, if installed


@dataclasses.dataclass(frozen=True)
class Platform:
    kvm: str                      # HW_KVM, PVM or NONE
    accel: str                    # "kvm" or "tcg"
    channel: str                  # "virtio-vsock" or "virtio-serial"
    isolation: str
    reasons: tuple
    qemu: str | None = None

    def summary(self) -> str:
        return (f"kvm={self.kvm} accel={self.accel} channel={self.channel}; "
                f"isolation: {self.isolation}; " + "; ".join(self.reasons))


def decide(f: Facts) -> Platform:
    """Pure decision: facts in, platform out."""
    reasons = []
    hw_mod = f.kvm_modules & {"kvm_intel", "kvm_amd"}
    hw_flag = f.cpu_flags & {"vmx", "svm"}
    if "kvm_pvm" in f.kvm_modules and not hw_mod:
        kvm = PVM
        reasons.append("/dev/kvm is PVM (kvm_pvm): ordinary guest kernels fail under it, using TCG")
    elif hw_mod and hw_flag and f.dev_kvm:
        kvm = HW_KVM
        reasons.append(f"hardware KVM ({', '.join(sorted(hw_mod))} with {', '.join(sorted(hw_flag))})")
    else:
        kvm = NONE
        if f.dev_kvm:
            reasons.append("/dev/kvm present but no kvm_intel/kvm_amd with vmx/svm: not trusted, using TCG")
        elif hw_mod and hw_flag:
            reasons.append("KVM module loaded but /dev/kvm missing: using TCG")
        else:
            reasons.append("no hardware KVM: using TCG")
    accel = "kvm" if kvm == HW_KVM else "tcg"
    if f.dev_vhost_vsock:
        channel = "virtio-vsock"
        reasons.append("/dev/vhost-vsock present: channel over virtio-vsock")
    else:
        channel = "virtio-serial"
        reasons.append("no /dev/vhost-vsock: channel over a virtio-serial port")
    isolation = ISOLATION_HW if accel == "kvm" else ISOLATION_TCG
    if f.qemu is None:
        reasons.append("qemu-system-x86_64 not installed (apt: qemu-system-x86)")
    return Platform(kvm, accel, channel, isolation, tuple(reasons), f.qemu)


def _loaded_modules(root: Path) -> set:
    mods = set()
    try:
        for line in (root / "proc/modules").read_text().splitlines():
            mods.add(line.split()[0])
    except OSError:
        pass
    # Built-in or loaded modules both show up under /sys/module.
    for m in ("kvm", "kvm_intel", "kvm_amd", "kvm_pvm"):
        if (root / "sys/module" / m).exists():
            mods.add(m)
    return mods & {"kvm", "kvm_intel", "kvm_amd", "kvm_pvm"}


def _cpu_flags(root: Path) -> set:
    try:
        text = (root / "proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split()) & {"vmx", "svm"}
    return set()


def read_facts(root: os.PathLike = "/") -> Facts:
    r = Path(root)
    return Facts(kvm_modules=frozenset(_loaded_modules(r)), cpu_flags=frozenset(_cpu_flags(r)),
                 dev_kvm=(r / "dev/kvm").exists(), dev_vhost_vsock=(r / "dev/vhost-vsock").exists(),
                 qemu=shutil.which("qemu-system-x86_64") if str(root) == "/" else None)


def probe(root: os.PathLike = "/") -> Platform:
    return decide(read_facts(root))


if __name__ == "__main__":
    print(probe().summary())


@functools.cache
def host_tsc_khz() -> int | None:
    """The host TSC frequency, for the guest's tsc_early_khz= (parallel boots under
    TCG hang calibrating against the PIT without it). Worked out once per process: where the CPU's
    name carries no frequency it runs ``dmesg`` (about 20 ms), and every ``shape()`` asks."""
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
