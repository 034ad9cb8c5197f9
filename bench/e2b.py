"""The E2B SDK on the plaza: sandbox create to its first command answered, and pause -> resume to the next
command answered, each as a ratio against the bare VM boot of ``bench/vmm.py`` measured in the same run.

    flock /tmp/apz-vm.lock python bench/e2b.py [--runs 3]

A real apid (node n0, the E2B gateway) in a temporary state folder; the unmodified ``e2b`` SDK (a test
extra) drives it. Runs alternate (bare, cold create, pause/resume, create from a template built once
before the runs) so machine noise hits all four. The last line is the headline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This file is named e2b.py: its folder must not hide the e2b package it drives.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_hub(work: Path, images: str) -> tuple[subprocess.Popen, str, int]:
    port, gw = free_port(), free_port()
    env = dict(os.environ, APZ_STATE_DIR=str(work / "state"), APZ_CONFIG_DIR=str(work / "config"),
               APZ_DATA_DIR=str(work / "data"), APZ_IMAGE_DIR=images, APZ_PRICE_FETCH="off")
    env.pop("APZ_DATABASE_URL", None)
    p = subprocess.Popen([sys.executable, "-m", "agentplaza.apid", "--bind", f"127.0.0.1:{port}",
                          "--e2b-gateway-port", str(gw)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        line = p.stdout.readline()
        if "apid: listening on" in line:
            break
        if not line and p.poll() is not None:
            raise SystemExit("apid exited")
    else:
        raise SystemExit("apid did not start")

    def drain() -> None:
        for _ in p.stdout:
            pass

    import threading

    threading.Thread(target=drain, daemon=True).start()
    return p, f"http://127.0.0.1:{port}", gw


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    import httpx
    from vmm_bench import bare_boot

    from vmm.backend import MachineSpec
    from vmm.image import ensure_image
    from vmm.qemu import QemuMachine, make_workspace

    img = ensure_image()
    images = str(img.dir.parent) if hasattr(img, "dir") else os.environ.get("APZ_IMAGE_DIR", "")
    work = Path(tempfile.mkdtemp(prefix="apz-bench-e2b-"))
    os.chmod(work, 0o755)
    hub = None
    try:
        m = QemuMachine(MachineSpec("bench", image=img, memory_mib=256), base_dir=work / "vms")
        make_workspace(work / "bare-ws.ext4", 1024)
        hub, url, gw = start_hub(work, images)
        key = httpx.post(f"{url}/v1/e2b/keys", json={"label": "bench"}, timeout=30).json()["key"]
        os.environ.update(E2B_API_URL=f"{url}/e2b", E2B_API_KEY=key, E2B_SANDBOX_URL=f"http://127.0.0.1:{gw}")
        from e2b import Sandbox, Template

        Sandbox.create(timeout=120).kill()  # warm-up
        Template.build(Template().from_base_image().run_cmd("echo ready > /workspace/ready"), "bench")
        bare, cold, resume, warm = [], [], [], []
        for i in range(a.runs):
            bare.append(bare_boot(m, img, work))
            t0 = time.monotonic()
            sbx = Sandbox.create(timeout=300)
            sbx.commands.run("true")
            cold.append(time.monotonic() - t0)
            sbx.pause()
            t0 = time.monotonic()
            again = Sandbox.connect(sbx.sandbox_id)
            again.commands.run("true")
            resume.append(time.monotonic() - t0)
            again.kill()
            t0 = time.monotonic()
            tpl = Sandbox.create("bench", timeout=300)
            tpl.commands.run("true")
            warm.append(time.monotonic() - t0)
            tpl.kill()
            print(f"run {i + 1}: bare VM boot {bare[-1]:.2f}s, create to first command {cold[-1]:.2f}s, "
                  f"from a template {warm[-1]:.2f}s, pause->resume to next command {resume[-1]:.2f}s", flush=True)
        b, c, r, w = (statistics.median(x) for x in (bare, cold, resume, warm))
        print(f"medians of {a.runs}: bare {b:.2f}s, cold create {c:.2f}s ({c / b:.2f}x), "
              f"from a template {w:.2f}s ({w / b:.2f}x), resume {r:.2f}s ({r / b:.2f}x)")
        print(f"e2b create to first command: cold {c / b:.2f}x, from a template {w / b:.2f}x (goal <= 0.3x), "
              f"pause->resume {r / b:.2f}x the bare VM boot ({b:.2f}s)")
    finally:
        if hub is not None:
            hub.terminate()
            try:
                hub.wait(timeout=30)
            except subprocess.TimeoutExpired:
                hub.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    import importlib.util

    spec = importlib.util.spec_from_file_location("vmm_bench", ROOT / "bench" / "vmm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["vmm_bench"] = mod
    sys.exit(main())
