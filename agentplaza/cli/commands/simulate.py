"""agentplaza simulate --seed N [--steps K] [--agents A] [--faults LIST] [--store sqlite|postgres]
[--until-failure] [--only STEPS] [--json]: a whole plaza run in this process from a seed, every invariant
checked after every step (``agentplaza.sim``; docs/simulate.md).

It talks to no hub: like replay and audit it is offline tooling, and it loads the plaza's code only
when it runs."""

from __future__ import annotations

import sys

from ...config import database_url
from ..actions import Action, Area, arg
from ..env import Env
from ..output import refuse

#: The most steps one run may have (a run keeps its whole history in memory).
MAX_STEPS = 100_000
#: The most agents one run may spawn.
MAX_AGENTS = 64


def _only(text: str | None) -> tuple[list[int] | None, dict[int, list[int]]]:
    """``--only 8,27=0.1.0.5``: the plan's steps to run, and the numbers a shrink gave some of them."""
    if text is None:
        return None, {}
    steps, numbers = set(), {}
    try:
        for word in (x.strip() for x in text.split(",")):
            if not word:
                continue
            n, _, given = word.partition("=")
            steps.add(int(n))
            if given:
                args = [int(v) for v in given.split(".")]
                if len(args) != 4 or any(not 0 <= v < 2**31 for v in args):
                    raise ValueError
                numbers[int(n)] = args
    except ValueError:
        raise ValueError("--only takes the plan's step numbers, separated by commas, each maybe with its four "
                         "numbers (27=0.1.0.5), as a failure report gives them") from None
    return sorted(steps), numbers


def run(env: Env) -> int:
    a = env.args
    if not 0 <= a.steps <= MAX_STEPS:
        return refuse(f"--steps is 0 to {MAX_STEPS}", "invalid_request")
    if not 1 <= a.agents <= MAX_AGENTS:
        return refuse(f"--agents is 1 to {MAX_AGENTS}", "invalid_request")
    try:
        only, numbers = _only(a.only)
    except ValueError as e:
        return refuse(str(e), "invalid_request")
    from ...sim import faults, world
    from ...sim.run import Options, as_json, report, simulate, until_failure

    try:
        faults.chosen(a.faults)
    except ValueError as e:
        return refuse(str(e), "invalid_request")
    o = Options(a.seed, a.steps, a.agents, a.faults, a.store, database_url() if a.store == "postgres" else None)
    try:
        if a.until_failure:
            for r in until_failure(o):
                print(as_json(r) if a.json else report(r).splitlines()[0], flush=True)
                if r.failure is not None:
                    if not a.json:
                        print(report(r))
                    return 1
            return 0
        r = simulate(o, only, numbers=numbers)
    except world.NoPostgres as e:
        return refuse(str(e), "invalid_request")
    print(as_json(r) if a.json else report(r))
    sys.stdout.flush()
    return 1 if r.failure is not None else 0


AREA = Area("simulate", "run a whole plaza from a seed, with faults, checking every invariant after every step", (
    Action("run", "simulate one seed (or seeds in turn until one fails)", run=run, default=True),
), top=(
    arg("--seed", type=int, required=True, metavar="N", help="the seed: the same seed gives the same run, byte for byte"),
    arg("--steps", type=int, default=200, metavar="K", help="steps of the run (default 200)"),
    arg("--agents", type=int, default=9, metavar="A", help="agents spawned at the start (default 9)"),
    arg("--faults", default="all", metavar="LIST",
        help="all (default), none, or fault names separated by commas (docs/simulate.md lists them; an unknown "
             "name is refused with the list)"),
    arg("--store", choices=("sqlite", "postgres"), default="sqlite",
        help="a fresh SQLite store (default), or a fresh database on the server APZ_DATABASE_URL names"),
    arg("--until-failure", action="store_true", help="run --seed, then the next seed ..., until one fails"),
    arg("--only", metavar="STEPS", help="run only these steps of the seed's plan (a failure report's shrunk history)"),
))
