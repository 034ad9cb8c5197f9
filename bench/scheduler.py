"""The scheduler's speed, as a ratio against a baseline run in the same process.

  python bench/scheduler.py [--quick]

With 1,000 open tasks and 100 idle workers on SQLite in a file: a scheduler pass (read the
queue from the read models, plan fairly, then one command per assignment: the task and the
worker re-checked on fresh state, STOP ALL checked, both saved together) makes 100
assignments.  Each round frees the workers again and tops the open tasks back up to 1,000
outside the timing.  The baseline appends the same number of bare events (one small
aggregate, one event, one commit each) through the same store.  The last line is the
headline: assignments per second, and the ratio to bare appends.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.treasury import Plaza  # noqa: E402

from agentplaza.commands import scheduler  # noqa: E402
from agentplaza.commands import tasks as tk  # noqa: E402
from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.domain.base import PlazaAggregate  # noqa: E402
from agentplaza.projections.work import queue  # noqa: E402

OPEN_TASKS = 1_000
IDLE_WORKERS = 100


class Tick(PlazaAggregate):
    """The baseline's aggregate: one bare event per commit."""

    class Created(PlazaAggregate.Created):
        n: int

    class Ticked(PlazaAggregate.Event):
        n: int

        def apply(self, agg: Tick) -> None:
            agg.n = self.n

    def __init__(self, n: int) -> None:
        self.n = n


def top_up(p: Plaza, open_now: int) -> None:
    for _ in range(OPEN_TASKS - open_now):
        tk.create(p.cmds, p.ctx(), "Some work", "It works", 200, role=None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 2 if args.quick else 5
    d = Path(tempfile.mkdtemp(prefix="apz-bench-scheduler."))
    p = Plaza(d)
    try:
        tc.mint(p.cmds, p.ctx(), OPEN_TASKS * 200 * (rounds + 1))
        for i in range(IDLE_WORKERS):
            tk.worker_available(p.cmds, p.ctx(), f"w{i:03d}", "builder")
        top_up(p, 0)
        assigned, spent = 0, 0.0
        for _ in range(rounds):
            p.rm.catch_up()
            start = time.perf_counter()
            out = scheduler.run_pass(p.cmds, queue(p.rm))
            spent += time.perf_counter() - start
            assert len(out.assigned) == IDLE_WORKERS, (len(out.assigned), out.skipped[:3])
            assigned += len(out.assigned)
            for a in out.assigned:  # free the workers again (outside the timing)
                tk.withdraw(p.cmds, p.ctx(), a["task"])
            top_up(p, OPEN_TASKS - IDLE_WORKERS)
        rate = assigned / spent
        # the baseline: the same number of bare event appends through the same store
        aggs = [Tick.start(p.ctx(), n=0) for _ in range(assigned)]
        p.store.commit(*aggs)
        start = time.perf_counter()
        for i, agg in enumerate(aggs):
            agg.record(Tick.Ticked, p.ctx(), n=i)
            p.store.commit(agg)
        base = assigned / (time.perf_counter() - start)
        print(f"open tasks {OPEN_TASKS:,}, idle workers {IDLE_WORKERS}, rounds {rounds}, assignments {assigned}")
        print(f"bare event appends: {base:,.0f}/s")
        print(f"scheduler assignments: {rate:,.0f}/s (each: Task.Claimed + Worker.Took in one commit)")
        print(f"budget left {p.balance(t.BUDGET):,}")
        print(f"scheduler: {rate:,.0f} assignments/s with {OPEN_TASKS:,} open tasks and {IDLE_WORKERS} idle workers"
              f" = {rate / base:.2f}x bare event appends ({base:,.0f}/s)")
    finally:
        p.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
