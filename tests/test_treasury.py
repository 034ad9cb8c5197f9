"""Each rule of the guide's treasury, on a real store (SQLite and PostgreSQL).

Every test quotes the guide's sentence and number it checks; every refusal
names its reason as the guide does, and changes nothing.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support.treasury import Plaza, refused

from agentplaza.commands import payments
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import treasury as tc
from agentplaza.domain import treasury as t
from agentplaza.domain.base import Refusal
from agentplaza.domain.plaza import PLAZA_ID
from agentplaza.domain.plaza import Plaza as PlazaAgg
from agentplaza.projections import treasury as rm


@pytest.fixture
def p(folders, database_url):
    plaza = Plaza(folders.state, database_url)
    yield plaza
    plaza.close()


def journal(p: Plaza) -> list[dict]:
    return sorted(p.read()["rm_treasury_journal"], key=lambda e: e["position"])


def accounts(p: Plaza) -> dict[str, dict]:
    return {r["account"]: r for r in p.read()["rm_treasury_accounts"]}


# -- credits, the budget, the journal ----------------------------------------------------


def test_a_new_plaza_starts_with_100000_credits_by_a_genesis_mint(p):
    # "A new plaza starts with 100,000 credits in its budget."
    assert t.GENESIS_CREDITS == 100_000
    assert p.balance(t.BUDGET) == 100_000
    assert [(e["kind"], e["postings"], e["memo"]) for e in journal(p)] == [
        ("Mint", {"mint": -100_000, "budget": 100_000}, "genesis")]
    plaza_commands.ensure_founded(p.cmds)  # every later start: nothing new
    assert len(p.read()["rm_treasury_journal"]) == 1 and p.balance(t.BUDGET) == 100_000


def test_a_plaza_founded_before_the_treasury_gets_its_budget_on_its_next_start(folders, database_url):
    from agentplaza.commands.unit import Commands
    from agentplaza.events.store import EventStore

    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    cmds = Commands(store)
    store.commit(PlazaAgg.found(cmds.context("hub", "first start")))
    assert store.get(t.account_id(t.BUDGET)) is None
    plaza_commands.ensure_founded(cmds)
    assert store.get(t.account_id(t.BUDGET)).balance == 100_000
    assert store.get(PLAZA_ID) is not None
    store.close()


def test_mint_adds_whole_units_to_the_budget(p):
    # "agentplaza treasury mint 5000"; "Mint whole units into the budget."
    tc.mint(p.cmds, p.ctx(), 5000)
    assert p.balance(t.BUDGET) == 105_000
    for bad in (0, -5, 2.5, True, "10"):
        refused(p, "mint_whole_units", tc.mint, p.cmds, p.ctx(), bad)
    assert p.read()["rm_treasury_totals"]


def test_every_entry_sums_to_zero_and_balances_are_worked_out_from_the_journal(p):
    # "Each entry lists its postings ... and each entry balances to zero."
    # "Balances are worked out from the journal and are never typed in."
    p.wallet("7")
    p.earn("7", 300)
    tc.mint(p.cmds, p.ctx(), 1)
    rows = p.read()
    for e in rows["rm_treasury_journal"]:
        assert sum(e["postings"].values()) == 0
        assert all(type(v) is int for v in e["postings"].values())
    folded: dict[str, int] = {}
    for posting in rows["rm_treasury_postings"]:
        folded[posting["account"]] = folded.get(posting["account"], 0) + posting["amount"]
    assert folded == {a["account"]: a["balance"] for a in rows["rm_treasury_accounts"] if a["postings"]}
    assert folded["wallet:7"] == p.balance("wallet:7") == 300
    assert sum(folded.values()) == 0  # the mint source holds minus everything minted


# -- wallets -----------------------------------------------------------------------------------


def test_a_new_wallet_starts_at_zero_and_is_opened_once(p):
    # "A new agent starts at zero."
    p.wallet("7", "ann", "builder")
    w = accounts(p)["wallet:7"]
    assert (w["name"], w["role"], w["balance"], w["earned"], w["spent"]) == ("ann", "builder", 0, 0, 0)
    refused(p, "wallet_exists", p.wallet, "7")
    refused(p, "invalid_cid", p.wallet, "not a cid!")


def test_a_wallet_cannot_go_below_zero(p):
    # "A wallet cannot go below zero, so an agent cannot borrow."
    p.wallet("7"), p.wallet("8")
    p.earn("7", 100)
    refused(p, "insufficient_funds", tc.transfer, p.cmds, p.ctx("agent:7"), "7", "8", 101, "too much")
    tc.transfer(p.cmds, p.ctx("agent:7"), "7", "8", 100, "all of it")
    assert p.balance("wallet:7") == 0 and p.balance("wallet:8") == 100


# -- escrows --------------------------------------------------------------------------------------


def test_a_task_budget_moves_into_its_escrow_as_a_subcontract(p):
    # "When a task is created with a budget, the budget moves out of the plaza budget and into the task's escrow."
    tc.fund_task_escrow(p.cmds, p.ctx(), "t12", 500)
    assert p.balance(t.BUDGET) == 99_500 and p.balance("escrow:t12") == 500
    last = journal(p)[-1]
    assert last["kind"] == "Subcontract" and last["postings"] == {"budget": -500, "escrow:t12": 500}


def test_a_task_the_budget_cannot_cover_is_not_created_and_nothing_is_half_made(p):
    # "If the plaza budget cannot cover a task's budget, the task is not created. Nothing is left half made."
    r = refused(p, "insufficient_budget", tc.fund_task_escrow, p.cmds, p.ctx(), "big", 100_001)
    assert "cannot cover" in r.message
    assert p.store.get(t.account_id("escrow:big")) is None
    assert "escrow:big" not in accounts(p)
    tc.fund_task_escrow(p.cmds, p.ctx(), "exact", 100_000)
    assert p.balance(t.BUDGET) == 0


def test_tool_tasks_default_to_2000_and_refuse_below_200(p):
    # "If no budget is given, the default is 2,000 credits. A budget below 200 credits is refused."
    assert (t.DEFAULT_TOOL_TASK_BUDGET, t.MIN_TOOL_TASK_BUDGET) == (2_000, 200)
    tc.fund_task_escrow(p.cmds, p.ctx("agent:1"), "d", None, through_tools=True)
    assert p.balance("escrow:d") == 2_000
    refused(p, "budget_too_small", tc.fund_task_escrow, p.cmds, p.ctx("agent:1"), "small", 199, through_tools=True)
    tc.fund_task_escrow(p.cmds, p.ctx("agent:1"), "ok", 200, through_tools=True)
    assert p.balance("escrow:ok") == 200


def test_a_passed_task_pays_20_percent_of_its_metered_cost_and_returns_the_rest(p):
    # "The worker's pay is a margin of 20 percent of the real cost the task has metered,
    #  and it never goes above that margin." "whatever is left in the escrow goes back to the plaza budget."
    assert t.WORKER_MARGIN_PERCENT == 20
    p.wallet("7")
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 1000)
    tc.charge_own_loop(p.cmds, p.ctx("agent:7"), "7", "t1", 0, 0, None)  # 1 credit
    tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", "t1", reported_cost=406)
    assert p.store.get(t.account_id("escrow:t1")).metered == 407
    out = tc.settle_task(p.cmds, p.ctx(), "t1", True, worker="7").value
    assert [(e["kind"], e["postings"]) for e in out.entries] == [
        ("Payment", {"escrow:t1": -81, "wallet:7": 81}),  # 20% of 407 = 81.4, never above: 81
        ("Refund", {"escrow:t1": -512, "budget": 512}),
    ]
    assert p.balance("escrow:t1") == 0 and p.balance(t.BUDGET) == 100_000 - 407 - 81
    refused(p, "task_closed", tc.settle_task, p.cmds, p.ctx(), "t1", True, worker="7")
    refused(p, "task_closed", tc.fund_task_escrow, p.cmds, p.ctx(), "t1", 100)


def test_the_margin_never_exceeds_what_the_escrow_holds(p):
    # "An escrow can never go below zero, so a task cannot spend more than it was given."
    p.wallet("7")
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 1000)
    tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", "t1", reported_cost=990)
    out = tc.settle_task(p.cmds, p.ctx(), "t1", True, worker="7").value
    assert out.entries[0]["postings"] == {"escrow:t1": -10, "wallet:7": 10}  # 20% of 990 is 198; it holds 10


def test_a_metered_cost_reported_at_settlement_counts(p):
    p.wallet("7")
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 1000)
    out = tc.settle_task(p.cmds, p.ctx(), "t1", True, worker="7", metered_cost=500).value
    assert out.entries[0]["postings"] == {"escrow:t1": -100, "wallet:7": 100}


@pytest.mark.parametrize("outcome", ["failed", "withdrawn"])
def test_failed_or_withdrawn_tasks_return_their_escrow(p, outcome):
    # "Failed ... The escrow has been returned." "Withdrawn ... The escrow has been returned."
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 700)
    tc.charge_own_loop(p.cmds, p.ctx("agent:7"), "7", "t1", 0, 0, None)
    out = tc.refund_task(p.cmds, p.ctx(), "t1", outcome).value
    assert [(e["kind"], e["postings"]) for e in out.entries] == [("Refund", {"escrow:t1": -699, "budget": 699})]
    assert accounts(p)["escrow:t1"]["status"] == outcome


# -- model calls ------------------------------------------------------------------------------------


def test_own_loop_charge_is_token_price_plus_one_credit_rounded_up(p):
    # "The charge is the price of the tokens, at the prices you set for the model, plus one credit
    #  for the call, rounded up." "a model with no price of your own costs one credit per call."
    assert t.OWN_LOOP_CALL_CREDITS == 1 and t.TOKENS_PER_PRICE == 1_000_000
    assert t.own_loop_charge(1000, 1000, (3000, 15000)) == 3 + 15 + 1
    assert t.own_loop_charge(1, 0, (1, 1)) == 1 + 1  # a millionth of a credit rounds up to one
    assert t.own_loop_charge(123_456, 0, None) == 1
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 300)
    out = tc.charge_own_loop(p.cmds, p.ctx("agent:7"), "7", "t1", 1000, 1000, (3000, 15000)).value
    assert out.entries[0]["kind"] == "Spend" and out.entries[0]["postings"] == {"escrow:t1": -19, "model-costs": 19}


def test_an_own_loop_call_with_no_task_is_not_charged(p):
    # "A call made with no task is not charged on this route."
    before = p.store.max_position()
    assert tc.charge_own_loop(p.cmds, p.ctx("agent:7"), "7", None, 1000, 1000, (3000, 15000)).value.entries == []
    assert p.store.max_position() == before


def test_an_escrow_that_cannot_cover_an_own_loop_call_says_budget_exhausted(p):
    # "a call on a task whose escrow cannot cover the charge fails with the message "budget exhausted".
    #  The reply from the model is discarded and not charged"
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 18)
    r = refused(p, "budget_exhausted", tc.charge_own_loop, p.cmds, p.ctx("agent:7"), "7", "t1", 1000, 1000, (3000, 15000))
    assert r.message == "budget exhausted"
    assert p.balance("escrow:t1") == 18


def test_gateway_calls_use_the_reported_cost_else_the_price_and_go_to_the_escrow_then_the_wallet(p):
    # "A call that goes through the plaza's model gateway is charged the cost the provider reports.
    #  When the provider reports none, the plaza estimates it from the price you set ...
    #  The charge goes to the task's escrow while the agent works on a task that still holds money.
    #  Otherwise it goes to the agent's wallet."
    p.wallet("7")
    p.earn("7", 500)
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 50)
    a = tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", "t1", reported_cost=40).value
    assert a.entries[0]["kind"] == "Model call" and a.entries[0]["postings"] == {"escrow:t1": -40, "model-costs": 40}
    b = tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", "t1", input_tokens=1_000_000, output_tokens=0, price=(10, 99)).value
    assert b.entries[0]["postings"] == {"escrow:t1": -10, "model-costs": 10}  # the estimate: 10 credits
    c = tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", "t1", reported_cost=25).value  # the escrow is empty now
    assert c.entries[0]["postings"] == {"wallet:7": -25, "model-costs": 25}
    d = tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", None, reported_cost=5).value  # no task: the wallet
    assert d.entries[0]["postings"] == {"wallet:7": -5, "model-costs": 5}
    # Spent counts the own loop only: "Charges through the gateway ... are not counted in Spent."
    flows = p.read()["rm_treasury_hours"]
    assert sum(h["spent"] for h in flows) == 0 and sum(h["model_calls"] for h in flows) == 80 + 2500 // 5 * 5


def test_a_gateway_call_is_refused_before_it_is_made_when_the_payer_has_nothing(p):
    # "a call is refused before it is made when the payer has no credits. The refusal says what the
    #  wallet and the escrow hold, and it asks you to top up or finish the task."
    p.wallet("7")
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 200)
    tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", "t1", reported_cost=200)
    r = refused(p, "payer_empty", tc.check_gateway_call, p.cmds, "7", "t1")
    assert "wallet of agent 7 holds 0" in r.message and "escrow of task t1 holds 0" in r.message
    assert "top up" in r.message and "finish the task" in r.message
    p.earn("7", 10)
    assert tc.check_gateway_call(p.cmds, "7", "t1") == {"payer": "wallet:7", "holds": 10}


def test_a_partial_payer_is_charged_what_it_has_and_the_shortfall_is_recorded(p):
    # "When the payer can pay only part of the cost, the call goes ahead, that part is charged,
    #  and the shortfall is written to the agent's transcript."
    p.wallet("7")
    p.earn("7", 30)
    out = tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", None, reported_cost=100).value
    e = out.entries[0]
    assert e["postings"] == {"wallet:7": -30, "model-costs": 30} and e["shortfall"] == 70 == out.detail["shortfall"]
    assert p.balance("wallet:7") == 0
    assert journal(p)[-1]["shortfall"] == 70


# -- payments -----------------------------------------------------------------------------------------


def test_payments_at_or_below_500_move_and_501_waits_for_approval(p):
    # "Its default is 500 credits, so a payment of 501 or more waits for you."
    assert t.DEFAULT_APPROVE_OVER == 500
    p.wallet("7"), p.wallet("8")
    p.earn("7", 1000)
    now = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 500, "for the figures").value
    assert now.detail["status"] == "moved" and p.balance("wallet:8") == 500
    held = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 501, "for the report").value
    assert held.detail["status"] == "held" and held.entries == [] and p.balance("wallet:8") == 500
    pending = p.read()["rm_treasury_payments"]
    assert [(x["amount"], x["status"]) for x in pending] == [(501, "pending")]


def test_approve_over_0_makes_every_payment_wait(p):
    # "Setting it to 0 makes every payment wait."
    p.wallet("7"), p.wallet("8")
    p.earn("7", 10)
    assert payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 1, "one", approve_over=0).value.detail["status"] == "held"


def test_approving_makes_the_transfer_and_denying_cancels_it(p):
    # "Approving it makes the transfer, and the daily limit still applies. Denying it cancels the payment,
    #  and the agent is told."
    p.wallet("7"), p.wallet("8")
    p.earn("7", 1000)
    a = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "a").value.payment["id"]
    b = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 700, "b").value.payment["id"]
    out = payments.approve_payment(p.cmds, p.ctx("owner", "fine"), a).value
    assert out.entries[0]["kind"] == "Transfer" and out.entries[0]["ref"] == a
    assert p.balance("wallet:8") == 600
    refused(p, "payment_decided", payments.approve_payment, p.cmds, p.ctx(), a)
    # b would take today's sends to 1,300: the daily limit still applies
    refused(p, "daily_limit", payments.approve_payment, p.cmds, p.ctx(), b)
    d = payments.deny_payment(p.cmds, p.ctx("owner", "not today"), b).value
    assert d.payment["status"] == "denied" and p.balance("wallet:7") == 400
    rows = {x["id"]: x for x in p.read()["rm_treasury_payments"]}
    assert rows[b]["status"] == "denied" and rows[b]["reason"] == "not today" and rows[a]["status"] == "approved"
    refused(p, "no_payment", payments.deny_payment, p.cmds, p.ctx(), "0" * 32)


def test_an_approved_payment_the_wallet_cannot_cover_fails_and_no_money_moves(p):
    # "An approved payment that the wallet cannot cover fails, and no money moves."
    p.wallet("7"), p.wallet("8")
    p.earn("7", 600)
    pid = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "x").value.payment["id"]
    tc.manual_fine(p.cmds, p.ctx(), "7", 1, "a late report")
    refused(p, "insufficient_funds", payments.approve_payment, p.cmds, p.ctx(), pid)
    assert p.balance("wallet:7") == 599 and p.balance("wallet:8") == 0


def test_an_agent_sends_at_most_1000_credits_per_utc_day_in_transfers_payments_and_bonuses(p):
    # "An agent can send at most 1,000 credits per UTC day in transfers, payments and bonuses together.
    #  The limit resets at midnight UTC. A transfer that would go over the limit is refused."
    assert t.DAILY_SEND_LIMIT == 1_000
    p.wallet("7"), p.wallet("8")
    p.earn("7", 3000)
    tc.fund_task_escrow(p.cmds, p.ctx(), "hire", 5000)
    tc.charge_gateway(p.cmds, p.ctx("agent:8"), "8", "hire", reported_cost=4000)
    payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 400, "pay")
    tc.transfer(p.cmds, p.ctx("agent:7"), "7", "8", 300, "transfer")
    tc.bonus(p.cmds, p.ctx("agent:7"), "7", "8", 300, "hire")
    r = refused(p, "daily_limit", tc.transfer, p.cmds, p.ctx("agent:7"), "7", "8", 1, "one more")
    assert "1,000 credits a day" in r.message and "UTC day" in r.message
    p.clock.at = p.clock.at.replace(hour=23, minute=59, second=59)
    refused(p, "daily_limit", payments.pay, p.cmds, p.ctx("agent:7"), "7", "8", 1, "still today")
    p.clock.advance(seconds=1)  # midnight UTC
    payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 500, "a new day")
    tc.transfer(p.cmds, p.ctx("agent:7"), "7", "8", 500, "and the rest of it")
    refused(p, "daily_limit", tc.transfer, p.cmds, p.ctx("agent:7"), "7", "8", 1, "over")
    # receiving does not count: 8 can still send
    tc.transfer(p.cmds, p.ctx("agent:8"), "8", "7", 1000, "back")


def test_the_chain_margin_cap(p):
    # "The chain is at its margin cap. A payment cannot push what a chain of work has paid its agents
    #  past its real cost."
    p.wallet("7"), p.wallet("8"), p.wallet("9")
    p.earn("7", 900)
    tc.fund_task_escrow(p.cmds, p.ctx(), "root", 2000)
    tc.fund_task_escrow(p.cmds, p.ctx("agent:7"), "sub", 300, parent="root")  # a hire: the same chain
    tc.charge_gateway(p.cmds, p.ctx("agent:8"), "8", "root", reported_cost=100)
    tc.charge_gateway(p.cmds, p.ctx("agent:9"), "9", "sub", reported_cost=200)  # the chain's real cost: 300
    tc.settle_task(p.cmds, p.ctx(), "sub", True, worker="9")  # 40 paid
    tc.transfer(p.cmds, p.ctx("agent:7"), "7", "8", 200, "help on the root", task="root")  # 240 paid
    r = refused(p, "chain_margin_cap", tc.bonus, p.cmds, p.ctx("agent:7"), "7", "9", 61, "sub")
    assert "margin cap" in r.message
    tc.bonus(p.cmds, p.ctx("agent:7"), "7", "9", 60, "sub")  # exactly the real cost: 300 paid
    out = tc.settle_task(p.cmds, p.ctx(), "root", True, worker="8").value  # no room left: no margin
    assert [e["kind"] for e in out.entries] == ["Refund"]
    root = p.store.get(t.account_id("escrow:root"))
    assert (root.chain_cost, root.chain_paid) == (300, 300)


# -- fines -----------------------------------------------------------------------------------------------


def test_sanction_fines_are_capped_at_300_and_1000_in_any_seven_days(p):
    # "Each is capped at the maximum fine, 300 credits by default, and an agent cannot be fined more
    #  than 1,000 credits in any seven days."
    assert (t.MAX_SANCTION_FINE, t.WEEKLY_FINE_CAP) == (300, 1_000)
    p.wallet("7")
    p.earn("7", 2000)
    assert tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 500, "law 12").value.detail["levied"] == 300
    for _ in range(2):
        p.clock.advance(days=1)
        tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 300, "law 12")
    p.clock.advance(days=1)
    assert tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 300, "law 12").value.detail["levied"] == 100  # 1,000 reached
    refused(p, "weekly_fine_cap", tc.sanction_fine, p.cmds, p.ctx("hub"), "7", 1, "law 12")
    p.clock.advance(days=4, seconds=1)  # seven days after the first fine, it leaves the window
    assert tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 300, "law 12").value.detail["levied"] == 300
    assert p.balance(t.TREASURY) == 0  # nominal: read from the read models
    assert accounts(p)["treasury"]["balance"] == 1300 and p.balance("wallet:7") == 700


def test_a_sanction_fine_the_wallet_cannot_pay_is_recorded_as_not_collected_never_from_an_escrow(p):
    # "If the wallet cannot pay, the fine is recorded as not collected."
    # "A fine never comes out of a task's escrow, and it does not go back to the plaza budget."
    p.wallet("7")
    p.earn("7", 40)
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 1000)
    out = tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 100, "law 3").value
    assert out.detail == {"levied": 100, "collected": 40, "uncollected": 60}
    out = tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 100, "law 3").value
    assert out.detail == {"levied": 100, "collected": 0, "uncollected": 100} and out.entries[0]["postings"] == {}
    assert p.balance("escrow:t1") == 1000 and p.balance(t.BUDGET) == 100_000 - 240 - 1000  # earning 40 cost the budget 240
    rows = p.read()
    fines = [e for e in journal(p) if e["kind"] == "Fine"]
    assert [(f["amount"], f["uncollected"]) for f in fines] == [(40, 60), (0, 100)]
    # the fine not collected still shows under the agent's wallet: it names the agent, posting nothing to it
    shown = {e["position"] for e in rm.journal_rows(p.rm, wallet="7")}
    assert shown >= {f["position"] for f in fines}
    assert {(m["account"], m["position"]) for m in rows["rm_treasury_entry_mentions"]} >= {("wallet:7", fines[1]["position"])}
    # an account an entry posts to is found by its postings, not named again
    assert not {(m["account"], m["position"]) for m in rows["rm_treasury_entry_mentions"]} & {
        (pp["account"], pp["position"]) for pp in rows["rm_treasury_postings"]}
    assert shown == {pp["position"] for pp in rows["rm_treasury_postings"] if pp["account"] == "wallet:7"} | {
        m["position"] for m in rows["rm_treasury_entry_mentions"] if m["account"] == "wallet:7"}
    assert p.store.get(t.account_id("wallet:7")).fined_since(p.clock.at) == 200


def test_read_models_of_the_version_that_listed_every_account_an_entry_concerned_are_upgraded_at_start(folders,
                                                                                                      database_url):
    """Version 1 kept ``rm_treasury_entry_accounts``: at the next start the table goes, the mentions are folded
    anew, and the wallet filter still finds an entry that names the wallet without posting to it."""
    p = Plaza(folders.state, database_url)
    p.wallet("7")
    tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 100, "law 3")  # nothing to collect: it names the wallet only
    p.read()
    with p.rm.engine.begin() as conn:  # as version 1 left them
        conn.execute(sa.text("CREATE TABLE rm_treasury_entry_accounts (account VARCHAR(100), position BIGINT)"))
        conn.execute(sa.text("UPDATE rm_positions SET version = 1 WHERE name = 'treasury'"))
        conn.execute(sa.text("DELETE FROM rm_treasury_entry_mentions"))
    p.close()
    p = Plaza(folders.state, database_url)
    try:
        assert "rm_treasury_entry_accounts" not in set(sa.inspect(p.rm.engine).get_table_names())
        fine = rm.journal_rows(p.rm, kind="Fine")
        assert len(fine) == 1 and fine[0]["postings"] == {}
        assert [e["position"] for e in rm.journal_rows(p.rm, wallet="7")] == [fine[0]["position"]]
        assert rm.journal_rows(p.rm, wallet="8") == []
    finally:
        p.close()


def test_a_manual_fine_needs_a_memo_and_cannot_exceed_the_wallet(p):
    # "A fine needs a memo that says what it is for. A manual fine larger than the wallet's balance is refused."
    p.wallet("7")
    p.earn("7", 50)
    refused(p, "memo_required", tc.manual_fine, p.cmds, p.ctx(), "7", 10, "  ")
    r = refused(p, "fine_exceeds_wallet", tc.manual_fine, p.cmds, p.ctx(), "7", 51, "Sent the wrong figures")
    assert "larger than the wallet's balance" in r.message
    tc.manual_fine(p.cmds, p.ctx(), "7", 50, "Sent the wrong figures to the client")
    assert p.balance("wallet:7") == 0 and accounts(p)["treasury"]["balance"] == 50


# -- STOP ALL --------------------------------------------------------------------------------------------


def test_stop_all_holds_every_payment(p):
    # "The plaza is stopped. STOP ALL holds every payment."
    p.wallet("7"), p.wallet("8")
    p.earn("7", 900)
    tc.fund_task_escrow(p.cmds, p.ctx(), "t1", 500)
    tc.charge_gateway(p.cmds, p.ctx("agent:8"), "8", "t1", reported_cost=100)
    pid = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "held one").value.payment["id"]
    plaza_commands.stop_all(p.cmds, p.ctx("owner", "checking the books"))
    for fn, args in [
        (payments.pay, ("7", "8", 10, "x")), (tc.transfer, ("7", "8", 10, "x")), (tc.bonus, ("7", "8", 10, "t1")),
        (payments.approve_payment, (pid,)), (tc.settle_task, ("t1", True)),
    ]:
        kw = {"worker": "8"} if fn is tc.settle_task else {}
        refused(p, "plaza_held", fn, p.cmds, p.ctx("agent:7"), *args, **kw)
    refused(p, "plaza_held", tc.check_gateway_call, p.cmds, "7", None)
    tc.refund_task(p.cmds, p.ctx(), "t1", "withdrawn")  # returning money is not a payment
    payments.deny_payment(p.cmds, p.ctx(), pid)
    plaza_commands.resume(p.cmds, p.ctx())
    payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 10, "after")


# -- TigerBeetle's guarantees (docs/treasury.md) -------------------------------------------------------


def test_an_entry_id_is_posted_at_most_once_and_a_second_post_of_it_writes_nothing(p):
    # TigerBeetle: at most one transfer per id.  An entry's id follows from its first account's next
    # version; a second Entry.Posted under an id the journal holds (a retried or raced decision on stale
    # books) is a conflict at the store: nothing of that commit is written.
    import uuid

    from agentplaza.events.store import Conflict

    p.wallet("7")
    p.earn("7", 100)
    first = journal(p)[-1]
    before = p.store.max_position()
    again = t.Entry.post(p.ctx(), id=uuid.UUID(first["id"]), kind=first["kind"], memo="the same id again",
                         task=first["task"], agents=first["agents"], postings=first["postings"], shortfall=0,
                         uncollected=0, ref=first["ref"])
    wallet = p.store.get(t.account_id("wallet:7"))
    wallet.record(t.Account.Posted, p.ctx(), entry_id=first["id"], entry_kind=first["kind"], amount=100)
    with pytest.raises(Conflict):
        p.store.commit(wallet, again)
    assert p.store.max_position() == before
    assert [e["id"] for e in journal(p)].count(first["id"]) == 1
    assert p.balance("wallet:7") == 100


def test_a_held_payment_is_decided_at_most_once(p):
    # TigerBeetle: a pending transfer is posted or voided at most once.  A held payment is approved or
    # denied once; every later decision, either way, is refused and moves nothing.
    p.wallet("7"), p.wallet("8")
    p.earn("7", 2000)
    a = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "a").value.payment["id"]
    b = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 700, "b").value.payment["id"]
    payments.approve_payment(p.cmds, p.ctx("owner", "yes"), a)
    payments.deny_payment(p.cmds, p.ctx("owner", "no"), b)
    balances = (p.balance("wallet:7"), p.balance("wallet:8"))
    before = p.store.max_position()
    for pid in (a, b):
        for decide in (payments.approve_payment, payments.deny_payment):
            with pytest.raises(Refusal) as info:  # the payment's own rule, or its approval's
                decide(p.cmds, p.ctx(), pid)
            assert info.value.code in ("payment_decided", "approval_decided"), info.value.message
    assert p.store.max_position() == before
    assert (p.balance("wallet:7"), p.balance("wallet:8")) == balances == (1400, 600)
    assert [e["ref"] for e in journal(p) if e["kind"] == "Transfer"] == [a]


# -- read models -------------------------------------------------------------------------------------------


def test_the_read_models_equal_a_fold_from_event_one(p):
    p.wallet("7"), p.wallet("8")
    p.earn("7", 700)
    payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "held")
    p.clock.advance(hours=5)
    tc.sanction_fine(p.cmds, p.ctx("hub"), "7", 50, "law 1")
    live = p.read()
    assert p.rm.replay(p.store.max_position(), ["treasury"])["treasury"] == live
    hours = live["rm_treasury_hours"]
    assert [h["hour"] for h in hours] == ["2026-03-02T09", "2026-03-02T14"]
    assert hours[-1]["wallets"] == 650 and hours[-1]["treasury"] == 50
