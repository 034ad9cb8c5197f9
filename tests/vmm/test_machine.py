"""Machine behaviour that needs no boot."""
from pathlib import Path

import pytest

from vmm import cgroups, jail
from vmm.backend import MachineSpec, VMError, Volume
from vmm.probe import Facts, decide
from vmm.qemu import QemuMachine


def platform():
    return decide(Facts(frozenset({"kvm", "kvm_pvm"}), frozenset(), True, False, "/usr/bin/qemu-system-x86_64"))


class FakeImage:
    kernel, initrd, rootfs = Path("/k"), Path("/i"), Path("/r")


def test_volume_names_and_count():
    with pytest.raises(ValueError):
        Volume("-bad", Path("/x"))
    with pytest.raises(ValueError):
        Volume("a" * 21, Path("/x"))
    Volume("corpus-1", Path("/x"))
    spec = MachineSpec("m", volumes=tuple(Volume(f"v{i}", Path("/x")) for i in range(5)))
    with pytest.raises(ValueError):
        spec.validate()


def test_command_has_no_network_and_no_default_devices(tmp_path):
    m = QemuMachine(MachineSpec("cmd", image=FakeImage(), volumes=(Volume("corpus", Path("/v")),)),
                    tmp_path, platform())
    argv = m.command({"kernel": "/k", "initrd": "/i", "rootfs": "/r", "workspace": "/w",
                      "vol0": "/v", "run": "/run"})
    line = " ".join(argv)
    assert "-nodefaults" in argv and "-accel" in argv and argv[argv.index("-accel") + 1].split(",")[0] == "tcg"
    assert "-netdev" not in argv and "-nic" not in argv and "virtio-net" not in line
    assert "apz.vols=corpus" in line and "serial=apz-vol0" in line
    assert "file=/v,format=raw,if=none,readonly=on" in line
    assert argv[argv.index("-sandbox") + 1].startswith("on")
    assert "console.log" in line


def test_command_ram_as_a_file_and_qemu_connects_out(tmp_path):
    """RAM is a shared file when a RAM path is given; QMP and the channel are sockets QEMU connects
    to (the host listens first), and TCG's code cache is bounded."""
    m = QemuMachine(MachineSpec("ram", image=FakeImage(), memory_mib=192), tmp_path, platform())
    paths = {"kernel": "/k", "initrd": "/i", "rootfs": "/r", "workspace": "/w", "run": "/run"}
    line = " ".join(m.command(dict(paths, ram="/vm/ram/ram")))
    assert "memory-backend-file,id=ram,size=192M,mem-path=/vm/ram/ram,share=on" in line
    assert "microvm,memory-backend=ram" in line
    assert "socket,id=qmp,path=/run/qmp.sock,server=off" in line and "chardev=qmp,mode=control" in line
    assert "socket,id=chan,path=/run/channel.sock,server=off" in line
    assert "tcg,tb-size=" in line and "free-page-reporting=on" in line
    plain = m.command(paths, qmp=False)
    assert "memory-backend" not in " ".join(plain) and "-mon" not in plain


def test_the_channel_device_sits_where_the_image_says(tmp_path):
    """The tuned image's channel is a virtio-serial device on PCI (``microvm,pcie=on``): on virtio-mmio
    every queue has 1,024 slots and the guest filled two with 4 KiB buffers (8 MiB of an idle guest). The
    stock image, and an image that says nothing, keep virtio-mmio; the disks and the balloon stay there."""
    from vmm.image.build import CHANNEL_BUS, recipe

    class Tuned(FakeImage):
        channel_bus = "pci"

    paths = {"kernel": "/k", "initrd": "/i", "rootfs": "/r", "workspace": "/w", "run": "/run"}
    tuned = QemuMachine(MachineSpec("t", image=Tuned()), tmp_path, platform()).command(dict(paths, ram="/vm/ram"))
    assert tuned[tuned.index("-M") + 1] == "microvm,memory-backend=ram,pcie=on"
    assert "virtio-serial-pci" in tuned and "virtio-serial-device" not in tuned
    assert "virtio-blk-device,drive=root,serial=apz-root" in tuned
    assert "virtio-balloon-device,free-page-reporting=on" in tuned
    plain = QemuMachine(MachineSpec("p", image=FakeImage()), tmp_path, platform()).command(paths)
    assert plain[plain.index("-M") + 1] == "microvm" and "virtio-serial-device" in plain
    assert "virtio-serial-pci" not in plain
    assert CHANNEL_BUS == "pci" and recipe("tuned")["profile"]["channel_bus"] == "pci"
    assert "virtio_pci" in recipe("tuned")["modules"] and "virtio_pci" not in recipe("stock")["modules"]


def test_ram_is_a_file_only_where_the_tmpfs_has_room_for_it(tmp_path, monkeypatch):
    """A RAM folder with less room than the guest (a container's small /dev/shm) would end QEMU with
    SIGBUS when the guest touches a page past the room: the guest's RAM stays anonymous instead."""
    import vmm.qemu as qemu

    monkeypatch.setattr(qemu, "RAM_DIR", str(tmp_path))
    roomy = QemuMachine(MachineSpec("roomy", image=FakeImage(), memory_mib=64), tmp_path / "a", platform())
    paths: dict = {}
    assert roomy._make_ram(paths, None, None, None) is None and paths["ram"].startswith(str(tmp_path))
    assert Path(paths["ram"]).stat().st_size == 64 << 20
    huge = QemuMachine(MachineSpec("huge", image=FakeImage(), memory_mib=1 << 20), tmp_path / "b", platform())  # 1 TiB
    paths = {}
    assert huge._make_ram(paths, None, None, None) is None and "ram" not in paths and huge._ram is None


def test_limit_that_cannot_be_written_stops_the_start(tmp_path, monkeypatch):
    top = tmp_path / "cg"
    top.mkdir()
    (top / "cgroup.controllers").write_text("cpu memory pids\n")
    (top / "cgroup.subtree_control").write_text("")
    parent = top / "agentplaza.slice"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("")
    m = QemuMachine(MachineSpec("lim", image=FakeImage()), tmp_path / "vms", platform())
    vm = parent / f"vm-{m.cgroup_name()}"
    vm.mkdir()
    (vm / "memory.max").mkdir()          # a write to it fails
    monkeypatch.setattr(cgroups, "detect", lambda: (cgroups.CgroupsV2(parent), ""))
    spawned = []
    monkeypatch.setattr(jail, "spawn", lambda *a, **k: spawned.append(a))
    monkeypatch.setattr("vmm.qemu.make_workspace", lambda p, s: p.write_bytes(b""))
    with pytest.raises(VMError, match="not started"):
        m.boot()
    assert not spawned and m.proc is None


def test_two_nodes_machines_of_one_name_have_two_cgroups(tmp_path):
    one = QemuMachine(MachineSpec("agent-3", image=FakeImage()), tmp_path / "node-a", platform())
    two = QemuMachine(MachineSpec("agent-3", image=FakeImage()), tmp_path / "node-b", platform())
    assert one.cgroup_name() != two.cgroup_name() and one.cgroup_name().startswith("agent-3.")
    again = QemuMachine(MachineSpec("agent-3", image=FakeImage()), tmp_path / "node-a", platform())
    assert again.cgroup_name() == one.cgroup_name()  # the same machine finds its own cgroup after a restart


def test_cgroup_v2_limits_written(tmp_path):
    top = tmp_path / "cg"
    top.mkdir()
    (top / "cgroup.subtree_control").write_text("")
    parent = top / "agentplaza.slice"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("")
    cg = cgroups.CgroupsV2(parent).create("x", 300 << 20, 1.5, 64)
    d = parent / "vm-x"
    assert cg.folders == (d,)
    assert (d / "memory.max").read_text() == str(300 << 20)
    assert (d / "cpu.max").read_text() == "150000 100000"
    assert (d / "pids.max").read_text() == "64"
    assert cg.limits() == {"memory": 300 << 20, "cpu": 1.5, "pids": 64}


def test_cgroup_v1_limits_written_one_folder_per_controller(tmp_path):
    parents = {c: tmp_path / c / "agentplaza.slice" for c in cgroups.NEEDED}
    for p in parents.values():
        p.parent.mkdir()
    vm = parents["memory"] / "vm-x"
    vm.mkdir(parents=True)
    (vm / "memory.memsw.limit_in_bytes").write_text("")   # swap is accounted: it gets capped too
    cg = cgroups.CgroupsV1(parents).create("x", 300 << 20, 1.5, 64)
    assert cg.folders == tuple(parents[c] / "vm-x" for c in cgroups.NEEDED)
    assert (vm / "memory.limit_in_bytes").read_text() == str(300 << 20)
    assert (vm / "memory.memsw.limit_in_bytes").read_text() == str(300 << 20)
    assert (parents["cpu"] / "vm-x" / "cpu.cfs_quota_us").read_text() == "150000"
    assert cg.limits() == {"memory": 300 << 20, "cpu": 1.5, "pids": 64}


def test_cgroup_v1_limit_that_cannot_be_written_is_named(tmp_path):
    parents = {c: tmp_path / c / "agentplaza.slice" for c in cgroups.NEEDED}
    for p in parents.values():
        p.parent.mkdir()
    (parents["pids"] / "vm-x" / "pids.max").mkdir(parents=True)     # a write to it fails
    with pytest.raises(cgroups.CgroupError, match="pids.max"):
        cgroups.CgroupsV1(parents).create("x", 300 << 20, 1.5, 64)


def test_cgroups_detect_reports_why_on_this_host():
    cg, why = cgroups.detect()
    assert (cg is None) == bool(why)


def test_the_tuned_images_tcg_words_go_only_to_a_guest_under_tcg(tmp_path):
    # clearcpuid=erms: TCG runs rep-string instructions a byte per pass; under KVM the hardware's are fastest
    import dataclasses

    class Tuned(FakeImage):
        cmdline, cmdline_tcg = "loglevel=1", "clearcpuid=erms"
    tcg = QemuMachine(MachineSpec("t", image=Tuned()), tmp_path, platform())
    assert tcg.platform.accel == "tcg" and tcg.kernel_cmdline().endswith(" loglevel=1 clearcpuid=erms")
    kvm = QemuMachine(MachineSpec("k", image=Tuned()), tmp_path, dataclasses.replace(platform(), accel="kvm"))
    assert "clearcpuid" not in kvm.kernel_cmdline() and "loglevel=1" in kvm.kernel_cmdline()
    stock = QemuMachine(MachineSpec("s", image=FakeImage()), tmp_path, platform())
    assert "clearcpuid" not in stock.kernel_cmdline()
