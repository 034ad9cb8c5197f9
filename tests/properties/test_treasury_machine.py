"""The treasury against a model of its own (tests/support/model_books.py), on SQLite and on PostgreSQL.

Random mints, wallets, task fundings, model calls on both routes, settlements and refunds,
payments (held and decided), transfers, bonuses, sanction and manual fines, STOP ALL and resume,
with days passing on the injected clock.  For every command the model decides first: a command
it allows must succeed and leave every balance exactly where the model put it; a command it
forbids must be refused with the model's code and write nothing (the log's last position does
not move).  After every step the read models show exactly the model's balances, escrow states
and payment states, the aggregates agree, and the read models equal a fold from zero.

Two more rules: a hub restart (the store and the read models closed and opened again on the
same state folder or database; the model carries on), and a second writer (another store handle
and ``Commands`` on the same database; commands go through whichever writer is current, and a
race rule has both writers make the same decision one after the other, so a stale cache's
conflict and the re-run of the decision on fresh state are exercised).

Kept out, so that the model stays exact: chains of work (``parent``): every escrow is its own
root, so its margin cap is its own metered cost.
"""

from __future__ import annotations

import datetime as dt
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
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import payments  # noqa: E402
from agentplaza.commands import plaza as plaza_commands  # noqa: E402
from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.commands.unit import Commands  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.domain.plaza import PLAZA_ID  # noqa: E402
from agentplaza.events.store import EventStore  # noqa: E402
from agentplaza.sim.invariants import journal_problem  # noqa: E402

CIDS = ["3", "4", "5", "6"]
TASKS = ["t0", "t1", "t2", "t3", "t4", "t5"]
cids = st.sampled_from(CIDS)
tasks = st.sampled_from(TASKS)
maybe_task = st.one_of(st.none(), tasks)
#: What agents send: mostly small sums, so wallets that earn little still pay; the limits' edges.
sends = st.one_of(st.integers(min_value=-1, max_value=300), st.sampled_from([500, 501, 999, 1000, 1001]))
amounts = st.one_of(st.integers(min_value=-5, max_value=1500), st.sampled_from([1, 199, 200, 300, 500, 501, 1000, 1001]))
START_EARNINGS = 1500


class TreasuryMachine(RuleBasedStateMachine):
    def __init__(self, new_database: Callable[[], str | None] = lambda: None):
        super().__init__()
        self.new_database = new_database

    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-treasury."))
        self.url = self.new_database()
        self.clock = Clock()
        self.p = Plaza(self.dir, self.url, self.clock)
        self.other_store = EventStore.open(state_dir=self.dir, database_url=self.url)
        self.writers = [self.p.cmds, Commands(self.other_store, self.clock)]
        self.current = 0
        self.m = Books()
        self.works = 0
        for cid in CIDS[:3]:  # the fourth agent has no wallet until a rule opens it
            self.open_wallet(cid)
            self.earn(cid, START_EARNINGS)

    def teardown(self):
        if hasattr(self, "p"):
            try:
                self.read_models_equal_a_fold_from_zero()
            finally:
                self.p.close()
            self.other_store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def cmds(self) -> Commands:
        return self.writers[self.current]

    def ctx(self, actor="owner", reason=None):
        return self.cmds.context(actor, reason)

    def day(self) -> dt.date:
        return self.clock.at.astimezone(dt.UTC).date()

    def run(self, model_says, fn, *args, **kw):
        return check(model_says, lambda: fn(self.cmds, *args, **kw), self.p.store)

    def earn(self, cid: str, amount: int) -> None:
        """A wallet earns the only way there is: a whole task, funded, charged and passed."""
        self.works += 1
        task = f"w{self.works}"
        cost = amount * 100 // t.WORKER_MARGIN_PERCENT
        self.run(lambda: self.m.fund(task, cost + amount), tc.fund_task_escrow, self.ctx(), task, cost + amount)
        self.run(lambda: self.m.charge_gateway(cid, task, cost), tc.charge_gateway, self.ctx(f"agent:{cid}"), cid,
                 task, reported_cost=cost)
        self.run(lambda: self.m.settle(task, cid), tc.settle_task, self.ctx(), task, True, worker=cid)

    # -- rules ----------------------------------------------------------------------

    @rule(amount=amounts)
    def mint(self, amount):
        self.run(lambda: self.m.mint(amount), tc.mint, self.ctx(), amount)

    @rule(cid=cids)
    def open_wallet(self, cid):
        self.run(lambda: self.m.open_wallet(cid), tc.open_wallet, self.ctx(), cid, f"agent {cid}", "builder")

    @rule(task=tasks, amount=st.one_of(st.none(), amounts), tools=st.booleans())
    def fund_task(self, task, amount, tools):
        self.run(lambda: self.m.fund(task, amount, tools), tc.fund_task_escrow, self.ctx(), task, amount,
                 through_tools=tools)

    @rule(worker=cids, cost=st.integers(1, 20_000), passed=st.booleans())
    def work(self, worker, cost, passed):
        """A whole new task: funded, charged, settled (how wallets earn)."""
        self.works += 1
        task = f"w{self.works}"
        self.run(lambda: self.m.fund(task, cost + cost // 4), tc.fund_task_escrow, self.ctx(), task, cost + cost // 4)
        self.gateway_call(worker, task, cost)
        if passed:
            self.settle(task, True, worker, None)
        else:
            self.settle(task, False, worker, None)

    @rule(cid=cids, task=maybe_task, tokens=st.integers(0, 200_000),
          price=st.one_of(st.none(), st.tuples(st.integers(0, 20_000), st.integers(0, 20_000))))
    def own_loop_call(self, cid, task, tokens, price):
        self.run(lambda: self.m.charge_own_loop(task, tokens, tokens // 3, price), tc.charge_own_loop,
                 self.ctx(f"agent:{cid}"), cid, task, tokens, tokens // 3, price)

    @rule(cid=cids, task=maybe_task, cost=st.integers(0, 900))
    def gateway_call(self, cid, task, cost):
        shortfall = []
        out = self.run(lambda: shortfall.append(self.m.charge_gateway(cid, task, cost)), tc.charge_gateway,
                       self.ctx(f"agent:{cid}"), cid, task, reported_cost=cost)
        if out is not None:
            assert out.detail["shortfall"] == shortfall[0]

    @rule(task=st.one_of(tasks, st.just("w1")), passed=st.booleans(), worker=cids,
          metered=st.one_of(st.none(), st.integers(0, 5000)))
    def settle(self, task, passed, worker, metered):
        if passed:
            self.run(lambda: self.m.settle(task, worker, metered), tc.settle_task, self.ctx(), task, True,
                     worker=worker, metered_cost=metered)
        else:
            self.run(lambda: self.m.refund(task, "failed"), tc.refund_task, self.ctx(), task, "failed")

    @rule(payer=cids, payee=cids, amount=sends, task=maybe_task,
          over=st.sampled_from([t.DEFAULT_APPROVE_OVER, 0, 100]))
    def pay(self, payer, payee, amount, task, over):  # noqa: PLR0913
        waits = []
        out = self.run(lambda: waits.append(self.m.pay(payer, payee, amount, task, over, self.day())),
                       payments.pay, self.ctx(f"agent:{payer}"), payer, payee, amount, "pay", task, over)
        if out is None:
            return
        assert out.detail["status"] == ("held" if waits[0] else "moved")
        if waits[0]:
            assert out.payment["status"] == "pending"
            self.m.held_payment(out.payment["id"], payer, payee, amount, task)

    @rule(payee=cids, amount=sends, how=st.sampled_from(["pay", "transfer", "bonus"]), task=maybe_task)
    def send_from_the_richest(self, payee, amount, how, task):
        """Sends from whichever wallet the model says holds most, so the limits are reached often."""
        payer = max(self.m.wallets, key=self.m.wallets.get)
        if how == "pay":
            self.pay(payer, payee, amount, task, t.DEFAULT_APPROVE_OVER)
        else:
            self.transfer(payer, payee, amount, task, how == "bonus")

    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data, approve):
        if not self.m.payments:
            return
        pid = data.draw(st.sampled_from(sorted(self.m.payments)))
        if approve:
            self.run(lambda: self.m.approve(pid, self.day()), payments.approve_payment, self.ctx(), pid)
        else:
            self.run(lambda: self.m.deny(pid), payments.deny_payment, self.ctx(), pid)

    @rule(payer=cids, payee=cids, amount=sends, task=maybe_task, bonus=st.booleans())
    def transfer(self, payer, payee, amount, task, bonus):
        if bonus and task is not None:
            self.run(lambda: self.m.send(payer, payee, amount, task, self.day()), tc.bonus,
                     self.ctx(f"agent:{payer}"), payer, payee, amount, task)
        else:
            self.run(lambda: self.m.send(payer, payee, amount, task, self.day()), tc.transfer,
                     self.ctx(f"agent:{payer}"), payer, payee, amount, "transfer", task)

    @rule(cid=cids, amount=amounts, sanction=st.booleans())
    def fine(self, cid, amount, sanction):
        if sanction:
            said = []
            out = self.run(lambda: said.append(self.m.sanction_fine(cid, amount, self.clock.at)), tc.sanction_fine,
                           self.ctx("hub"), cid, amount, "law")
            if out is not None:
                assert (out.detail["levied"], out.detail["collected"]) == said[0]
        else:
            self.run(lambda: self.m.manual_fine(cid, amount), tc.manual_fine, self.ctx(), cid, amount, "memo")

    @rule(hours=st.integers(1, 60))
    def time_passes(self, hours):
        self.clock.advance(hours=hours)

    @rule(toss=st.integers(0, 3))
    def stop_or_resume(self, toss):
        """STOP ALL now and then (a quarter of the tosses), resume otherwise."""
        if toss == 0:
            self.run(self.m.stop_all, plaza_commands.stop_all, self.ctx("owner", "a look at the books"))
        else:
            self.run(self.m.resume, plaza_commands.resume, self.ctx())
        self.both_writers_see_the_hold()

    def both_writers_see_the_hold(self):
        """Each writer reads the plaza afresh, as a hub does when it follows the log.  (Without this a
        writer's cached plaza hides another writer's STOP ALL: see ``the_other_writer_holds``.)"""
        for cmds in self.writers:
            with cmds.store.fresh():
                cmds.store.get(PLAZA_ID)

    @rule()
    def the_other_writer_holds(self):
        """STOP ALL through the other writer, then a transfer through this one (which has read the
        plaza before, as a running hub has): it must be refused as held."""
        if self.m.held:
            return
        self.both_writers_see_the_hold()
        payer = max(self.m.wallets, key=self.m.wallets.get)
        payee = next(c for c in self.m.wallets if c != payer)
        here = self.current
        self.current = 1 - here
        self.run(self.m.stop_all, plaza_commands.stop_all, self.ctx("owner", "the other hub holds"))
        self.current = here
        self.transfer(payer, payee, 1, None, False)
        self.both_writers_see_the_hold()

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

    @rule(data=st.data(), approve=st.booleans())
    def both_writers_decide(self, data, approve):
        """The same decision on one held payment, by one writer and then the other (whose cache may
        still show it pending): the first as the model says, the second refused as decided."""
        if not self.m.payments:
            return
        pid = data.draw(st.sampled_from(sorted(self.m.payments)))
        for _ in self.writers:
            self.current = 1 - self.current
            self.decide_one(pid, approve)

    def decide_one(self, pid, approve):
        if approve:
            self.run(lambda: self.m.approve(pid, self.day()), payments.approve_payment, self.ctx(), pid)
        else:
            self.run(lambda: self.m.deny(pid), payments.deny_payment, self.ctx(), pid)

    @rule(payee=cids, amount=st.integers(1, 700))
    def both_writers_spend(self, payee, amount):
        """The richest wallet sends twice, once through each writer: the second decision sees the first."""
        payer = max(self.m.wallets, key=self.m.wallets.get)
        for _ in self.writers:
            self.current = 1 - self.current
            self.transfer(payer, payee, amount, None, False)

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def the_read_models_show_the_model(self):
        if not hasattr(self, "p"):
            return
        rows = self.p.read()
        shown = {a["account"]: a for a in rows["rm_treasury_accounts"]}
        want = self.m.balances()
        got = {k: shown[k]["balance"] if k in shown else 0 for k in want}
        assert got == want
        kept = {k for k in shown if t.kind_of(k) in ("wallet", "escrow")}
        assert kept == {k for k in want if t.kind_of(k) in ("wallet", "escrow")}
        for task, e in self.m.escrows.items():
            assert shown[t.escrow_key(task)]["status"] == e.status, task
        held = {p["id"]: p["status"] for p in rows["rm_treasury_payments"]}
        assert held == {pid: p.status for pid, p in self.m.payments.items()}
        assert journal_problem(rows["rm_treasury_journal"]) is None

    @invariant()
    def the_aggregates_agree(self):
        if not hasattr(self, "p"):
            return
        with self.p.store.fresh():
            for key, value in self.m.balances().items():
                if t.kind_of(key) in ("wallet", "escrow", "budget"):
                    assert self.p.store.get(t.account_id(key)).balance == value, key

    def read_models_equal_a_fold_from_zero(self):
        """At the end of each run (a fold of the whole log is too slow for every step)."""
        live = self.p.read()
        assert self.p.rm.replay(self.p.store.max_position(), ["treasury"])["treasury"] == live


#: Examples per backend: a few tens of seconds each here; APZ_PROPERTY_EXAMPLES for a longer run.
EXAMPLES = int(os.environ.get("APZ_PROPERTY_EXAMPLES", "8"))
SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_treasury_machine(backend, request):
    new_database = (lambda: None) if backend == "sqlite" else request.getfixturevalue("postgres").new_database
    run_state_machine_as_test(lambda: TreasuryMachine(new_database), settings=SETTINGS)
