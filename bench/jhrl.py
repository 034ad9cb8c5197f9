"""JHRL benchmark: compile time, decision latency, and the check of 500 calls.

Goals (from the issue): compile 80 built-ins + 200 owner rules <= 100 ms; decision median <= 20 us
and p99 <= 100 us; check of 500 calls <= 50 ms. The baseline, measured in the same run, is the same
decision made by scanning every law (no action index). Figures are printed, never asserted.

    /work/main/.venv/bin/python bench/jhrl.py
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jhrl.call import Call  # noqa: E402
from jhrl.catalog import ROLES, TOOLS, tier_of  # noqa: E402
from jhrl.compiler import compile_laws  # noqa: E402
from jhrl.evaluator import _outcome, decide  # noqa: E402
from jhrl.grammar import parse  # noqa: E402
from jhrl.laws import BUILTIN_FILES, builtin_laws, builtin_source  # noqa: E402
from jhrl.ruleset import RuleBook  # noqa: E402

OWNER_RULES = 200
CALLS = 20_000
CHECK_CALLS = 500
SEED = 7

TOOL_NAMES = sorted(TOOLS)


def owner_rule(i: int, rng: random.Random) -> str:
    effect = rng.choice(["permit", "forbid", "ask"])
    action = rng.choice([rng.choice(TOOL_NAMES), f"gen{i}.*", rng.choice(["engine.*", "station_*", "mcp.call"])])
    roles = ", ".join(rng.sample(ROLES, 3))
    cond = rng.choice([
        f"role in [{roles}]",
        f"args.amount > {rng.randint(1, 5000)} and role != {rng.choice(ROLES)}",
        f'args.host matches "*.example{i}.com" or mode == ask',
        f"not approved and risk == {rng.choice(['write', 'irreversible'])}",
    ])
    return (f'law owner-{i} "Owner rule {i}" {{\n  statement "Generated rule {i}."\n'
            f"  severity low\n  {effect} {action}\n  when {cond}\n}}\n")


def random_call(rng: random.Random) -> Call:
    role = rng.choice(ROLES)
    action = rng.choice(TOOL_NAMES)
    args = {"amount": rng.randint(0, 6000), "host": rng.choice(["api.example3.com", "pypi.org", "10.0.0.2"]),
            "port": rng.choice([443, 80, 8080]), "role_allowed": True, "leased": True}
    return Call(role=role, tier=tier_of(role), mode=rng.choice(["autonomous", "autonomous", "ask", "read-only"]),
                action=action, risk=TOOLS[action], args=args, approved=rng.random() < 0.05)


def linear_decide(laws, call):
    """The baseline: the same rules with no index, every law tested on every call."""
    from jhrl.compiler import pattern_covers
    forbidding, permits, asks = None, [], []
    for cl in laws:
        if any(pattern_covers(p, call.action) for p in cl.law.actions) and cl.test(call):
            if cl.effect == "forbid" and cl.preventive and forbidding is None:
                forbidding = cl.id
            elif cl.effect == "permit":
                permits.append(cl.id)
            elif cl.effect == "ask":
                asks.append(cl.id)
    return _outcome(call, forbidding, permits, asks)


def best_ms(fn, runs: int = 15) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times), statistics.median(times)


def main() -> None:
    rng = random.Random(SEED)
    rules = [owner_rule(i, rng) for i in range(OWNER_RULES)]

    t0 = time.perf_counter()
    owner_laws = [law for src in rules for law in parse(src)]
    parse_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    for name, *_ in BUILTIN_FILES:
        parse(builtin_source(name))
    builtin_parse_ms = (time.perf_counter() - t0) * 1e3
    all_laws = list(builtin_laws()) + owner_laws
    lo, med = best_ms(lambda: compile_laws(all_laws))
    print(f"laws: {len(all_laws)} (80 built-in + {len(owner_laws)} owner rules)")
    print(f"parse of the 80 built-ins (once, at start): {builtin_parse_ms:.1f} ms")
    print(f"parse of {OWNER_RULES} owner rules (once, when each is added): {parse_ms:.1f} ms")
    print(f"compile of the whole set: best {lo:.2f} ms, median {med:.2f} ms (goal <= 100 ms)")

    book = RuleBook()
    for i, src in enumerate(rules[:-1]):
        book.add(f"rule {i}", src)
    t0 = time.perf_counter()
    book.add("last", rules[-1])
    print(f"rule book save (parse one rule, compile and swap the whole set): {(time.perf_counter() - t0) * 1e3:.2f} ms")

    lawset = book.lawset
    calls = [random_call(rng) for _ in range(CALLS)]
    for call in calls[:2000]:  # warm the per-action candidate cache
        decide(lawset, call)
    samples = []
    clock = time.perf_counter_ns
    for call in calls:
        t0 = clock()
        decide(lawset, call)
        samples.append(clock() - t0)
    samples.sort()
    median_us = samples[len(samples) // 2] / 1e3
    p99_us = samples[int(len(samples) * 0.99)] / 1e3

    t0 = time.perf_counter()
    for call in calls[:2000]:
        linear_decide(lawset.laws, call)
    linear_us = (time.perf_counter() - t0) * 1e6 / 2000
    t0 = time.perf_counter()
    for call in calls[:2000]:
        decide(lawset, call)
    indexed_us = (time.perf_counter() - t0) * 1e6 / 2000
    touched = statistics.mean(len(lawset.candidates(c.action)) for c in calls[:2000])
    print(f"laws touched per decision: {touched:.1f} of {len(lawset)}")
    print(f"baseline (no index, scan every law): {linear_us:.1f} us a decision; indexed {indexed_us:.1f} us "
          f"({linear_us / indexed_us:.1f}x faster)")

    draft = book.draft_disable_statute("S-001", "bench")
    last = calls[-CHECK_CALLS:]
    lo, med = best_ms(lambda: book.check(draft, last), runs=7)
    print(f"check of {CHECK_CALLS} calls against a changed set: best {lo:.2f} ms, median {med:.2f} ms (goal <= 50 ms)")
    print(f"jhrl: a decision {linear_us / indexed_us:.1f}x faster than scanning every law; median "
          f"{median_us:.1f} us, p99 {p99_us:.1f} us (goals <= 20 us, <= 100 us)")


if __name__ == "__main__":
    main()
