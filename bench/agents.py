"""Time from `agents create` to idle (its harness said hello to the hub), as ratios against the bare
VM boot of bench/vmm.py (qemu-system-x86_64 on the same image to the guest's HELLO), all in one run.

    python bench/agents.py [--timeline]

``--timeline`` also prints, for the four at once, each agent's steps (``vmm.trace``: the hub's reconcile,
the node's start, the restore's steps, the harness's hello) in seconds after the create, and times four
template restores at once with no hub (``vmm`` alone: the floor the hub's path stands on).
One agent cold; a fork of an idle agent (checkpoint taken, copy resumed, idle); one agent from a warm template (the template is made by an earlier spawn, not timed);
four agents at once from the warm template. In process: a hub's store and runtime, node n0, real guests.
The last line is the headline.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))  # the bench helpers (baseline.py)


def print_timeline(marks: list, t0: float, title: str) -> None:
    """Each agent's marks (``vmm.trace``), in seconds after t0; a machine's name agent-N is cid N."""
    rows: dict = {}
    for t, who, what in marks:
        if t < t0:
            continue
        who = who[6:] if who.startswith("agent-") else who
        rows.setdefault(who, []).append((t - t0, what))
    print(f"timeline, {title} (s after the create):")
    for who in sorted(rows):
        print(f"  {who}: " + "; ".join(f"{dt:.2f} {what}" for dt, what in rows[who]))


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--timeline", action="store_true")
    a = ap.parse_args()
    import vmm as _vmm  # noqa: F401
    from vmm import trace
    if a.timeline:
        trace.enable()
    from vmm import probe
    from vmm.backend import MachineSpec
    from vmm.image import ensure_image
    from vmm.qemu import QemuMachine, make_workspace

    images = os.environ.get("APZ_IMAGE_DIR") or str(Path.home() / ".local/share/agentplaza/images")
    img = ensure_image(images)
    work = Path(tempfile.mkdtemp(prefix="apz-bench-agents-"))
    os.chmod(work, 0o755)
    os.environ.update(APZ_STATE_DIR=str(work / "state"), APZ_CONFIG_DIR=str(work / "config"),
                      APZ_DATA_DIR=str(work / "data"))
    os.environ.pop("APZ_DATABASE_URL", None)

    from vmm_bench import bare_boot  # bench/vmm.py, imported under another name below

    stock = ensure_image(images, profile="stock")
    m = QemuMachine(MachineSpec("bare", image=img), work / "vms-bare", probe())
    ms = QemuMachine(MachineSpec("bare-stock", image=stock), work / "vms-bare", probe())
    make_workspace(work / "bare-ws.ext4", 1024)
    bare_tuned, bare = [], []
    for _ in range(2):   # alternating, the better of two each
        bare.append(bare_boot(ms, stock, work))
        bare_tuned.append(bare_boot(m, img, work))
    bare, bare_tuned = min(bare), min(bare_tuned)

    from agentplaza.adapters.kvm.noded import Node
    from agentplaza.api.hub import Hub
    from agentplaza.commands import agents as ac
    from agentplaza.config import folders
    from agentplaza.projections.agents import agents_table
    from agentplaza.runtime.fleet import AgentRuntime

    f = folders().make()
    hub = Hub.open(f)
    results = {}

    def run_node(templates: bool):
        node = Node("n0", f.data / "vms", image=img, templates_dir=(f.data / "templates") if templates else None)
        stop = threading.Event()
        sock = f.state / ("node-t.sock" if templates else "node-c.sock")
        threading.Thread(target=node.serve, args=(sock, stop), daemon=True).start()
        while not sock.exists():
            time.sleep(0.01)
        rt = AgentRuntime(hub, node=str(sock))
        hub.runtime = rt
        rt.start()
        return node, stop, rt

    def spawn_to_idle(rt, n: int) -> float:
        t0 = time.monotonic()
        trace.take()
        cids = ac.spawn(hub.commands, hub.commands.context("owner"), "builder", n).value
        hub.read_models.catch_up()
        rt.kick()
        while True:
            hub.read_models.catch_up()
            rows = {r["cid"]: r for r in hub.read_models.rows(agents_table)}
            if all(rows[c]["status"] == "idle" for c in cids):
                took = time.monotonic() - t0
                break
            time.sleep(0.05)
        if a.timeline:
            print_timeline(trace.take(), t0, f"{n} at once")
        for c in cids:
            ac.delete(hub.commands, hub.commands.context("owner"), c)
        hub.read_models.catch_up()
        rt.kick()
        while any(c in rt.applied for c in cids):
            time.sleep(0.1)
        return took

    def fork_to_idle(rt) -> float:
        """`agents fork` of an idle agent, one copy: a checkpoint taken, the copy resumed from it, idle."""
        (src,) = ac.spawn(hub.commands, hub.commands.context("owner"), "builder", 1).value
        hub.read_models.catch_up()
        rt.kick()
        while not any(r["cid"] == src and r["status"] == "idle" for r in hub.read_models.rows(agents_table)):
            hub.read_models.catch_up()
            time.sleep(0.05)
        t0 = time.monotonic()
        trace.take()
        (cid,) = rt.fork(src, 1, None, hub.commands.context("owner"))["forks"]
        while True:
            hub.read_models.catch_up()
            if any(r["cid"] == cid and r["status"] == "idle" for r in hub.read_models.rows(agents_table)):
                took = time.monotonic() - t0
                break
            time.sleep(0.05)
        if a.timeline:
            print_timeline(trace.take(), t0, "a fork of an idle agent")
        return took

    def shut(rt, stop, node) -> None:
        rt.close()
        stop.set()
        node.stop_all()

    node, stop, rt = run_node(templates=False)
    results["cold, 1 agent"] = spawn_to_idle(rt, 1)
    results["fork of an idle agent, 1 copy"] = fork_to_idle(rt)
    shut(rt, stop, node)
    node, stop, rt = run_node(templates=True)
    spawn_to_idle(rt, 1)  # makes the template
    results["warm template, 1 agent"] = spawn_to_idle(rt, 1)
    results["warm template, 4 at once"] = spawn_to_idle(rt, 4)
    shut(rt, stop, node)
    hub.close()
    if a.timeline:   # the floor: the same template restored four times at once, vmm alone
        from agentplaza.adapters.kvm.noded import PARKED_HARNESS
        from vmm.templates import Templates
        tpl = Templates(f.data / "templates", parked={"harness": PARKED_HARNESS})   # the node's template

        def restore(i: int, out: list) -> None:
            mm = QemuMachine(MachineSpec(f"floor{i}", image=img, cid=9000 + i), work / "vms-floor", probe(),
                             templates=tpl)
            t = time.monotonic()
            mm.boot()
            out.append(time.monotonic() - t)
            assert mm.booted_from.startswith("template:"), mm.booted_from
            mm.kill()
        one: list = []
        restore(0, one)
        four: list = []
        trace.take()
        t0 = time.monotonic()
        ths = [threading.Thread(target=restore, args=(i + 1, four)) for i in range(4)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        print_timeline(trace.take(), t0, "four template restores at once, vmm alone")
        print(f"template restore, vmm alone: one {one[0]:.2f} s; four at once, the last {max(four):.2f} s "
              f"({max(four) / one[0]:.2f}x one)")

    print(f"bare VM boot to HELLO (bench/vmm.py baseline, the stock image): {bare:.2f} s; "
          f"the tuned image the agents run: {bare_tuned:.2f} s")
    for k, v in results.items():
        print(f"agents create -> idle, {k}: {v:.2f} s = {v / bare:.2f}x bare boot "
              f"({v / bare_tuned:.2f}x the tuned image's)")
    print(f"headline: create->idle cold {results['cold, 1 agent'] / bare:.2f}x, warm "
          f"{results['warm template, 1 agent'] / bare:.2f}x, 4 at once {results['warm template, 4 at once'] / bare:.2f}x, "
          f"fork {results['fork of an idle agent, 1 copy'] / bare:.2f}x "
          f"the bare VM boot of the stock image (goals: warm <= 0.2x, fork <= 0.3x, 4 at once <= 0.6x)")
    return 0


if __name__ == "__main__":
    import importlib.util

    spec = importlib.util.spec_from_file_location("vmm_bench", ROOT / "bench" / "vmm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["vmm_bench"] = mod
    sys.exit(main())
