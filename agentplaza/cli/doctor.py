"""``agentplaza doctor``: is this machine ready to run a plaza and its agents, and what to fix.

Each check is one row: what, ``ok`` / ``warn`` / ``fail``, what was found, and the fix (a command
to run where there is one). Nothing is changed. The machine's needs come from ``vmm.readiness`` and
``vmm.probe`` (the same lists the installer and node n0 use); the folders and their modes are the
design's (folders 0700, files 0600); the hub's port is asked whether a hub answers there.
"""

from __future__ import annotations

import os
import socket
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlparse

from vmm.image.build import cached, data_dir
from vmm.probe import HW_KVM, probe
from vmm.readiness import BOOT_PROGRAMS, install_line, missing_packages, missing_programs

from ..config import DEFAULT_HUB, folders

OK, WARN, FAIL = "ok", "warn", "fail"
FOLDER_MODE = 0o700
FILE_MODE = 0o600
#: How long the doctor waits for a hub to answer at its address.
HUB_TIMEOUT_S = 3.0
KVM_GROUP_FIX = 'sudo usermod -aG kvm "$USER", then log out and back in'
INSTALL_FIX = "bash scripts/install.sh"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    found: str
    fix: str | None = None


def virtualization() -> Check:
    p = probe()
    kvm = Path("/dev/kvm")
    if kvm.exists() and not os.access(kvm, os.R_OK | os.W_OK):
        return Check("virtualization", FAIL, "/dev/kvm is there but this user may not open it", KVM_GROUP_FIX)
    if p.kvm == HW_KVM:
        return Check("virtualization", OK, p.reasons[0])
    return Check("virtualization", WARN, f"{p.reasons[0]}; agents boot under emulation, slowly",
                 "for hardware speed and isolation, run agents on a machine with hardware KVM "
                 "(VT-x/AMD-V on in the firmware)")


def programs() -> list[Check]:
    miss = missing_programs()
    boot = [p for p in BOOT_PROGRAMS if p in miss]
    rows = [Check("QEMU", FAIL if boot else OK,
                  ", ".join(f"{p} is not installed" for p in boot) or "qemu-system-x86_64 and qemu-img installed",
                  install_line(sorted({miss[p] for p in boot})) if boot else None)]
    packages = missing_packages()
    rows.append(Check("system packages", FAIL if packages else OK,
                      "missing: " + ", ".join(sorted(miss)) if packages else "every program agents need is installed",
                      install_line(packages) if packages else None))
    return rows


def image(images_dir: str | None) -> Check:
    img = cached(images_dir)
    if img is not None:
        return Check("guest image", OK, f"built: {img.dir}")
    return Check("guest image", WARN if not missing_packages() else FAIL,
                 f"not built in {data_dir(images_dir)} (the first agent waits for it to be built)", INSTALL_FIX)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def private_files() -> list[Check]:
    """The state, config and data folders are the owner's only; the files in state and config too."""
    f = folders()
    rows = []
    for label, folder in (("state folder", f.state), ("config folder", f.config), ("data folder", f.data)):
        if not folder.exists():
            rows.append(Check(label, WARN, f"{folder} does not exist yet (the hub makes it at its first start)"))
            continue
        mode = _mode(folder)
        if mode & 0o077:
            rows.append(Check(label, FAIL, f"{folder} is mode {mode:04o}", f"chmod 700 {folder}"))
            continue
        loose = [p for p in sorted(folder.iterdir()) if label != "data folder" and p.is_file() and not p.is_symlink()
                 and _mode(p) & 0o077]
        if loose:
            rows.append(Check(label, FAIL, "readable by others: " + ", ".join(f"{p.name} ({_mode(p):04o})" for p in loose),
                              "chmod 600 " + " ".join(str(p) for p in loose)))
        else:
            rows.append(Check(label, OK, f"{folder}, private"))
    return rows


def hub_port(url: str) -> Check:
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=HUB_TIMEOUT_S) as s:
            s.sendall(f"GET /v1/health HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = s.recv(64).decode("latin-1", errors="replace")
    except OSError:
        if host not in ("127.0.0.1", "localhost", "::1"):
            return Check("hub", FAIL, f"nothing answers at {url}", "check the address and that the hub runs there")
        return Check("hub", WARN, f"no hub runs at {url}; port {port} is free", ".venv/bin/apid")
    if head.startswith("HTTP/") and " 200 " in head[:16]:
        return Check("hub", OK, f"a hub answers at {url}")
    return Check("hub", FAIL, f"port {port} answers, but not as a hub ({head.splitlines()[0] if head else 'no answer'})",
                 f"stop what holds port {port}, or start the hub with --bind ADDRESS:PORT")


def checks(hub_url: str = DEFAULT_HUB, images_dir: str | None = None) -> list[Check]:
    return [virtualization(), *programs(), image(images_dir), *private_files(), hub_port(hub_url)]


def report(hub_url: str = DEFAULT_HUB) -> dict:
    rows = checks(hub_url, os.environ.get("APZ_IMAGE_DIR") or None)
    return {"ok": all(r.status != FAIL for r in rows), "checks": [asdict(r) for r in rows]}
