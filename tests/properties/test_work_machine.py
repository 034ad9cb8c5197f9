"""Random task flows, bids, awards, approvals, violations and STOP ALL, with days passing on the
injected clock.  After every step: an ended task never changes; escrow is conserved through
every path (the budget, the escrows, the wallets, the fines and the model costs together are
everything ever minted; an ended task's escrow is empty and closed); no worker reviews its own
task; an approved call runs at most once and only with its exact input; and while the plaza is
held nothing is claimed and no call is made."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import jhrl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import approvals as ap  # noqa: E402
from agentplaza.commands import conduct as cd  # noqa: E402
from agentplaza.commands import (
    payments,  # noqa: E402
    scheduler,  # noqa: E402
)
from agentplaza.commands import plaza as plaza_commands  # noqa: E402
from agentplaza.commands import tasks as tk  # noqa: E402
from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.commands.unit import Done  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.domain.base import Refusal  # noqa: E402
from agentplaza.domain.tasks import ENDED, Task, task_id  # noqa: E402
from agentplaza.projections.work import queue  # noqa: E402

BUILDERS = ["1", "2", "3"]
REVIEWERS = ["4", "5"]
AGENTS = BUILDERS + REVIEWERS
agents = st.sampled_from(AGENTS)
builders = st.sampled_from(BUILDERS)
reviewers = st.sampled_from(REVIEWERS)
numbers = st.integers(min_value=1, max_value=8).map(lambda n: f"t{n}")
approvals = st.integers(min_value=1, max_value=10).map(lambda n: f"a{n}")
CALLS = [
    jhrl.Call(role="builder", action="engine.edit", risk="write", args={"path": "a.py"}),
    jhrl.Call(role="builder", action="engine.edit", risk="write", args={"path": "b.py"}),
    jhrl.Call(role="builder", action="engine.exec", risk="write", args={"cmd": "make"}),
    jhrl.Call(role="builder", action="engine.fetch", risk="write", args={"port": 22}),  # a violation (S-006c)
    jhrl.Call(role="builder", action="vm.read_file", risk="read", args={"path": "a.py"}),
]
calls = st.sampled_from(range(len(CALLS)))
STARTS_WORK = {"Task.Claimed", "Task.ReviewerAssigned", "Worker.Took", "ToolCall.CallDecided", "Approval.Used"}


class WorkMachine(RuleBasedStateMachine):
    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-work."))
        self.p = Plaza(self.dir, None, Clock())
        self.held_since: int | None = None
        self.ended: dict[str, tuple] = {}
        self.nominal = 0  # credits gone to the treasury (fines) and to model costs
        self.runs: Counter[str] = Counter()  # approval -> times an approved call ran
        for cid in AGENTS:
            tc.open_wallet(self.p.cmds, self.ctx(), cid, f"agent {cid}", "builder" if cid in BUILDERS else "reviewer")
            tk.worker_available(self.p.cmds, self.ctx(f"agent:{cid}"), cid, "builder" if cid in BUILDERS else "reviewer")

    def teardown(self):
        if hasattr(self, "p"):
            self.p.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def ctx(self, actor="owner", reason=None):
        return self.p.ctx(actor, reason)

    def attempt(self, fn, *args, **kw):
        before = self.p.store.max_position()
        try:
            out = fn(self.p.cmds, *args, **kw)
            out = out.value if isinstance(out, Done) else out
        except Refusal:
            assert self.p.store.max_position() == before, "a refusal changed something"
            return None
        self.count(out)
        return out

    def count(self, out) -> None:
        entries = out.entries if isinstance(out, tc.Outcome) else (out.get("entries", []) if isinstance(out, dict) else [])
        for e in entries:
            self.nominal += e["postings"].get(t.TREASURY, 0) + e["postings"].get(t.MODEL_COSTS, 0)

    # -- rules ------------------------------------------------------------------------------

    @rule(budget=st.sampled_from([100, 500, 2000, 60_000]), role=st.sampled_from(["builder", None]),
          by_agent=st.booleans())
    def create(self, budget, role, by_agent):
        self.attempt(tk.create, self.ctx("agent:1" if by_agent else "owner"), "Some work", "It works", budget, role=role)

    @rule()
    def schedule(self):
        self.p.rm.catch_up()
        scheduler.run_pass(self.p.cmds, queue(self.p.rm))

    @rule(n=numbers, cid=agents)
    def assign(self, n, cid):
        self.attempt(tk.assign, self.ctx(), n, cid)

    @rule(n=numbers, cid=builders)
    def claim(self, n, cid):
        self.attempt(tk.claim, self.ctx(f"agent:{cid}"), n, cid, "builder")

    @rule(n=numbers, cid=builders, price=st.integers(min_value=0, max_value=600))
    def bid(self, n, cid, price):
        self.attempt(tk.bid, self.ctx(f"agent:{cid}"), n, cid, "builder", price)

    @rule(n=numbers, cid=builders)
    def award(self, n, cid):
        self.attempt(tk.award, self.ctx(), n, cid)

    @rule(n=numbers, cid=agents, cost=st.integers(min_value=1, max_value=300))
    def charge(self, n, cid, cost):
        self.attempt(tc.charge_gateway, self.ctx(f"agent:{cid}"), cid, n, reported_cost=cost)

    @rule(n=numbers, cid=agents)
    def report(self, n, cid):
        self.attempt(tk.report_done, self.ctx(f"agent:{cid}"), n, cid, "did it", ["a.py"], "ran the tests")

    @rule(n=numbers, cid=agents)
    def take_review(self, n, cid):
        self.attempt(tk.take_review, self.ctx(f"agent:{cid}"), n, cid, "reviewer" if cid in REVIEWERS else "builder")

    @rule(n=numbers, cid=agents, passed=st.booleans())
    def review(self, n, cid, passed):
        self.attempt(tk.review, self.ctx(f"agent:{cid}"), n, cid, passed, "notes")

    @rule(n=numbers, cid=agents)
    def give_up(self, n, cid):
        self.attempt(tk.give_up, self.ctx(f"agent:{cid}"), n, cid, "stuck")

    @rule(n=numbers, orchestrator=st.booleans())
    def withdraw(self, n, orchestrator):
        if orchestrator:
            self.attempt(tk.withdraw, self.ctx("agent:9"), n, tier="orchestrator")
        else:
            self.attempt(tk.withdraw, self.ctx(), n)

    @rule(cid=agents, what=st.sampled_from(["available", "busy", "offline"]))
    def availability(self, cid, what):
        role = "builder" if cid in BUILDERS else "reviewer"
        if what == "available":
            self.attempt(tk.worker_available, self.ctx(f"agent:{cid}"), cid, role)
        elif what == "busy":
            self.attempt(tk.worker_busy, self.ctx(f"agent:{cid}"), cid, "chatting")
        else:
            self.attempt(tk.worker_offline, self.ctx(), cid)

    @rule(cid=builders, mode=st.sampled_from(["autonomous", "ask", "read-only"]))
    def set_mode(self, cid, mode):
        self.attempt(cd.set_mode, self.ctx(), cid, mode)

    @rule(cid=builders, i=calls)
    def call(self, cid, i):
        out = self.attempt(cd.check_call, CALLS[i], cid)
        if out is None:
            return
        if out.sanction:
            self.count(out.sanction)
        if out.approved is not None:
            self.runs[out.approved] += 1
            a = ap.load(self.p.cmds, out.approved)
            assert a.agent == cid and a.detail["digest"] == CALLS[i].digest(), "an approval ran another call"

    @rule(payer=agents, payee=agents, amount=st.sampled_from([10, 600]))
    def pay(self, payer, payee, amount):
        self.attempt(payments.pay, self.ctx(f"agent:{payer}"), payer, payee, amount, "for the help")

    @rule(number=approvals, approve=st.booleans())
    def decide(self, number, approve):
        self.attempt(ap.decide, self.ctx("owner", "decided"), number, approve)

    @rule(cid=agents, sid=st.sampled_from(["s1", "s2", "s3"]))
    def lift(self, cid, sid):
        self.attempt(cd.lift, self.ctx(), cid, sid)

    @rule()
    def stop_all(self):
        if self.attempt(plaza_commands.stop_all, self.ctx("owner", "hold")) is not None:
            self.held_since = self.p.store.max_position()

    @rule()
    def resume(self):
        if self.attempt(plaza_commands.resume, self.ctx()) is not None:
            self.held_since = None

    @rule(hours=st.sampled_from([1, 7, 24 * 8, 24 * 31]))
    def time_passes(self, hours):
        self.p.clock.advance(hours=hours)

    # -- invariants ----------------------------------------------------------------------------

    def tasks(self) -> list[Task]:
        out = []
        for i in range(1, 40):
            x = self.p.store.get(task_id(f"t{i}"))
            if x is None:
                break
            out.append(x)
        return out

    @invariant()
    def ended_tasks_never_change(self):
        if not hasattr(self, "p"):
            return
        for x in self.tasks():
            if x.number in self.ended:
                assert (x.state, x.version) == self.ended[x.number], f"ended task {x.number} changed"
            elif x.state in ENDED:
                self.ended[x.number] = (x.state, x.version)

    @invariant()
    def escrow_is_conserved(self):
        if not hasattr(self, "p"):
            return
        cmds = self.p.cmds
        total = tc.budget(cmds).balance + self.nominal
        total += sum(tc.wallet(cmds, c).balance for c in AGENTS)
        for x in self.tasks():
            e = tc.escrow(cmds, x.number)
            assert e is not None, f"task {x.number} has no escrow"
            total += e.balance
            if x.state in ENDED:
                assert e.balance == 0 and not e.open, f"ended task {x.number} still holds {e.balance}"
            else:
                assert e.open, f"task {x.number} is {x.state} but its escrow closed"
        assert total == t.GENESIS_CREDITS, f"credits: {total} != {t.GENESIS_CREDITS}"

    @invariant()
    def no_worker_reviews_its_own_task(self):
        if not hasattr(self, "p"):
            return
        for x in self.tasks():
            assert x.reviewer is None or x.reviewer != x.worker

    @invariant()
    def an_approved_call_runs_at_most_once(self):
        if hasattr(self, "runs"):
            assert all(n == 1 for n in self.runs.values()), self.runs

    @invariant()
    def nothing_starts_while_held(self):
        if getattr(self, "held_since", None) is None:
            return
        kinds = {r.kind for r in self.p.store.read(self.held_since)}
        assert not (kinds & STARTS_WORK), f"while held: {kinds & STARTS_WORK}"


WorkMachine.TestCase.settings = settings(
    max_examples=int(__import__("os").environ.get("APZ_PROPERTY_EXAMPLES", "30")), stateful_step_count=40,
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestWorkMachine = WorkMachine.TestCase
