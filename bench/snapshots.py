"""Snapshots against cold boots, in one run (medians of --runs, alternating).

    python bench/snapshots.py [--runs 3] [--memory 256]

- cold boot to ready: a new machine (new workspace) booted to its channel HELLO;
- template restore to ready: a new machine of the same shape restored from the
  warm template (a copy of the template's workspace, its memory loaded, the
  guest's clock and entropy refreshed, HELLO answered). Goal <= 0.2x cold;
- wake to ready vs cold boot; sleep time (save memory and end the process);
- sleep snapshot size (compressed migration stream) vs guest memory size;
- host memory of a sleeping machine (no process: goal none) vs a running one;
- template restore of a ``--big`` MiB guest (1 GiB) against the 256 MiB one's: goal <= 1.2x (the
  restore copies only the pages the template's guest used, so it does not grow with guest memory).

The last line is the headline.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vmm.backend import MachineSpec  # noqa: E402
from vmm.image import ensure_image  # noqa: E402
from vmm.image.build import console_progress  # noqa: E402
from vmm.qemu import QemuMachine  # noqa: E402
from vmm.templates import Templates  # noqa: E402

COUNTER = "(i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done) >/dev/null 2>&1 </dev/null &"


def timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memory", type=int, default=256)
    ap.add_argument("--big", type=int, default=1024)
    a = ap.parse_args()
    img = ensure_image(progress=console_progress())
    work = Path(tempfile.mkdtemp(prefix="apz-bench-snap-"))
    os.chmod(work, 0o755)
    vms = work / "vms"
    tpl = Templates(work / "templates")
    spec = dict(image=img, memory_mib=a.memory)
    made = []

    def machine(name, templates=None, memory=None):
        m = QemuMachine(MachineSpec(name, **dict(spec, memory_mib=memory or a.memory)), vms,
                        templates=templates)
        made.append(m)
        return m
    try:
        first = machine("first", tpl)             # boots cold and saves the template
        first.boot()
        print(f"platform: {first.platform.summary()}; jailed={first.jailed}")
        logging.getLogger("vmm").setLevel(logging.ERROR)
        [t] = tpl.list()
        print(f"template {t['key']}: {t['bytes'] / (1 << 20):.1f} MiB on disk")
        first.kill()

        cold, warm, wake, sleep, sizes, ram, rss_up, rss_asleep = [], [], [], [], [], [], [], []
        for i in range(a.runs):
            c = machine(f"cold{i}")
            cold.append(timed(c.boot))
            w = machine(f"warm{i}", tpl)
            warm.append(timed(w.boot))
            assert w.booted_from.startswith("template:"), w.booted_from
            w.kill()
            # sleep and wake the cold-booted one, with a process running in it
            assert c.exec(["/bin/sh", "-c", COUNTER])[0] == 0
            time.sleep(0.5)
            rss_up.append(c.rss_bytes())
            man = None

            def do_sleep():
                nonlocal man
                man = c.sleep()
            sleep.append(timed(do_sleep))
            rss_asleep.append(c.rss_bytes() + (1 if c.running() else 0))
            sizes.append(man.memory_bytes)
            ram.append(man.ram_bytes)
            wake.append(timed(c.wake))
            rc, out = c.exec(["cat", "/tmp/count"])
            assert rc == 0 and int(out) > 0
            c.kill()
            print(f"run {i + 1}: cold {cold[-1]:.3f}s  template {warm[-1]:.3f}s  "
                  f"sleep {sleep[-1]:.3f}s  wake {wake[-1]:.3f}s  "
                  f"snapshot {sizes[-1] / (1 << 20):.1f} MiB")
        big = machine("big-first", tpl, a.big)
        big.boot(timeout=120)           # its template
        big.kill()
        warm_big, warm_small = [], []
        for i in range(a.runs):
            for size, out in ((a.memory, warm_small), (a.big, warm_big)):
                w = machine(f"w{size}-{i}", tpl, size)
                out.append(timed(w.boot))
                assert w.booted_from.startswith("template:"), w.booted_from
                w.kill()
            print(f"template restore {a.memory} MiB {warm_small[-1]:.3f}s, {a.big} MiB {warm_big[-1]:.3f}s")
        mbig = statistics.median(warm_big) / statistics.median(warm_small)
        mc, mw, mk, ms = (statistics.median(x) for x in (cold, warm, wake, sleep))
        size = statistics.median(sizes)
        guest = a.memory << 20
        print(f"cold boot to ready, median of {a.runs}: {mc:.3f}s")
        print(f"template restore to ready: {mw:.3f}s = {mw / mc:.3f}x cold (goal <= 0.08x)")
        print(f"wake to ready: {mk:.3f}s = {mk / mc:.3f}x cold (goal <= 0.05x)")
        print(f"template restore of a {a.big} MiB guest {statistics.median(warm_big):.3f}s = {mbig:.2f}x "
              f"the {a.memory} MiB guest's {statistics.median(warm_small):.3f}s (goal <= 1.2x)")
        print(f"sleep (save + end the process): {ms:.3f}s")
        print(f"sleep snapshot: {size / (1 << 20):.1f} MiB for a {a.memory} MiB guest = "
              f"{size / guest:.3f}x guest memory (RAM in the stream {statistics.median(ram) / (1 << 20):.0f} MiB)")
        print(f"host memory: running {statistics.median(rss_up) / (1 << 20):.0f} MiB, "
              f"asleep {max(rss_asleep)} bytes")
        print(f"snapshots: template restore {mw / mc:.3f}x cold (goal <= 0.08x), wake {mk / mc:.3f}x "
              f"(goal <= 0.05x), {a.big} MiB restore {mbig:.2f}x the {a.memory} MiB one (goal <= 1.2x), "
              f"sleep {ms:.2f}s, snapshot {size / guest:.2f}x guest memory, asleep holds "
              f"{max(rss_asleep)} B")
    finally:
        for m in made:
            m.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
