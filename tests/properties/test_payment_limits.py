"""The payment limits across transfers, payments and bonuses together, on SQLite and PostgreSQL.

Random payments through the payment tool's command (``commands.hiring.transfer``) under an owner's
``payments.approve_over`` that changes as it goes (0 included), held payments approved or denied, hires
whose work passes (the hiring agent's bonus) and hours passing on the injected clock. A model decides
each step first: what moves, what is held, what is refused and with which code. Then, from the read
models: no wallet is ever below zero; no agent sent more than 1,000 credits on any UTC day in transfers
and bonuses together; every payment above the threshold of its time was held, none at or below it;
and the wallets are exactly the model's.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import agents as ac  # noqa: E402
from agentplaza.commands import approvals, society  # noqa: E402
from agentplaza.commands import hiring as hc  # noqa: E402
from agentplaza.commands import tasks as tc  # noqa: E402
from agentplaza.commands import treasury as trc  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.domain.base import Refusal  # noqa: E402
from agentplaza.projections import treasury as trm  # noqa: E402

START = 1_500
#: A hired task's metered cost: its worker's margin is 20% of it, and the chain may pay its agents the rest.
HIRE_COST = 1_000
MARGIN = HIRE_COST * t.WORKER_MARGIN_PERCENT // 100
sends = st.one_of(st.integers(min_value=0, max_value=400), st.sampled_from([499, 500, 501, 999, 1000, 1001]))
steps = st.lists(st.one_of(
    st.tuples(st.just("pay"), st.integers(0, 2), st.integers(0, 2), sends),
    st.tuples(st.just("approve"), st.integers(0, 9)),
    st.tuples(st.just("deny"), st.integers(0, 9)),
    st.tuples(st.just("setting"), st.sampled_from([0, 100, 500, 1000])),
    st.tuples(st.just("hire"), st.integers(0, 2), st.integers(0, 2), st.sampled_from([0, 50, 300, 800, 900])),
    st.tuples(st.just("hours"), st.sampled_from([1, 7, 20])),
), min_size=1, max_size=18)


class Run:
    def __init__(self, url):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-pay."))
        self.clock = Clock()
        self.p = Plaza(self.dir, url, self.clock)
        self.cmds = self.p.cmds
        owner = self.cmds.context("owner")
        self.agents = ac.spawn(self.cmds, owner, "builder", 3).value
        self.reviewer = ac.spawn(self.cmds, owner, "reviewer", 1).value[0]
        for i, a in enumerate(self.agents):
            for b in self.agents[i + 1:]:
                self.cmds.run(lambda u, a=a, b=b: society.interacted_in(u, self.ctx(a), a, b, f"m{a}{b}"))
        self.bal = {a: 0 for a in self.agents}
        self.sent: dict[tuple[int, dt.date], int] = defaultdict(int)
        self.over = t.DEFAULT_APPROVE_OVER
        self.held: list[dict] = []  # pending: {"id", "number", "payer", "payee", "amount"}
        for a in self.agents:
            self.earn(a, START)

    def ctx(self, cid):
        return self.cmds.context(f"agent:{cid}")

    def day(self) -> dt.date:
        return self.clock.at.astimezone(dt.UTC).date()

    def earn(self, cid, amount):
        cost = amount * 100 // t.WORKER_MARGIN_PERCENT
        task = f"e{cid}x{self.p.store.max_position()}"
        trc.fund_task_escrow(self.cmds, self.cmds.context("owner"), task, cost + amount)
        trc.charge_gateway(self.cmds, self.ctx(cid), str(cid), task, reported_cost=cost)
        trc.settle_task(self.cmds, self.cmds.context("owner"), task, True, worker=str(cid))
        self.bal[cid] += amount

    def expect(self, code, fn, *args, **kw):
        """Run ``fn``; the model said ``code`` (None: it succeeds). A refusal writes nothing."""
        before = self.p.store.max_position()
        if code is None:
            return fn(*args, **kw)
        with pytest.raises(Refusal) as r:
            fn(*args, **kw)
        assert r.value.code == code, r.value.message
        assert self.p.store.max_position() == before

    def send_code(self, payer, amount):
        if self.sent[(payer, self.day())] + amount > t.DAILY_SEND_LIMIT:
            return "daily_limit"
        return "insufficient_funds" if self.bal[payer] < amount else None

    def moved(self, payer, payee, amount):
        self.bal[payer] -= amount
        self.bal[payee] += amount
        self.sent[(payer, self.day())] += amount

    # -- the steps ---------------------------------------------------------------------------------
    def pay(self, i, j, amount):
        payer, payee = self.agents[i], self.agents[j]
        if amount < 1:
            code = "invalid_amount"
        elif payer == payee:
            code = "same_wallet"
        else:
            code = self.send_code(payer, amount) if amount <= self.over else None
        out = self.expect(code, hc.transfer, self.cmds, self.ctx(payer), payer, payee, amount, "memo")
        if out is None:
            return
        if amount <= self.over:
            assert out.value["status"] == "moved"
            self.moved(payer, payee, amount)
        else:
            assert out.value["status"] == "held"
            found = approvals.by_ref(self.cmds, approvals.payment_ref(out.value["payment"]["id"]))
            self.held.append({"number": found.number, "payer": payer, "payee": payee, "amount": amount,
                              "id": out.value["payment"]["id"]})

    def decide(self, k, approve):
        if not self.held:
            return
        h = self.held[k % len(self.held)]
        code = self.send_code(h["payer"], h["amount"]) if approve else None
        self.expect(code, approvals.decide, self.cmds, self.cmds.context("owner"), h["number"], approve)
        if code is None:
            self.held.remove(h)
            if approve:
                self.moved(h["payer"], h["payee"], h["amount"])

    def setting(self, value):
        code = "no_change" if value == self.over else None
        self.expect(code, hc.set_approve_over, self.cmds, self.cmds.context("owner"), value)
        self.over = value

    def hire(self, i, j, bonus):
        hirer, contact = self.agents[i], self.agents[j]
        code = "hire_self" if hirer == contact else ("insufficient_funds" if bonus > self.bal[hirer] else None)
        out = self.expect(code, hc.hire, self.cmds, self.ctx(hirer), hirer, contact, "work", "done", bonus=bonus)
        if out is None:
            return
        number, ctx_c, rev = out.value["id"], self.ctx(contact), self.reviewer
        tc.report_done(self.cmds, ctx_c, number, str(contact), "did it", ["a"], "ran it")
        trc.charge_gateway(self.cmds, ctx_c, str(contact), number, reported_cost=HIRE_COST)
        tc.take_review(self.cmds, self.ctx(rev), number, str(rev), "reviewer")
        tc.review(self.cmds, self.ctx(rev), number, str(rev), True, "good")
        self.bal[contact] += MARGIN
        if bonus and self.send_code(hirer, bonus) is None and bonus <= HIRE_COST - MARGIN:
            self.moved(hirer, contact, bonus)

    def check(self):
        for a in self.agents:
            assert trc.wallet(self.cmds, str(a)).balance == self.bal[a] >= 0, a
        self.p.rm.catch_up()
        p = trm.postings.c
        out: dict[tuple[str, str], int] = defaultdict(int)
        for r in self.p.rm.rows(trm.postings, p.kind.in_(t.SEND_KINDS), p.amount < 0):
            out[(r["account"], r["at"][:10])] -= r["amount"]
        assert all(v <= t.DAILY_SEND_LIMIT for v in out.values()), out
        for r in self.p.rm.rows(trm.payments):
            assert r["amount"] > r["approve_over"]  # only a payment above its threshold is ever held
        for r in self.p.rm.rows(trm.postings, p.account.like("wallet:%")):
            assert r["balance_after"] >= 0

    def close(self):
        self.p.close()
        shutil.rmtree(self.dir, ignore_errors=True)


EXAMPLES = int(os.environ.get("APZ_PROPERTY_EXAMPLES", "8"))


def test_the_threshold_and_the_daily_limit_hold_across_transfers_payments_and_bonuses(backend, request):
    new_database = (lambda: None) if backend == "sqlite" else request.getfixturevalue("postgres").new_database

    @settings(max_examples=EXAMPLES if backend == "sqlite" else max(2, EXAMPLES // 2), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(steps)
    def run(plan):
        r = Run(new_database())
        try:
            for step in plan:
                kind, *args = step
                if kind == "pay":
                    r.pay(*args)
                elif kind in ("approve", "deny"):
                    r.decide(args[0], kind == "approve")
                elif kind == "setting":
                    r.setting(args[0])
                elif kind == "hire":
                    r.hire(*args)
                else:
                    r.clock.advance(hours=args[0])
                r.check()
        finally:
            r.close()

    run()
