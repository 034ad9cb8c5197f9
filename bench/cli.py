"""The command line's start: the CPU time of a command against ``python -c "import httpx"``, measured in
the same run (ratios travel between noisy machines; seconds don't).

  python bench/cli.py [--runs N]

1. ``agentplaza --help``
2. ``agentplaza overview --json`` against a real hub this bench starts (its own folders, no node)
3. ``agentplaza tasks list --json`` against the same hub
Each figure is the least user+system CPU time of N runs of the whole process (the children's
rusage), over the same for ``python -c "import httpx"``, after one run that leaves the compiled
modules in place (as an installed package has them; ``PYTHONDONTWRITEBYTECODE`` is dropped). The goal is at most 1.5x. The last line is
the headline: the worst of the three ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.hubproc import HubProcess  # noqa: E402

from agentplaza.config import Folders  # noqa: E402

GOAL = 1.5


def cpu(argv: list[str], env: dict, runs: int) -> float:
    """The least CPU time (user + system) of ``runs`` runs of the process."""
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # compiles, once
    best = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {r.stderr}")
        best = min(best, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    agentplaza = str(Path(sys.executable).with_name("agentplaza"))
    with tempfile.TemporaryDirectory() as tmp:
        f = Folders(Path(tmp) / "state", Path(tmp) / "config", Path(tmp) / "data").make()
        hub = HubProcess(f)
        hub.env.update(APZ_NODE="off", APZ_PRICE_FETCH="off")
        hub.start()
        try:
            env = dict(hub.env)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            base = cpu([sys.executable, "-c", "import httpx"], env, a.runs)
            print(f"python -c 'import httpx'        {base * 1000:7.1f} ms CPU")
            ratios = []
            for words in (["--help"], ["overview", "--json"], ["tasks", "list", "--json"]):
                t = cpu([agentplaza, *words], env, a.runs)
                ratios.append(t / base)
                print(f"agentplaza {' '.join(words):<21} {t * 1000:7.1f} ms CPU  {t / base:.2f}x")
        finally:
            hub.stop()
    worst = max(ratios)
    print(f"CPU time of a command / import httpx: worst {worst:.2f}x (goal <= {GOAL}x: "
          f"{'met' if worst <= GOAL else 'NOT met'})")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("APZ_PRICE_FETCH", "off")
    sys.exit(main())
