from pathlib import Path

import pytest

from vmm.probe import HW_KVM, ISOLATION_HW, ISOLATION_TCG, NONE, PVM, Facts, decide, probe, read_facts


def facts(mods=(), flags=(), kvm=True, vsock=False):
    return Facts(frozenset(mods), frozenset(flags), kvm, vsock, "/usr/bin/qemu-system-x86_64")


@pytest.mark.parametrize("mods,flags,dev_kvm,vsock,kvm,accel,channel,iso", [
    (("kvm", "kvm_intel"), ("vmx",), True, True, HW_KVM, "kvm", "virtio-vsock", ISOLATION_HW),
    (("kvm", "kvm_amd"), ("svm",), True, False, HW_KVM, "kvm", "virtio-serial", ISOLATION_HW),
    (("kvm", "kvm_pvm"), (), True, False, PVM, "tcg", "virtio-serial", ISOLATION_TCG),
    (("kvm", "kvm_pvm"), (), True, True, PVM, "tcg", "virtio-vsock", ISOLATION_TCG),
    ((), (), False, False, NONE, "tcg", "virtio-serial", ISOLATION_TCG),
    ((), (), True, False, NONE, "tcg", "virtio-serial", ISOLATION_TCG),            # /dev/kvm alone
    (("kvm", "kvm_intel"), (), True, False, NONE, "tcg", "virtio-serial", ISOLATION_TCG),  # no vmx flag
    ((), ("vmx",), True, False, NONE, "tcg", "virtio-serial", ISOLATION_TCG),      # flag, no module
    (("kvm", "kvm_intel"), ("vmx",), False, False, NONE, "tcg", "virtio-serial", ISOLATION_TCG),
])
def test_decide(mods, flags, dev_kvm, vsock, kvm, accel, channel, iso):
    p = decide(facts(mods, flags, dev_kvm, vsock))
    assert (p.kvm, p.accel, p.channel, p.isolation) == (kvm, accel, channel, iso)
    assert p.reasons


def test_read_facts_from_fake_root(tmp_path: Path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/modules").write_text("kvm_amd 1 0 - Live 0\nkvm 2 1 kvm_amd, Live 0\n")
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu svm sse\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kvm").touch()
    f = read_facts(tmp_path)
    assert f.kvm_modules == {"kvm", "kvm_amd"} and f.cpu_flags == {"svm"} and f.dev_kvm
    assert not f.dev_vhost_vsock
    assert decide(f).accel == "kvm"


def test_this_machine_is_computed_from_proc_and_sys():
    """The answer here comes from the real files, never from /dev/kvm's presence."""
    f = read_facts("/")
    mods = set()
    if Path("/proc/modules").exists():
        mods |= {l.split()[0] for l in Path("/proc/modules").read_text().splitlines()}
    mods |= {m for m in ("kvm", "kvm_intel", "kvm_amd", "kvm_pvm") if Path("/sys/module", m).exists()}
    assert f.kvm_modules == mods & {"kvm", "kvm_intel", "kvm_amd", "kvm_pvm"}
    cpuflags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            cpuflags = set(line.split(":", 1)[1].split())
            break
    assert f.cpu_flags == cpuflags & {"vmx", "svm"}
    assert f.dev_vhost_vsock == Path("/dev/vhost-vsock").exists()
    p = probe()
    if "kvm_pvm" in f.kvm_modules and not f.kvm_modules & {"kvm_intel", "kvm_amd"}:
        # The machines this project runs on: PVM -> TCG, virtio-serial.
        assert p.kvm == PVM and p.accel == "tcg" and p.isolation == ISOLATION_TCG
    if not Path("/dev/vhost-vsock").exists():
        assert p.channel == "virtio-serial"
    if p.accel == "kvm":
        assert f.cpu_flags and f.kvm_modules & {"kvm_intel", "kvm_amd"}
