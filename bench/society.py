"""Reputation's cost: a full computation for 1,000 agents and 100,000 facts (messages, reviewed work,
ratings, some owner ratings), and the cost of the same computation after one more fact (an
incremental update: the society has no cache, so it is a full pass again), each as a ratio against a
baseline pass in the same run that only sums every fact into its agent (the least any computation
over the facts must do).

  python bench/society.py [--agents N] [--facts N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentplaza.domain import reputation as rep  # noqa: E402

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def facts(agents: int, n: int, seed: int = 7) -> list[rep.Fact]:
    rnd = random.Random(seed)
    out = []
    for k in range(n):
        a, b = rnd.sample(range(3, 3 + agents), 2)
        at = T0 + dt.timedelta(minutes=k)
        kind = rnd.choices(("message", "work", "rating", "owner"), (50, 25, 24, 1))[0]
        if kind == "owner":
            out.append(rep.Fact("owner", at, None, b, passed=rnd.random() < 0.7))
        elif kind == "rating":
            out.append(rep.Fact("rating", at, a, b, rnd.choice((0.0, 0.25, 0.5, 0.75, 1.0))))
        else:
            out.append(rep.Fact(kind, at, a, b, passed=rnd.random() < 0.8 if kind == "work" else None))
    return out


def baseline(fs: list[rep.Fact], now: dt.datetime) -> dict:
    total: dict[int, float] = defaultdict(float)
    for f in fs:
        total[f.b] += rep.fade(f.at, now, rep.OPINION_FADE_DAYS)
    return total


def timed(fn, *args, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--facts", type=int, default=100_000)
    a = ap.parse_args()
    fs = facts(a.agents, a.facts)
    now = fs[-1].at + dt.timedelta(hours=1)
    agents = range(3, 3 + a.agents)
    base = timed(baseline, fs, now)
    full = timed(rep.reputation, fs, now, agents)
    more = fs + [rep.Fact("rating", now, 3, 4, 1.0)]
    update = timed(rep.reputation, more, now, agents)
    rated = sum(1 for r in rep.reputation(fs, now, agents).values() if r["score"] is not None)
    print(f"{a.agents:,} agents, {a.facts:,} facts, {rated:,} rated")
    print(f"baseline pass (sum every fact into its agent): {base * 1000:.0f} ms")
    print(f"full reputation pass: {full * 1000:.0f} ms ({full / base:.1f}x the baseline)")
    print(f"after one more fact (a full pass again): {update * 1000:.0f} ms ({update / base:.1f}x the baseline)")
    print(f"reputation for {a.agents:,} agents and {a.facts:,} facts: {full / base:.1f}x a baseline pass")


if __name__ == "__main__":
    main()
