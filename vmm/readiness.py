"""What this machine needs to run agents' microVMs, and what of it is missing.

One list for every caller: the installer (``scripts/install.sh``, through ``python -m vmm.readiness``),
node n0's facts, the hub when the owner creates an agent, and ``agentplaza doctor``.

- ``PROGRAMS``: each program the node runs, with the Debian package that has it: QEMU and
  ``qemu-img`` to boot, ``zstd`` to put an agent to sleep, ``git`` for the hub's git server, and the
  guest image's build tools.
- ``blockers()``: why a microVM cannot boot here now (empty: it can). No QEMU, or no guest image
  and no way to build one. Without /dev/kvm a guest still boots, under emulation (slowly), so that
  is a warning, not a blocker (``vmm.probe``).

Standard library only, like the rest of ``vmm``; it needs no virtual environment, so the installer
runs it with the system's ``python3`` before anything is installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from .image.build import BUSYBOX, TOOLS, cached, data_dir

#: The programs running agents needs, each with its Debian package.
PROGRAMS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "zstd": "zstd",
    "git": "git",  # the hub's git server runs the system's git (agentplaza/api/routes/git.py)
    **{tool: pkg for tool, pkg in TOOLS.items() if tool not in ("apt-get", "dpkg")},
}
#: The static busybox the guest image's initramfs is made of.
BUSYBOX_PACKAGE = "busybox-static"
#: What a microVM cannot boot without.
BOOT_PROGRAMS = ("qemu-system-x86_64", "qemu-img")


def missing_programs() -> dict[str, str]:
    """Each program not found, with its package (the static busybox as its path)."""
    miss = {p: pkg for p, pkg in PROGRAMS.items() if shutil.which(p) is None}
    if not BUSYBOX.exists():
        miss[str(BUSYBOX)] = BUSYBOX_PACKAGE
    return miss


def missing_packages() -> list[str]:
    """The Debian packages to install, each once, in a stable order."""
    return sorted(set(missing_programs().values()))


def install_line(packages: list[str]) -> str:
    return "sudo apt-get install -y " + " ".join(packages)


def image_ready(images_dir: os.PathLike | None = None) -> bool:
    return cached(images_dir) is not None


def blockers(images_dir: os.PathLike | None = None) -> list[str]:
    """Why an agent's microVM cannot boot on this machine now; empty when it can."""
    miss = missing_programs()
    out = [f"{p} is not installed (apt: {miss[p]})" for p in BOOT_PROGRAMS if p in miss]
    if not image_ready(images_dir):
        tools = {p: pkg for p, pkg in miss.items() if p not in BOOT_PROGRAMS and p != "zstd"}
        if tools:
            out.append(f"the guest image is not built in {data_dir(images_dir)}, and cannot be: missing "
                       + ", ".join(f"{p} (apt: {pkg})" for p, pkg in tools.items()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vmm.readiness")
    ap.add_argument("what", choices=("packages", "check"),
                    help="packages: the Debian packages missing, on one line; check: why a microVM cannot boot")
    ap.add_argument("--images-dir", default=os.environ.get("APZ_IMAGE_DIR") or None)
    a = ap.parse_args(argv)
    if a.what == "packages":
        print(" ".join(missing_packages()))
        return 0
    found = blockers(a.images_dir)
    for b in found:
        print(b)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
