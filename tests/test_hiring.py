"""Hiring and paying, on SQLite and PostgreSQL: a hire becomes a task for the contact, funded from the
plaza budget like any task, taken by the contact at once; the bonus moves from the hiring agent's wallet
only when the work passes (and is recorded as not paid when the daily limit or the wallet stops it);
the orchestrator cannot be hired; a payment at or below the owner's ``payments.approve_over`` moves at
once and one above waits in Approvals; 0 makes every payment wait; a refusal changes nothing."""

from __future__ import annotations

import pytest
from support.sessions import session, tool

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import approvals, society
from agentplaza.commands import hiring as hc
from agentplaza.commands import tasks as tc
from agentplaza.commands import treasury as trc
from agentplaza.domain import treasury as t
from agentplaza.domain.base import Refusal
from agentplaza.projections import hiring as hiring_rm


@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def owner(hub):
    return hub.commands.context("owner")


def agent_ctx(hub, cid):
    return hub.commands.context(f"agent:{cid}")


def balance(hub, cid) -> int:
    return trc.wallet(hub.commands, str(cid)).balance


def earn(hub, cid, amount):
    """A wallet fills the only way there is: a passed task pays its worker 20% of the real cost."""
    cost = amount * 100 // t.WORKER_MARGIN_PERCENT
    task = f"earn{cid}x{hub.commands.store.max_position()}"
    trc.fund_task_escrow(hub.commands, owner(hub), task, cost + amount)
    trc.charge_gateway(hub.commands, agent_ctx(hub, cid), str(cid), task, reported_cost=cost)
    trc.settle_task(hub.commands, owner(hub), task, True, worker=str(cid))


def refused(hub, code, fn, *args, **kw):
    before = hub.commands.store.max_position()
    with pytest.raises(Refusal) as r:
        fn(*args, **kw)
    assert r.value.code == code, r.value.message
    assert hub.commands.store.max_position() == before  # a refusal changes nothing
    return r.value


def pass_review(hub, number, worker, reviewer, cost=1_000):
    """The contact reports done, its real cost is metered, a reviewer passes it."""
    tc.report_done(hub.commands, agent_ctx(hub, worker), number, str(worker), "did it", ["a.txt"], "ran it")
    trc.charge_gateway(hub.commands, agent_ctx(hub, worker), str(worker), number, reported_cost=cost)
    tc.take_review(hub.commands, agent_ctx(hub, reviewer), number, str(reviewer), "reviewer")
    return tc.review(hub.commands, agent_ctx(hub, reviewer), number, str(reviewer), True, "good")


def test_a_hire_becomes_a_funded_task_for_the_contact_and_its_bonus_is_paid_when_the_work_passes(hub):
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "tester")
    rev, _ = session(hub, "reviewer")
    earn(hub, ann, 300)
    # not a contact yet: nothing is made
    r = tool(s_ann, "plaza_hire", to=bob, title="Test the parser", acceptance="all tests pass", bonus=100)
    assert r["error"]["code"] == "not_a_contact"
    assert tool(s_ann, "plaza_message", to=bob, text="can you test my parser?")["result"]["sent"]
    budget_before = trc.budget(hub.commands).balance
    r = tool(s_ann, "plaza_hire", to=bob, title="Test the parser", acceptance="all tests pass", bonus=100)["result"]
    number = r["task"]
    task = tc.load(hub.commands, number)
    assert (task.state, task.worker, task.role, task.budget) == ("claimed", str(bob), "tester", t.DEFAULT_TOOL_TASK_BUDGET)
    assert "Hired by agent" in task.details
    assert trc.budget(hub.commands).balance == budget_before - t.DEFAULT_TOOL_TASK_BUDGET  # funded like any task
    assert balance(hub, ann) == 300  # nothing moves before the work passes
    pass_review(hub, number, bob, rev)
    assert balance(hub, ann) == 200
    assert balance(hub, bob) == 100 + 1_000 * t.WORKER_MARGIN_PERCENT // 100  # the bonus and the margin
    hub.read_models.catch_up()
    [row] = hiring_rm.hire_rows(hub.read_models, ann)
    assert (row["task"], row["hirer"], row["contact"], row["bonus"], row["bonus_state"], row["outcome"]) == (
        number, ann, bob, 100, "paid", "done")
    live = hub.read_models.live(["hiring"])["hiring"]
    assert hub.read_models.replay(hub.commands.store.max_position(), ["hiring"])["hiring"] == live


def test_no_bonus_when_the_work_fails_and_an_unpayable_bonus_is_recorded_not_paid(hub):
    ann, _ = session(hub, "builder")
    bob, _ = session(hub, "tester")
    cat, _ = session(hub, "writer")
    rev, _ = session(hub, "reviewer")
    earn(hub, ann, 1_000)
    for other in (bob, cat):
        hub.commands.run(lambda u, o=other: society.interacted_in(u, agent_ctx(hub, ann), ann, o, f"m{o}"))
    failed = hc.hire(hub.commands, agent_ctx(hub, ann), ann, bob, "One", "done", bonus=300).value["id"]
    tc.give_up(hub.commands, agent_ctx(hub, bob), failed, str(bob), "cannot")
    assert balance(hub, ann) == 1_000  # the work did not pass: no bonus
    paid = hc.hire(hub.commands, agent_ctx(hub, ann), ann, cat, "Two", "done", bonus=300).value["id"]
    hc.transfer(hub.commands, agent_ctx(hub, ann), ann, bob, 500, "for the help")  # at approve_over: moves
    hc.transfer(hub.commands, agent_ctx(hub, ann), ann, bob, 300, "and more")
    assert balance(hub, ann) == 200
    pass_review(hub, paid, cat, rev)  # 800 sent today: a bonus of 300 would pass the daily limit
    assert balance(hub, ann) == 200 and tc.load(hub.commands, paid).state == "done"  # the pass stands
    hub.read_models.catch_up()
    rows = {r["task"]: r for r in hiring_rm.hire_rows(hub.read_models)}
    assert (rows[failed]["bonus_state"], rows[failed]["outcome"]) == ("none", "failed")
    assert (rows[paid]["bonus_state"], rows[paid]["outcome"]) == ("unpaid", "done")
    assert "daily limit" in rows[paid]["why"]


def test_hire_refusals_change_nothing(hub):
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "tester")
    orch = ac.spawn(hub.commands, owner(hub), "orchestrator", 1).value[0]
    for other in (bob, orch):
        hub.commands.run(lambda u, o=other: society.interacted_in(u, agent_ctx(hub, ann), ann, o, f"m{o}"))
    ctx = agent_ctx(hub, ann)
    refused(hub, "hire_self", hc.hire, hub.commands, ctx, ann, ann, "x", "y")
    refused(hub, "cannot_hire_orchestrator", hc.hire, hub.commands, ctx, ann, orch, "x", "y")
    refused(hub, "insufficient_funds", hc.hire, hub.commands, ctx, ann, bob, "x", "y", bonus=10)
    refused(hub, "invalid_amount", hc.hire, hub.commands, ctx, ann, bob, "x", "y", bonus=t.DAILY_SEND_LIMIT + 1)
    refused(hub, "budget_too_small", hc.hire, hub.commands, ctx, ann, bob, "x", "y", budget=199)
    # the laws see the contact's role from the plaza's records (S-013), not the model's word
    r = tool(s_ann, "plaza_hire", to=orch, title="x", acceptance="y")
    assert "error" in r and "S-013" in str(r["error"])
    # the contact already holds a task: nothing is made
    hc.hire(hub.commands, ctx, ann, bob, "first", "y")
    refused(hub, "worker_busy", hc.hire, hub.commands, ctx, ann, bob, "second", "y")


def test_payments_follow_the_owners_approve_over_and_the_daily_limit(hub):
    ann, s_ann = session(hub, "builder")
    bob, _ = session(hub, "tester")
    earn(hub, ann, 3_000)
    ctx = agent_ctx(hub, ann)
    hub.read_models.catch_up()
    assert hiring_rm.settings_view(hub.read_models)["payments"] == {"approve_over": 500}
    assert hc.transfer(hub.commands, ctx, ann, bob, 500, "at the threshold").value["status"] == "moved"
    held = hc.transfer(hub.commands, ctx, ann, bob, 501, "above it").value
    assert held["status"] == "held" and balance(hub, bob) == 500
    found = approvals.by_ref(hub.commands, approvals.payment_ref(held["payment"]["id"]))
    assert found is not None and found.kind == "payment"  # it waits in Approvals
    refused(hub, "owner_only", hc.set_approve_over, hub.commands, ctx, 0)
    refused(hub, "invalid_value", hc.set_approve_over, hub.commands, owner(hub), -1)
    refused(hub, "no_change", hc.set_approve_over, hub.commands, owner(hub), 500)
    hc.set_approve_over(hub.commands, owner(hub), 0)
    assert hc.transfer(hub.commands, ctx, ann, bob, 1, "one credit").value["status"] == "held"  # 0: every payment waits
    hub.read_models.catch_up()
    assert hiring_rm.settings_view(hub.read_models)["payments"] == {"approve_over": 0}
    hc.set_approve_over(hub.commands, owner(hub), 1_000)
    hc.transfer(hub.commands, ctx, ann, bob, 400, "more")  # 900 sent today
    refused(hub, "daily_limit", hc.transfer, hub.commands, ctx, ann, bob, 101, "over the day")
    # approving the held 501 still meets the daily limit: it fails and no money moves
    refused(hub, "daily_limit", approvals.decide, hub.commands, owner(hub), found.number, True)
    assert balance(hub, bob) == 900
    # the payment tool plaza_pay (S-012 permits it): the same rules, the same daily counter
    r = tool(s_ann, "plaza_pay", to=bob, amount=1, memo="thanks")
    assert r["result"]["status"] == "moved" and balance(hub, bob) == 901
    r = tool(s_ann, "plaza_pay", to=bob, amount=100, memo="past the day")
    assert r["error"]["code"] == "daily_limit" and balance(hub, bob) == 901
    # the treasury's own transfer is no agent's: S-043 forbids it
    r = tool(s_ann, "plaza_treasury_transfer", to=bob, amount=1, memo="thanks")
    assert r["error"]["code"] == "refused" and "S-043" in r["error"]["message"] and balance(hub, bob) == 901
