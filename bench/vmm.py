"""Cold boot to channel-ready, against bare QEMU booting the same image to the same point; the tuned
guest image against the stock one, both under bare QEMU; host memory of idle guests.

    python bench/vmm.py [--runs 5] [--guests 3] [--settle 15]

Ours: ``QemuMachine.boot()`` (jail, cgroup where allowed, QMP, seccomp sandbox,
channel HELLO). Baseline: ``qemu-system-x86_64`` started directly with the
same kernel, initramfs, disks, channel port and kind of guest RAM (a file in the RAM folder,
``vmm.qemu.RAM_DIR``, as ours; anonymous memory where ours has none), timed until the guest's HELLO
frame arrives on the channel socket. The same RAM on both sides matters here: the first QEMU with
anonymous RAM after one whose RAM file was just freed booted 0.5-0.6 s slower on these machines
(2.7 s against 2.1 s, every time), and an interleaved run put that on the bare boots. Runs alternate (ours, bare, ours, ...)
so machine noise hits both; bare QEMU boots the stock image (``vmm.image`` profile ``stock``, the
first image as it was) and the tuned one in the same rounds. All use an existing workspace disk (its
one-time mkfs is not part of a boot). Then RSS per running guest with several guests up, right after
boot and once idle for ``--settle`` seconds (free page reporting has handed back what the guest
freed). The last line is the headline.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vmm import channel as chan  # noqa: E402
from vmm.backend import MachineSpec  # noqa: E402
from vmm.image import ensure_image  # noqa: E402
from vmm.image.build import console_progress  # noqa: E402
from vmm.qemu import RAM_DIR, QemuMachine, make_workspace  # noqa: E402


def bare_boot(m: QemuMachine, img, work: Path) -> float:
    run = work / "bare-run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    paths = {"kernel": str(img.kernel), "initrd": str(img.initrd), "rootfs": str(img.rootfs),
             "workspace": str(work / "bare-ws.ext4"), "workspace_format": "raw", "run": str(run)}
    ram_dir = None
    if os.access(RAM_DIR, os.W_OK | os.X_OK):   # the guest's RAM a file, as ours (vmm.qemu._make_ram)
        ram_dir = Path(tempfile.mkdtemp(prefix="apz-bench-ram-", dir=RAM_DIR))
        paths["ram"] = str(ram_dir / "ram")
    # bare: no QMP, no seccomp sandbox, no jail, no cgroup (QEMU connects to the channel socket)
    argv = m.command(paths, qmp=False)
    i = argv.index("-sandbox")
    del argv[i:i + 2]
    lsock = socket.socket(socket.AF_UNIX)
    lsock.bind(str(run / "channel.sock"))
    lsock.listen(1)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        lsock.settimeout(120)
        s, _ = lsock.accept()
        lsock.close()
        dec = chan.FrameDecoder()
        s.settimeout(120)
        while True:
            data = s.recv(4096)
            if not data:
                raise RuntimeError("bare guest closed the channel")
            if any(f[0] == chan.HELLO for f in dec.feed(data)):
                break
        dt = time.monotonic() - t0
        s.close()
        return dt
    finally:
        p.kill()
        p.wait()
        if ram_dir is not None:
            shutil.rmtree(ram_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--guests", type=int, default=3)
    ap.add_argument("--settle", type=float, default=15.0)
    a = ap.parse_args()
    img = ensure_image(progress=console_progress())
    stock = ensure_image(progress=console_progress(), profile="stock")
    work = Path(tempfile.mkdtemp(prefix="apz-bench-"))
    os.chmod(work, 0o755)
    try:
        m = QemuMachine(MachineSpec("bench", image=img, memory_mib=256), base_dir=work / "vms")
        print(f"platform: {m.platform.summary()}")
        make_workspace(work / "bare-ws.ext4", 1024)
        m.boot()           # warm-up boot; also creates the workspace disk
        m.stop()
        print(f"walls: jailed={m.jailed} notes={m.notes}")
        import logging
        logging.getLogger("vmm").setLevel(logging.ERROR)   # said once above
        ms = QemuMachine(MachineSpec("bench-stock", image=stock, memory_mib=256), base_dir=work / "vms")
        ours, bare, bare_stock = [], [], []
        for i in range(a.runs):
            t0 = time.monotonic()
            m.boot()
            ours.append(time.monotonic() - t0)
            m.stop()
            bare.append(bare_boot(m, img, work))
            bare_stock.append(bare_boot(ms, stock, work))
            print(f"run {i + 1}: ours {ours[-1]:.3f}s  bare qemu {bare[-1]:.3f}s  "
                  f"bare qemu, stock image {bare_stock[-1]:.3f}s")
        mo, mb, mst = statistics.median(ours), statistics.median(bare), statistics.median(bare_stock)
        ratio = mo / mb
        print(f"cold boot to channel-ready, median of {a.runs}: ours {mo:.3f}s, bare qemu {mb:.3f}s, "
              f"ratio {ratio:.3f}x (goal <= 1.1x)")
        print(f"tuned image under bare qemu {mb:.3f}s vs the stock image {mst:.3f}s: {mb / mst:.3f}x "
              f"(goal <= 0.7x); ours on the tuned image {mo / mst:.3f}x the stock bare boot")

        guests = [QemuMachine(MachineSpec(f"rss{i}", image=img, memory_mib=256), base_dir=work / "vms")
                  for i in range(a.guests)]
        for g in guests:
            g.boot(timeout=120)
        time.sleep(1)
        rss_boot = [g.rss_bytes() for g in guests]
        own_boot = [g.host_memory()["own"] for g in guests]
        time.sleep(a.settle)
        rss = [g.rss_bytes() for g in guests]
        mem = [g.host_memory() for g in guests]
        helper = []
        for g in guests:
            try:
                for line in Path(f"/proc/{g.proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        helper.append(int(line.split()[1]) * 1024)
            except OSError:
                helper.append(0)
        for g in guests:
            g.stop()
        per = statistics.mean(rss) / (1 << 20)
        per_qemu = statistics.mean(r - h for r, h in zip(rss, helper)) / (1 << 20)
        per_boot = statistics.mean(rss_boot) / (1 << 20)
        own = statistics.mean(x["own"] for x in mem) / (1 << 20)
        shared = statistics.mean(x["shared_files"] for x in mem) / (1 << 20)
        print(f"host RSS per running guest ({a.guests} up, 256 MiB guests): {per_boot:.0f} MiB just "
              f"booted; idle {a.settle:g} s later {per:.0f} MiB = QEMU {per_qemu:.0f} "
              f"MiB + jail helper {per - per_qemu:.0f} MiB; of it {shared:.0f} MiB shared file pages "
              f"(QEMU's libraries, the guest kernel file: one copy for every guest)")
        print(f"host memory each guest alone holds (anonymous + its RAM file): just booted "
              f"{statistics.mean(own_boot) / (1 << 20):.0f} MiB, idle {own:.0f} MiB (goal <= 128 MiB)")
        print(f"vmm cold boot {mo:.2f}s vs bare qemu {mb:.2f}s = {ratio:.2f}x (goal <= 1.1x); tuned image "
              f"{mb / mst:.2f}x the stock bare boot (goal <= 0.7x); idle guest holds {own:.0f} MiB of its "
              f"own, RSS {per:.0f} MiB (goal <= 128)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
