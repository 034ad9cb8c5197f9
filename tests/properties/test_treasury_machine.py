"""Random mints, task fundings, charges, settlements, payments, approvals, fines and transfers,
with days passing on the injected clock.  After every step: every entry sums to zero, all
balances together equal everything ever minted, no wallet, escrow or budget is negative,
the daily send limit and the seven-day fine cap hold, and the read models equal a fold from zero."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import payments  # noqa: E402
from agentplaza.commands import plaza as plaza_commands  # noqa: E402
from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.commands.unit import Done  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.domain.base import Refusal  # noqa: E402

CIDS = ["3", "4", "5", "6"]
TASKS = ["t0", "t1", "t2", "t3", "t4", "t5"]
cids = st.sampled_from(CIDS)
tasks = st.sampled_from(TASKS)
#: What agents send: mostly small sums, so wallets that earn little still pay.
sends = st.one_of(st.integers(min_value=-1, max_value=300), st.sampled_from([500, 501, 999, 1000, 1001]))
amounts = st.one_of(st.integers(min_value=-5, max_value=1500), st.sampled_from([1, 300, 500, 501, 1000, 1001]))


class TreasuryMachine(RuleBasedStateMachine):
    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-treasury."))
        self.p = Plaza(self.dir, None, Clock())
        self.minted = t.GENESIS_CREDITS
        self.pending: list[str] = []
        self.held = False
        for cid in CIDS[:3]:  # the fourth agent has no wallet until a rule opens it
            tc.open_wallet(self.p.cmds, self.ctx(), cid, f"agent {cid}", "builder")
            self.p.earn(cid, 1500, task=f"start-{cid}")  # so payments and the limits come into play early

    def teardown(self):
        if hasattr(self, "p"):
            self.p.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def attempt(self, fn, *args, **kw):
        """Run a command; a refusal must change nothing."""
        before = self.p.store.max_position()
        try:
            out = fn(self.p.cmds, *args, **kw)
            return out.value if isinstance(out, Done) else out  # commands.payments gives Done
        except Refusal:
            assert self.p.store.max_position() == before, "a refusal changed something"
            return None

    def ctx(self, actor="owner", reason=None):
        return self.p.ctx(actor, reason)

    # -- rules ----------------------------------------------------------------------

    @rule(amount=amounts)
    def mint(self, amount):
        if self.attempt(tc.mint, self.ctx(), amount) is not None:
            self.minted += amount

    @rule(cid=cids)
    def open_wallet(self, cid):
        self.attempt(tc.open_wallet, self.ctx(), cid, f"agent {cid}", "builder")

    @rule(task=tasks, amount=st.one_of(st.none(), amounts), parent=st.one_of(st.none(), tasks), tools=st.booleans())
    def fund_task(self, task, amount, parent, tools):
        if parent == task or (parent is not None and tc.escrow(self.p.cmds, parent) is None):
            parent = None
        self.attempt(tc.fund_task_escrow, self.ctx(), task, amount, parent=parent, through_tools=tools)

    @rule(worker=cids, cost=st.integers(1, 20_000), passed=st.booleans())
    def work(self, worker, cost, passed):
        """A whole new task: funded, charged, settled (how wallets earn)."""
        self.works = getattr(self, "works", 0) + 1
        task = f"w{self.works}"
        self.attempt(tc.fund_task_escrow, self.ctx(), task, cost + cost // 4)
        self.attempt(tc.charge_gateway, self.ctx(f"agent:{worker}"), worker, task, reported_cost=cost)
        if passed:
            self.attempt(tc.settle_task, self.ctx(), task, True, worker=worker)
        else:
            self.attempt(tc.refund_task, self.ctx(), task, "withdrawn")

    @rule(cid=cids, task=st.one_of(st.none(), tasks), tokens=st.integers(0, 200_000),
          price=st.one_of(st.none(), st.tuples(st.integers(0, 20_000), st.integers(0, 20_000))))
    def own_loop_call(self, cid, task, tokens, price):
        self.attempt(tc.charge_own_loop, self.ctx(f"agent:{cid}"), cid, task, tokens, tokens // 3, price)

    @rule(cid=cids, task=st.one_of(st.none(), tasks), cost=st.integers(0, 900))
    def gateway_call(self, cid, task, cost):
        self.attempt(tc.charge_gateway, self.ctx(f"agent:{cid}"), cid, task, reported_cost=cost)

    @rule(task=tasks, passed=st.booleans(), worker=cids, metered=st.one_of(st.none(), st.integers(0, 5000)))
    def settle(self, task, passed, worker, metered):
        if passed:
            self.attempt(tc.settle_task, self.ctx(), task, True, worker=worker, metered_cost=metered)
        else:
            self.attempt(tc.refund_task, self.ctx(), task, "failed")

    @rule(payer=cids, payee=cids, amount=sends, task=st.one_of(st.none(), tasks),
          over=st.sampled_from([t.DEFAULT_APPROVE_OVER, 0, 100]))
    def pay(self, payer, payee, amount, task, over):  # noqa: PLR0913
        out = self.attempt(payments.pay, self.ctx(f"agent:{payer}"), payer, payee, amount, "pay", task, over)
        if out is not None and out.payment is not None:
            self.pending.append(out.payment["id"])

    @rule(payee=cids, amount=sends, how=st.sampled_from(["pay", "transfer", "bonus"]), task=st.one_of(st.none(), tasks))
    def send_from_the_richest(self, payee, amount, how, task):
        """Payments from whichever wallet holds most, so the limits are reached often."""
        held = {c: (tc.wallet(self.p.cmds, c).balance if tc.wallet(self.p.cmds, c) else -1) for c in CIDS}
        payer = max(held, key=held.get)
        if how == "pay":
            out = self.attempt(payments.pay, self.ctx(f"agent:{payer}"), payer, payee, amount, "pay", task)
            if out is not None and out.payment is not None:
                self.pending.append(out.payment["id"])
        elif how == "bonus" and task is not None:
            self.attempt(tc.bonus, self.ctx(f"agent:{payer}"), payer, payee, amount, task)
        else:
            self.attempt(tc.transfer, self.ctx(f"agent:{payer}"), payer, payee, amount, "transfer", None)

    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data, approve):
        if not self.pending:
            return
        pid = data.draw(st.sampled_from(self.pending))
        fn = payments.approve_payment if approve else payments.deny_payment
        if self.attempt(fn, self.ctx(), pid) is not None:
            self.pending.remove(pid)

    @rule(payer=cids, payee=cids, amount=sends, task=st.one_of(st.none(), tasks), bonus=st.booleans())
    def transfer(self, payer, payee, amount, task, bonus):
        if bonus and task is not None:
            self.attempt(tc.bonus, self.ctx(f"agent:{payer}"), payer, payee, amount, task)
        else:
            self.attempt(tc.transfer, self.ctx(f"agent:{payer}"), payer, payee, amount, "transfer", task)

    @rule(cid=cids, amount=amounts, sanction=st.booleans())
    def fine(self, cid, amount, sanction):
        if sanction:
            self.attempt(tc.sanction_fine, self.ctx("hub"), cid, amount, "law")
        else:
            self.attempt(tc.manual_fine, self.ctx(), cid, amount, "memo")

    @rule(hours=st.integers(1, 60))
    def time_passes(self, hours):
        self.p.clock.advance(hours=hours)

    @rule(toss=st.integers(0, 3))
    def stop_or_resume(self, toss):
        if toss and not self.held:
            return
        if self.held:
            plaza_commands.resume(self.p.cmds, self.ctx())
        else:
            plaza_commands.stop_all(self.p.cmds, self.ctx("owner", "a look at the books"))
        self.held = not self.held

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def books_balance(self):
        if not hasattr(self, "p"):
            return
        rows = self.p.read()
        entries = rows["rm_treasury_journal"]
        for e in entries:
            assert sum(e["postings"].values()) == 0
            assert all(type(v) is int for v in e["postings"].values())
        balances = {a["account"]: a["balance"] for a in rows["rm_treasury_accounts"]}
        assert sum(balances.values()) == 0
        assert sum(v for k, v in balances.items() if k != t.MINT_SOURCE) == self.minted
        for key, value in balances.items():
            if t.kind_of(key) in ("wallet", "escrow", "budget"):
                assert value >= 0, (key, value)
                agg = self.p.store.get(t.account_id(key))
                assert agg.balance == value, key  # the aggregate and the read model agree
            elif key != t.MINT_SOURCE:
                assert value >= 0

    @invariant()
    def caps_hold(self):
        if not hasattr(self, "p"):
            return
        sent: dict[tuple, int] = defaultdict(int)
        fines: dict[str, list] = defaultdict(list)
        for rec in self.p.store.read():
            if rec.kind == "Entry.Posted" and rec.data["kind"] in t.SEND_KINDS:
                for account, amount in rec.data["postings"].items():
                    if amount < 0:
                        sent[(account, rec.at[:10])] -= amount
            elif rec.kind == "Wallet.Fined":
                fines[rec.originator_id].append((dt.datetime.fromisoformat(rec.at), rec.data["amount"]))
                assert rec.data["amount"] <= t.MAX_SANCTION_FINE
        assert all(v <= t.DAILY_SEND_LIMIT for v in sent.values()), sent
        for levied in fines.values():
            for at, _ in levied:
                window = sum(a for when, a in levied if at - t.FINE_WINDOW < when <= at)
                assert window <= t.WEEKLY_FINE_CAP

    @invariant()
    def read_models_equal_a_fold_from_zero(self):
        if not hasattr(self, "p"):
            return
        live = self.p.read()
        assert self.p.rm.replay(self.p.store.max_position(), ["treasury"])["treasury"] == live


TreasuryMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_treasury_machine = TreasuryMachine.TestCase
