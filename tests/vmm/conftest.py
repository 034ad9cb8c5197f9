"""Fixtures for the microVM tests.

Real-boot tests are marked ``vm``. They need qemu-system-x86_64 and the image
build tools installed (CI installs: qemu-system-x86 busybox-static debootstrap gcc libc6-dev
lz4 cpio e2fsprogs, and qemu-utils zstd for snapshots); they never install anything themselves. The guest image
is built on first need (about a minute) and cached in the data folder, so
later runs reuse it.
"""
import os
import shutil
import sys

import pytest

CI_PACKAGES = "qemu-system-x86 qemu-utils zstd busybox-static debootstrap lz4 cpio e2fsprogs gcc libc6-dev"


@pytest.fixture(scope="session")
def guest_image():
    if shutil.which("qemu-system-x86_64") is None:
        pytest.fail(f"qemu-system-x86_64 not installed; scripts/test.sh installs {CI_PACKAGES}")
    from vmm.image import cached, ensure_image, missing_tools
    from vmm.image.build import console_progress
    img = cached()
    if img is None:
        miss = missing_tools()
        if miss:
            pytest.fail(f"cannot build the guest image, missing {', '.join(miss)}; "
                        f"scripts/test.sh installs {CI_PACKAGES}")
        img = ensure_image(progress=console_progress(sys.stderr))
    return img


@pytest.fixture
def vm_dir(tmp_path):
    d = tmp_path / "vms"
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    return d


@pytest.fixture
def make_machine(guest_image, vm_dir):
    from vmm.backend import MachineSpec
    from vmm.qemu import QemuMachine
    made = []

    def make(name, base_dir=None, **kw):
        m = QemuMachine(MachineSpec(name=name, image=guest_image, **kw), base_dir=base_dir or vm_dir)
        made.append(m)
        return m
    yield make
    for m in made:
        m.kill()
