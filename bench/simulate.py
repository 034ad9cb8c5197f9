"""Simulated steps per second with every invariant checked after every step, and what the checks
cost: the same seeds run again with the checks off (the same steps, the same events: the plan and
the store do not depend on the checks), in the same process.

    python bench/simulate.py [STEPS] [SEEDS]

The last line is the headline: steps/s with the invariants on, and the run's time with them on
as a ratio of its time with them off.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from agentplaza.sim.run import Options, execute, the_plan

    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    seeds = range(1, 1 + (int(sys.argv[2]) if len(sys.argv) > 2 else 3))
    execute(Options(99, steps=5), the_plan(Options(99, steps=5)))  # imports and first-use costs, untimed
    took = {}
    for check in (False, True):
        total, events = 0.0, 0
        for seed in seeds:
            o = Options(seed, steps=steps, check=check)
            started = time.perf_counter()
            r = execute(o, the_plan(o), keep_lines=False)
            total += time.perf_counter() - started
            events += r.events
            assert r.failure is None, (seed, r.failure)
        took[check] = total
        print(f"invariants {'on ' if check else 'off'}: {len(seeds)} seeds x {steps} steps, {events} events, "
              f"{total:.1f} s, {len(seeds) * steps / total:.1f} steps/s")
    on = len(seeds) * steps / took[True]
    print(f"simulate: {on:.1f} steps/s with every invariant on; invariant cost {took[True] / took[False]:.2f}x "
          f"the run with them off")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
