"""The task flow against a model of its own (tests/support/model_work.py), on SQLite and on PostgreSQL.

Random creations (by the owner and by agents, with and without a role), assignments, claims,
bids and awards, model calls charged to a task, reports, reviews taken and given, give-ups,
withdrawals, workers going idle, busy and offline, STOP ALL and resume.  For every command the
model decides first: what it allows must succeed, what it forbids must be refused with the
model's code and write nothing (the log's last position does not move).  After every step the
read models show exactly the model's tasks (state, phase, worker, reviewer), workers (status,
what each holds) and money (the budget, every escrow and its state, every wallet, the model
costs), and the aggregates agree.

A hub restart rule closes the store and the read models and opens them again on the same state;
a second writer (another store handle and ``Commands`` on the same database) takes the commands
whenever it is current, and a race rule has both writers try the same claim, so a stale cache's
conflict and the re-run of the decision on fresh state are exercised.

Kept out, so that the model stays exact: the scheduler's pass (its choice among idle workers),
the laws, conduct and approvals (the laws machine covers decisions), payments (the treasury
machine covers them), sub-tasks (chains of work), and a metered cost given with a verdict.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.model_books import Books  # noqa: E402
from support.model_check import check  # noqa: E402
from support.model_work import Work  # noqa: E402
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import plaza as plaza_commands  # noqa: E402
from agentplaza.commands import tasks as tk  # noqa: E402
from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.commands.unit import Commands  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.domain.plaza import PLAZA_ID  # noqa: E402
from agentplaza.events.store import EventStore  # noqa: E402
from agentplaza.sim.invariants import task_edge_problem  # noqa: E402

BUILDERS = ["1", "2", "3"]
REVIEWERS = ["4", "5"]
AGENTS = BUILDERS + REVIEWERS
ROLE = {c: "builder" if c in BUILDERS else "reviewer" for c in AGENTS}
agents = st.sampled_from(AGENTS)
builders = st.sampled_from(BUILDERS)
#: A task number: mostly one that exists (see ``WorkMachine.number``), sometimes one that does not.
numbers = st.integers(min_value=-1, max_value=30)


class WorkMachine(RuleBasedStateMachine):
    def __init__(self, new_database: Callable[[], str | None] = lambda: None):
        super().__init__()
        self.new_database = new_database

    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-work."))
        self.url = self.new_database()
        self.clock = Clock()
        self.p = Plaza(self.dir, self.url, self.clock)
        self.other_store = EventStore.open(state_dir=self.dir, database_url=self.url)
        self.writers = [self.p.cmds, Commands(self.other_store, self.clock)]
        self.current = 0
        self.books = Books()
        self.m = Work(self.books, ROLE)
        for cid in AGENTS:
            self.books.open_wallet(cid)
            tc.open_wallet(self.p.cmds, self.ctx(), cid, f"agent {cid}", ROLE[cid])
            tk.worker_available(self.p.cmds, self.ctx(f"agent:{cid}"), cid, ROLE[cid])
        for role in (None, "builder", None):  # work to do from the first step
            self.create(2000, role, False)

    def teardown(self):
        if hasattr(self, "p"):
            self.p.close()
            self.other_store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def cmds(self) -> Commands:
        return self.writers[self.current]

    def ctx(self, actor="owner", reason=None):
        return self.cmds.context(actor, reason)

    def number(self, i: int) -> str:
        """The ``i``-th task the model knows of (round the list), or one that does not exist (-1)."""
        made = sorted(self.m.tasks, key=lambda n: int(n[1:]))
        if i < 0 or not made:
            return f"t{len(made) + 1}"
        return made[i % len(made)]

    def run(self, model_says, fn, *args, **kw):
        return check(model_says, lambda: fn(self.cmds, *args, **kw), self.p.store)

    # -- rules ------------------------------------------------------------------------------

    @rule(budget=st.sampled_from([None, 100, 500, 2000, 60_000]), role=st.sampled_from(["builder", None]),
          by_agent=st.booleans())
    def create(self, budget, role, by_agent):
        made = []
        out = self.run(lambda: made.append(self.m.create(budget, role, by_agent)), tk.create,
                       self.ctx("agent:1" if by_agent else "owner"), "Some work", "It works", budget, role=role)
        if out is not None:
            assert out["id"] == made[0]

    @rule(worker=builders, reviewer=agents, cost=st.integers(min_value=0, max_value=2500), passed=st.booleans())
    def whole_task(self, worker, reviewer, cost, passed):
        """A new task taken the whole way: created, claimed, charged, reported, reviewed (each step as
        the model says: a busy worker or a held plaza stops it where the model says)."""
        self.create(2000, None, False)
        i = len(self.m.tasks) - 1
        self.claim(i, worker)
        self.charge(i, worker, cost)
        self.report(i, worker)
        self.take_review(i, reviewer)
        self.review(i, reviewer, passed)

    @rule(n=numbers, cid=agents)
    def assign(self, n, cid):
        n = self.number(n)
        self.run(lambda: self.m.claim(n, cid, ROLE[cid]), tk.assign, self.ctx(), n, cid)

    @rule(n=numbers, cid=builders)
    def claim(self, n, cid):
        n = self.number(n)
        self.run(lambda: self.m.claim(n, cid, "builder"), tk.claim, self.ctx(f"agent:{cid}"), n, cid, "builder")

    @rule(n=numbers, cid=builders, price=st.sampled_from([0, 1, 100, 500, 501, 2000, 2001]))
    def bid(self, n, cid, price):
        n = self.number(n)
        self.run(lambda: self.m.bid(n, cid, "builder", price), tk.bid, self.ctx(f"agent:{cid}"), n, cid, "builder",
                 price)

    @rule(n=numbers, cid=builders)
    def award(self, n, cid):
        n = self.number(n)
        self.run(lambda: self.m.award(n, cid), tk.award, self.ctx(), n, cid)

    @rule(n=numbers, cid=agents, cost=st.integers(min_value=0, max_value=3000))
    def charge(self, n, cid, cost):
        n = self.number(n)
        self.run(lambda: self.books.charge_gateway(cid, n, cost), tc.charge_gateway, self.ctx(f"agent:{cid}"), cid,
                 n, reported_cost=cost)

    @rule(n=numbers, cid=agents)
    def report(self, n, cid):
        n = self.number(n)
        self.run(lambda: self.m.report(n, cid), tk.report_done, self.ctx(f"agent:{cid}"), n, cid, "did it",
                 ["a.py"], "ran the tests")

    @rule(n=numbers, cid=agents)
    def take_review(self, n, cid):
        n = self.number(n)
        self.run(lambda: self.m.take_review(n, cid), tk.take_review, self.ctx(f"agent:{cid}"), n, cid, ROLE[cid])

    @rule(n=numbers, cid=agents, passed=st.booleans())
    def review(self, n, cid, passed):
        n = self.number(n)
        self.run(lambda: self.m.review(n, cid, passed), tk.review, self.ctx(f"agent:{cid}"), n, cid, passed, "notes")

    @rule(n=numbers, cid=agents)
    def give_up(self, n, cid):
        n = self.number(n)
        self.run(lambda: self.m.give_up(n, cid), tk.give_up, self.ctx(f"agent:{cid}"), n, cid, "stuck")

    @rule(n=numbers, who=st.sampled_from(["owner", "orchestrator", "worker"]))
    def withdraw(self, n, who):
        n = self.number(n)
        if who == "owner":
            self.run(lambda: self.m.withdraw(n, True), tk.withdraw, self.ctx(), n)
        else:
            self.run(lambda: self.m.withdraw(n, who == "orchestrator"), tk.withdraw, self.ctx("agent:9"), n,
                     tier=who)

    @rule(cid=agents, what=st.sampled_from(["available", "busy", "offline"]))
    def availability(self, cid, what):
        if what == "available":
            self.run(lambda: self.m.available(cid), tk.worker_available, self.ctx(f"agent:{cid}"), cid, ROLE[cid])
        elif what == "busy":
            self.run(lambda: self.m.busy(cid), tk.worker_busy, self.ctx(f"agent:{cid}"), cid, "chatting")
        else:
            self.run(lambda: self.m.offline(cid), tk.worker_offline, self.ctx(), cid)

    @rule(toss=st.integers(0, 3))
    def stop_or_resume(self, toss):
        """STOP ALL now and then (a quarter of the tosses), resume otherwise."""
        if toss == 0:
            self.run(self.books.stop_all, plaza_commands.stop_all, self.ctx("owner", "hold"))
        else:
            self.run(self.books.resume, plaza_commands.resume, self.ctx())
        for cmds in self.writers:  # each writer reads the plaza afresh (see the treasury machine)
            with cmds.store.fresh():
                cmds.store.get(PLAZA_ID)

    @rule(hours=st.sampled_from([1, 7, 24 * 8]))
    def time_passes(self, hours):
        self.clock.advance(hours=hours)

    @rule()
    def hub_restarts(self):
        """The store and the read models closed, then opened again on the same state: nothing is written."""
        before = self.p.store.max_position()
        self.p.close()
        self.p = Plaza(self.dir, self.url, self.clock)
        self.writers[0] = self.p.cmds
        assert self.p.store.max_position() == before, "opening the plaza again wrote to the log"

    @rule(which=st.sampled_from([0, 1]))
    def writer(self, which):
        """Commands go through the first or the second store handle from now on."""
        self.current = which

    @rule(n=numbers, first=builders, second=builders)
    def both_writers_claim(self, n, first, second):
        """Two workers claim one task, each through another writer: at most one of them gets it."""
        for cid in (first, second):
            self.current = 1 - self.current
            self.claim(n, cid)

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def the_read_models_show_the_model(self):
        if not hasattr(self, "p"):
            return
        self.p.rm.catch_up()
        live = self.p.rm.live(["work", "treasury"])
        tasks = {r["number"]: (r["state"], r["phase"], r["worker"], r["reviewer"], r["budget"])
                 for r in live["work"]["rm_tasks"]}
        assert tasks == {n: (x.state, x.phase, x.worker, x.reviewer, x.budget) for n, x in self.m.tasks.items()}
        bids = {(r["task"], r["worker"]): r["price"] for r in live["work"]["rm_task_bids"]}
        assert bids == {(n, c): p for n, x in self.m.tasks.items() for c, p in x.bids.items()}
        workers = {r["cid"]: (r["status"], r["task"]) for r in live["work"]["rm_workers"]}
        assert workers == {c: (w.status, w.task) for c, w in self.m.workers.items()}
        shown = {a["account"]: a for a in live["treasury"]["rm_treasury_accounts"]}
        want = self.books.balances()
        assert {k: shown[k]["balance"] if k in shown else 0 for k in want} == want
        for n, e in self.books.escrows.items():
            assert shown[t.escrow_key(n)]["status"] == e.status, n

    @invariant()
    def the_task_states_move_along_the_edges(self):
        if hasattr(self, "p"):
            assert task_edge_problem(self.p.store.read()) is None

    @invariant()
    def the_aggregates_agree(self):
        if not hasattr(self, "p"):
            return
        with self.p.store.fresh():
            for n, x in self.m.tasks.items():
                got = tk.load(self.p.cmds, n)
                assert (got.state, got.phase, got.worker, got.reviewer) == (x.state, x.phase, x.worker, x.reviewer)
                assert tc.escrow(self.p.cmds, n).balance == self.books.escrows[n].balance
            for cid, w in self.m.workers.items():
                got = tk.worker(self.p.cmds, cid)
                assert (got.status, got.task) == (w.status, w.task), cid


#: Examples per backend: a few tens of seconds each here; APZ_PROPERTY_EXAMPLES for a longer run.
EXAMPLES = int(os.environ.get("APZ_PROPERTY_EXAMPLES", "8"))
SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_work_machine(backend, request):
    new_database = (lambda: None) if backend == "sqlite" else request.getfixturevalue("postgres").new_database
    run_state_machine_as_test(lambda: WorkMachine(new_database), settings=SETTINGS)
