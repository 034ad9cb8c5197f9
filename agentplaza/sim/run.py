"""Running a simulation: a seed's plan, step by step, every invariant after every step; a failure
shrunk to a short history and reported with the command that reproduces it.

``simulate`` runs one seed.  ``execute`` runs a given list of the plan's steps (what shrinking
calls, and what ``--only`` gives): the same seed and the same steps give the same event log and
the same chain head, byte for byte.  ``until_failure`` runs seeds one after another.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import random
import shlex
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

from ..domain.base import Refusal
from . import faults as fault_table
from .guests import HubDied
from .invariants import INVARIANTS, Broken, Look
from .workload import ACTIONS, Memory, Step, plan, setup
from .world import World

#: Steps of a run when ``--steps`` is not given.
DEFAULT_STEPS = 200
#: Agents of a run when ``--agents`` is not given (each of ``workload.ROLES`` at least once).
DEFAULT_AGENTS = 9
#: The most runs a shrink makes before it gives the shortest history found so far.
MAX_SHRINK_RUNS = 300


@dataclass
class Failure:
    seed: int
    step: int  # 1-based, in the history that ran
    invariant: str
    message: str
    history: list[str]  # the shrunk history: each step, what it did
    only: list[int]  # the plan's step numbers the shrunk history keeps
    reproduce: str
    shrink_runs: int = 0
    #: the kept steps whose numbers were shrunk too: plan step -> its numbers in the shrunk history
    numbers: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Result:
    seed: int
    steps: int
    events: int
    head: str  # the chain head's link, hex
    log_digest: str  # SHA-256 of every stored event (position, id, version, topic, state)
    refused: int
    crashes: int
    seconds: float
    failure: Failure | None = None
    lines: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("lines")
        return d


@dataclass(frozen=True)
class Options:
    seed: int
    steps: int = DEFAULT_STEPS
    agents: int = DEFAULT_AGENTS
    faults: str = "all"
    store: str = "sqlite"
    admin_url: str | None = None
    check: bool = True
    #: Check only this invariant (a shrink looks for one failure; the step invariants are always checked).
    only_invariant: str | None = None

    def command(self, only: Sequence[int] | None = None, numbers: dict[int, Sequence[int]] | None = None) -> str:
        words = ["agentplaza", "simulate", "--seed", str(self.seed), "--steps", str(self.steps), "--agents",
                 str(self.agents), "--faults", self.faults, "--store", self.store]
        if only is not None:
            words += ["--only", only_text(only, numbers)]
        return shlex.join(words)


def only_text(only: Sequence[int], numbers: dict[int, Sequence[int]] | None = None) -> str:
    """``--only``'s words: the plan's step numbers, each with its own numbers where they were shrunk
    (``27=0.1.0.5``)."""
    numbers = numbers or {}
    return ",".join(f"{n}={'.'.join(map(str, numbers[n]))}" if n in numbers else str(n) for n in only)


def the_plan(o: Options) -> list[Step]:
    return plan(random.Random(f"{o.seed}:plan"), o.steps, fault_table.chosen(o.faults))


def _log_digest(w: World) -> str:
    h = hashlib.sha256()
    after = 0
    while True:
        rows = w.store.read_raw(after, 5_000)
        if not rows:
            return h.hexdigest()
        for pos, oid, version, topic, state in rows:
            h.update(f"{pos}|{oid}|{version}|{topic}|".encode() + bytes(state) + b"\n")
        after = rows[-1][0]


class _Stop(Exception):
    def __init__(self, step: int, invariant: str, message: str):
        self.step, self.invariant, self.message = step, invariant, message


def _same_after_a_crash(w: World, position: int, head: bytes, shown: dict) -> None:
    """The restarted hub lost nothing: the log up to the crash is the same chain, and the read models
    as of the crash's position are what the hub showed before it (the restart may write events of its
    own after that, such as the vault unsealed by its key file)."""
    if w.store.link_at(position) != head if position else False:
        raise Broken("the_same_after_a_crash", f"the chain's link at {position} changed across the restart")
    then = w.rm.replay(position)
    for name in shown:
        if then[name] != shown[name]:
            raise Broken("the_same_after_a_crash", f"the read model {name} as of {position} differs after the restart")


def _died_mid_step(w: World, m: Memory, step: Step, before: int) -> str:
    """The hub died inside ``step``: it starts again from the store, which must hold what was committed
    up to the death and show it as the dead hub did (``the_same_after_a_crash``).  An approval the step
    used before the hub died is used and its call never ran: the people remember that."""
    for g in list(w.guests.values()):  # stop the sessions first: the dead process runs nothing more
        g.abandon()
    w.dying = False  # (reading is not writing: the snapshot of what the dead hub showed)
    (position, head), shown = w.store.chain_head(), w.read()
    m.unrun_uses += sum(1 for e in w.store.read(after=before) if e.kind == "Approval.Used")
    w.dying = True
    w.crash()
    _same_after_a_crash(w, position, head, shown)
    return f"the hub died inside {step.name}, after {position - before} events of it; it started again"


def _one_step(w: World, m: Memory, step: Step) -> str:
    """Run one step; what it did.  Raises ``Broken`` for the invariants checked around a step."""
    before = w.store.max_position()
    if step.name.startswith("fault:"):
        name = step.name.split(":", 1)[1]
        if name == "crash":
            (position, head), shown = w.store.chain_head(), w.read()
            text = fault_table.FAULTS[name][0](w, m, step.args)
            _same_after_a_crash(w, position, head, shown)
            return text
        act = fault_table.FAULTS[name][0]
    else:
        act = ACTIONS[step.name][0]
    try:
        text = act(w, m, step.args)
        if not w.dying:
            return text
        raise HubDied  # the process died in a thread of its own (a guest's session)
    except HubDied:  # inside the step, after some of its commits: the rest never happens
        return _died_mid_step(w, m, step, before)
    except Refusal as r:
        if w.store.max_position() != before:
            raise Broken("a_refusal_changes_nothing", f"{step.name} was refused ({r.code}) and the log moved from "
                                                      f"{before} to {w.store.max_position()}") from None
        return f"refused: {r.code}"
    except fault_table.WriteFailed:
        if w.store.max_position() != before:
            raise Broken("a_refusal_changes_nothing", "a failed write left events in the log") from None
        return "the write failed; nothing was stored"


class _Lines(logging.Handler):
    """Every line the plaza's code logs during a run, kept for ``no_secret_value_anywhere``."""

    def __init__(self, into: list[str]):
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(self.format(record))


@contextlib.contextmanager
def _logged(into: list[str]) -> Iterator[None]:
    logger = logging.getLogger("agentplaza")
    handler, level = _Lines(into), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def execute(o: Options, steps: Sequence[Step], *, keep_lines: bool = True) -> Result:
    """Run ``steps`` on a fresh plaza of ``o``; the first invariant broken stops the run."""
    started = time.perf_counter()
    failure: tuple[int, str, str] | None = None
    lines: list[str] = []
    checks = [INVARIANTS[o.only_invariant]] if o.only_invariant in INVARIANTS else list(INVARIANTS.values())
    with contextlib.ExitStack() as stack:
        w = World(o.seed, o.store, o.admin_url)
        try:
            m = setup(w, o.agents)
            stack.enter_context(_logged(m.logs))
            refused = 0
            for i, step in enumerate(steps, 1):
                try:
                    text = _one_step(w, m, step)
                    w.rm.catch_up()  # the hub's read models follow the log after every step, checked or not
                    if o.check:
                        look = Look(w, m)
                        for f in checks:
                            f(look)
                except Broken as b:
                    failure = (i, b.invariant, b.message)
                    text = f"BROKEN {b.invariant}"
                except Exception as e:  # noqa: BLE001 - any other error in a command is a failure too
                    failure = (i, "a_command_raised", "".join(traceback.format_exception_only(e)).strip())
                    text = f"RAISED {type(e).__name__}"
                refused += text.startswith("refused")
                if keep_lines:
                    lines.append(f"{i:>4}  {step}  ->  {text}")
                if failure:
                    break
            head = w.store.chain_head()[1].hex()
            result = Result(o.seed, len(lines) if keep_lines else len(steps), w.store.max_position(), head,
                            _log_digest(w), refused, w.crashes, time.perf_counter() - started, lines=lines)
        finally:
            w.close()
    if failure is not None:
        result.failure = Failure(o.seed, failure[0], failure[1], failure[2], [], [], "")
    return result


def shrink(o: Options, steps: list[tuple[int, Step]], invariant: str) -> tuple[list[tuple[int, Step]], int]:
    """The shortest history found that still breaks ``invariant`` (chunks, then single steps, left
    out while it still fails, as delta debugging does), then each kept step's numbers made as small
    as still fails (0, 1, 2, 3 or half, as hypothesis shrinks an integer); and how many runs it took."""
    runs = 0
    o = dataclasses.replace(o, only_invariant=invariant)

    def fails(cand: list[tuple[int, Step]]) -> bool:
        nonlocal runs
        runs += 1
        r = execute(o, [s for _, s in cand], keep_lines=False)
        return r.failure is not None and r.failure.invariant == invariant

    chunk = max(len(steps) // 2, 1)
    while chunk >= 1 and runs < MAX_SHRINK_RUNS:
        i, changed = 0, False
        while i < len(steps) and runs < MAX_SHRINK_RUNS:
            cand = steps[:i] + steps[i + chunk:]
            if cand and fails(cand):
                steps, changed = cand, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    for k in range(len(steps)):  # the numbers of each step that is left
        for i in range(4):
            n, step = steps[k]
            v = step.args[i]
            for smaller in sorted({0, 1, 2, 3, v // 2} - {v}):
                if smaller >= v or runs >= MAX_SHRINK_RUNS:
                    break
                args = step.args[:i] + (smaller,) + step.args[i + 1:]
                cand = steps[:k] + [(n, Step(step.name, args))] + steps[k + 1:]  # type: ignore[arg-type]
                if fails(cand):
                    steps = cand
                    break
    return steps, runs


def simulate(o: Options, only: Sequence[int] | None = None, *, shrinking: bool = True,
             numbers: dict[int, Sequence[int]] | None = None) -> Result:
    """Run the seed's plan (or only the plan's steps numbered in ``only``, with the numbers given in
    ``numbers`` in place of the plan's); shrink a failure."""
    full = list(enumerate(the_plan(o), 1))
    numbers = numbers or {}
    chosen = [(n, Step(s.name, tuple(numbers[n])) if n in numbers else s)  # type: ignore[arg-type]
              for n, s in full if only is None or n in set(only)]
    result = execute(o, [s for _, s in chosen])
    f = result.failure
    if f is None:
        return result
    failing = chosen[:f.step]
    kept, runs = shrink(o, failing, f.invariant) if shrinking else (failing, 0)
    again = execute(o, [s for _, s in kept])
    if again.failure is None or again.failure.invariant != f.invariant:  # cannot happen: the runs are deterministic
        kept, again = failing, execute(o, [s for _, s in failing])
    f.only = [n for n, _ in kept]
    plan = dict(full)
    f.numbers = {n: list(s.args) for n, s in kept if s.args != plan[n].args}
    f.history = [f"{n:>4}{line[4:]}" for n, line in zip(f.only, again.lines, strict=True)]  # the plan's numbers
    f.step = failing[-1][0]  # the plan's own step number (what --only names)
    f.message = again.failure.message if again.failure else f.message
    f.reproduce = o.command()
    f.shrink_runs = runs
    return result


def until_failure(o: Options, on_pass: Callable[[Result], None] = lambda r: None) -> Iterator[Result]:
    """Seeds ``o.seed``, ``o.seed + 1`` ... until one fails; yields each result."""
    seed = o.seed
    while True:
        r = simulate(Options(seed, o.steps, o.agents, o.faults, o.store, o.admin_url, o.check))
        yield r
        if r.failure is not None:
            return
        on_pass(r)
        seed += 1


def report(r: Result) -> str:
    """What a person reads: the run, or its failure with the shrunk history and the commands."""
    if r.failure is None:
        return (f"seed {r.seed}: {r.steps} steps, {r.events} events, {r.refused} refused, {r.crashes} crashes; "
                f"every invariant held\nchain head {r.head}\nlog sha256 {r.log_digest}")
    f = r.failure
    only = only_text(f.only, f.numbers)
    lines = [f"seed {f.seed} FAILED at step {f.step}: {f.invariant}", f"  {f.message}", "",
             f"shrunk history ({len(f.only)} of {f.step} steps, {f.shrink_runs} runs to shrink it):",
             *f.history, "", "reproduce:", f"  {f.reproduce}", "only the shrunk history:",
             f"  {f.reproduce} --only {only}"]
    return "\n".join(lines)


def as_json(r: Result) -> str:
    return json.dumps(r.as_dict(), indent=2)
