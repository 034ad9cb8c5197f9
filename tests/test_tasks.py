"""Tasks, the scheduler, bids and awards, on a real store (SQLite and PostgreSQL).

Every transition the guide allows, and a refusal (with its code, changing nothing) for every
one it does not.  Each test quotes the guide's sentence it checks.
"""

from __future__ import annotations

import pytest
from support.treasury import Plaza
from support.treasury import refused_command as refused

from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import scheduler
from agentplaza.commands import tasks as tk
from agentplaza.commands import treasury as tc
from agentplaza.domain import treasury as t
from agentplaza.domain.base import Refusal
from agentplaza.projections.work import LINE_DETAIL, WorkProjection, queue, timeline_rows


@pytest.fixture
def p(folders, database_url):
    plaza = Plaza(folders.state, database_url)
    yield plaza
    plaza.close()


def task(p: Plaza, budget: int = 500, role: str | None = "builder", actor: str = "owner", **kw) -> str:
    return tk.create(p.cmds, p.ctx(actor), "Write the release notes", "Every change since 0.0.8 is listed",
                     budget, role=role, **kw).value["id"]


def workers(p: Plaza, *specs: tuple[str, str]) -> None:
    for cid, role in specs:
        tk.worker_available(p.cmds, p.ctx(f"agent:{cid}"), cid, role)
        if tc.wallet(p.cmds, cid) is None:
            tc.open_wallet(p.cmds, p.ctx(), cid, f"agent {cid}", role)


def state(p: Plaza, number: str) -> tuple:
    x = tk.load(p.cmds, number)
    return x.state, x.phase, x.worker, x.reviewer


def to_review(p: Plaza, number: str, worker: str = "7", reviewer: str = "9") -> None:
    tk.assign(p.cmds, p.ctx(), number, worker)
    tk.report_done(p.cmds, p.ctx(f"agent:{worker}"), number, worker, "Listed every change", ["NOTES.md"], "Compared with git log")
    tk.assign_review(p.cmds, p.ctx(), number, reviewer)


def run_pass(p: Plaza) -> scheduler.Pass:
    p.read()
    return scheduler.run_pass(p.cmds, queue(p.rm))


# -- creating: escrow -------------------------------------------------------------------------------


def test_creating_a_task_moves_its_budget_into_escrow(p):
    # "When a task is created with a budget, the budget moves out of the plaza budget and into the task's escrow."
    n = task(p, 500)
    assert n == "t1" and p.balance(t.BUDGET) == 99_500 and p.balance(t.escrow_key(n)) == 500
    x = tk.load(p.cmds, n)
    assert (x.state, x.title, x.acceptance, x.role, x.budget) == ("open", "Write the release notes",
                                                                  "Every change since 0.0.8 is listed", "builder", 500)
    assert task(p, 300, role=None) == "t2"


def test_a_task_the_budget_cannot_cover_is_not_created(p):
    # "If the plaza budget cannot cover a task's budget, the task is not created. Nothing is left half made."
    refused(p, "insufficient_budget", tk.create, p.ctx(), "Huge", "done", 100_001)
    assert task(p, 100) == "t1"  # the refused one did not take a number


def test_agent_tasks_default_to_2000_and_below_200_is_refused(p):
    # "If no budget is given, the default is 2,000 credits. A budget below 200 credits is refused"
    n = tk.create(p.cmds, p.ctx("agent:1"), "Plan", "A plan", None).value["id"]
    assert tk.load(p.cmds, n).budget == 2_000 and p.balance(t.escrow_key(n)) == 2_000
    refused(p, "budget_too_small", tk.create, p.ctx("agent:1"), "Tiny", "done", 199)
    assert task(p, 199) == "t2"  # the owner may give a small budget


def test_a_task_needs_a_title_and_an_acceptance(p):
    refused(p, "invalid_request", tk.create, p.ctx(), " ", "done", 100)
    refused(p, "invalid_request", tk.create, p.ctx(), "Title", "", 100)
    refused(p, "invalid_role", tk.create, p.ctx(), "Title", "done", 100, role="Not A Role")
    refused(p, "invalid_amount", tk.create, p.ctx(), "Title", "done", 0)


# -- the flow ------------------------------------------------------------------------------------------


def test_work_flows_from_claim_to_a_pass_that_pays_the_worker_its_margin(p):
    # "A pass pays the worker a margin of the task's real cost, and the rest of the escrow returns to the plaza budget."
    workers(p, ("7", "builder"), ("9", "reviewer"))
    n = task(p, 1000)
    tk.assign(p.cmds, p.ctx(), n, "7")
    assert state(p, n) == ("claimed", "working", "7", None)
    tc.charge_gateway(p.cmds, p.ctx("agent:7"), "7", n, reported_cost=400)
    tk.report_done(p.cmds, p.ctx("agent:7"), n, "7", "Listed every change", ["NOTES.md"], "Compared with git log")
    assert state(p, n) == ("claimed", "review", "7", None)
    assert tk.worker(p.cmds, "7").status == "idle"  # handed in: free for more work
    tk.assign_review(p.cmds, p.ctx(), n, "9")
    assert state(p, n) == ("claimed", "reviewing", "7", "9")
    out = tk.review(p.cmds, p.ctx("agent:9"), n, "9", True, "All there").value
    assert [e["kind"] for e in out.entries] == ["Payment", "Refund"]
    assert state(p, n)[0] == "done" and tk.load(p.cmds, n).notes == "All there"
    assert p.balance(t.wallet_key("7")) == 80  # 20% of 400
    assert p.balance(t.escrow_key(n)) == 0 and p.balance(t.BUDGET) == 100_000 - 400 - 80
    assert tk.worker(p.cmds, "9").status == "idle"


def test_a_fail_ends_the_task_failed_and_returns_the_escrow(p):
    # "A fail ends the task as failed, and its escrow returns to the plaza budget."
    workers(p, ("7", "builder"), ("9", "reviewer"))
    n = task(p, 1000)
    to_review(p, n)
    out = tk.review(p.cmds, p.ctx("agent:9"), n, "9", False, "Misses 0.0.9").value
    assert [e["kind"] for e in out.entries] == ["Refund"]
    assert state(p, n)[0] == "failed" and p.balance(t.BUDGET) == 100_000


def test_the_worker_can_give_up_and_the_task_fails(p):
    # "Failed: The work did not pass, or the worker failed or went offline. The escrow has been returned."
    workers(p, ("7", "builder"))
    n = task(p)
    tk.assign(p.cmds, p.ctx(), n, "7")
    refused(p, "not_your_task", tk.give_up, p.ctx("agent:8"), n, "8")
    tk.give_up(p.cmds, p.ctx("agent:7"), n, "7", "cannot reach the forge")
    assert state(p, n)[0] == "failed" and p.balance(t.BUDGET) == 100_000
    assert tk.worker(p.cmds, "7").status == "idle"


def test_a_worker_that_goes_offline_fails_its_claimed_task(p):
    # "A worker that goes offline fails its claimed task."
    workers(p, ("7", "builder"), ("9", "reviewer"))
    n = task(p)
    tk.assign(p.cmds, p.ctx(), n, "7")
    tk.worker_offline(p.cmds, p.ctx(), "7")
    assert state(p, n)[0] == "failed" and tk.load(p.cmds, n).notes == "worker 7 went offline"
    assert p.balance(t.BUDGET) == 100_000 and tk.worker(p.cmds, "7").status == "offline"
    refused(p, "worker_offline", tk.worker_offline, p.ctx(), "7")
    refused(p, "worker_offline", tk.assign, p.ctx(), task(p), "7")


def test_a_reviewer_that_goes_offline_hands_the_review_back(p):
    workers(p, ("7", "builder"), ("9", "reviewer"), ("10", "reviewer"))
    n = task(p)
    to_review(p, n)
    tk.worker_offline(p.cmds, p.ctx(), "9")
    assert state(p, n) == ("claimed", "review", "7", None)
    tk.assign_review(p.cmds, p.ctx(), n, "10")
    tk.review(p.cmds, p.ctx("agent:10"), n, "10", True, "fine")
    assert state(p, n)[0] == "done"


def test_withdraw_by_the_owner_or_the_orchestrator_returns_the_escrow(p):
    # "Withdrawn: Cancelled before it finished, by you or by the orchestrator. The escrow has been returned."
    workers(p, ("7", "builder"), ("9", "reviewer"))
    a, b, c = task(p), task(p), task(p)
    tk.withdraw(p.cmds, p.ctx("owner", "not needed"), a)  # open -> withdrawn
    tk.assign(p.cmds, p.ctx(), b, "7")
    tk.withdraw(p.cmds, p.ctx("agent:1"), b, tier="orchestrator")  # claimed -> withdrawn
    assert tk.worker(p.cmds, "7").status == "idle"
    to_review(p, c)
    refused(p, "not_allowed", tk.withdraw, p.ctx("agent:7"), c, tier="worker")
    tk.withdraw(p.cmds, p.ctx(), c)  # in review -> withdrawn
    assert [state(p, x)[0] for x in (a, b, c)] == ["withdrawn"] * 3
    assert p.balance(t.BUDGET) == 100_000 and tk.worker(p.cmds, "9").status == "idle"


def test_a_worker_claims_an_open_task_itself(p):
    n = task(p)
    refused(p, "wrong_role", tk.claim, p.ctx("agent:5"), n, "5", "tester")
    tk.claim(p.cmds, p.ctx("agent:5"), n, "5", "builder")
    assert state(p, n) == ("claimed", "working", "5", None)
    refused(p, "worker_busy", tk.claim, p.ctx("agent:5"), task(p), "5", "builder")


# -- refusals ------------------------------------------------------------------------------------------


def test_an_ended_task_never_changes_again(p):
    # "a task that has ended does not change again."
    workers(p, ("7", "builder"), ("8", "builder"), ("9", "reviewer"))
    done, failed, withdrawn = task(p, 1000), task(p), task(p)
    to_review(p, done)
    tk.review(p.cmds, p.ctx("agent:9"), done, "9", True, "ok")
    tk.assign(p.cmds, p.ctx(), failed, "7")
    tk.give_up(p.cmds, p.ctx("agent:7"), failed, "7")
    tk.withdraw(p.cmds, p.ctx(), withdrawn)
    for n in (done, failed, withdrawn):
        ctx = p.ctx()
        refused(p, "task_ended", tk.assign, ctx, n, "8")
        refused(p, "task_ended", tk.claim, ctx, n, "8", "builder")
        refused(p, "task_ended", tk.bid, ctx, n, "8", "builder", 10)
        refused(p, "task_ended", tk.award, ctx, n, "8")
        refused(p, "task_ended", tk.report_done, ctx, n, "7", "s", [], "c")
        refused(p, "task_ended", tk.assign_review, ctx, n, "9")
        refused(p, "task_ended", tk.review, ctx, n, "9", True, "again")
        refused(p, "task_ended", tk.give_up, ctx, n, "7")
        refused(p, "task_ended", tk.withdraw, ctx, n)


def test_only_an_open_task_is_claimed_and_only_by_its_role(p):
    workers(p, ("7", "builder"), ("8", "builder"), ("6", "tester"))
    n = task(p)
    refused(p, "wrong_role", tk.assign, p.ctx(), n, "6")
    tk.assign(p.cmds, p.ctx(), n, "7")
    refused(p, "task_not_open", tk.assign, p.ctx(), n, "8")
    refused(p, "task_not_open", tk.bid, p.ctx("agent:8"), n, "8", "builder", 10)
    refused(p, "no_worker", tk.assign, p.ctx(), task(p), "99")
    refused(p, "worker_busy", tk.assign, p.ctx(), task(p), "7")


def test_reports_and_reviews_follow_the_order_of_the_work(p):
    workers(p, ("7", "builder"), ("9", "reviewer"), ("10", "reviewer"))
    n = task(p)
    refused(p, "task_not_claimed", tk.report_done, p.ctx("agent:7"), n, "7", "s", [], "c")
    refused(p, "task_not_claimed", tk.assign_review, p.ctx(), n, "9")
    tk.assign(p.cmds, p.ctx(), n, "7")
    refused(p, "not_your_task", tk.report_done, p.ctx("agent:8"), n, "8", "s", [], "c")
    refused(p, "invalid_request", tk.report_done, p.ctx("agent:7"), n, "7", "", [], "checked")
    refused(p, "not_reported", tk.assign_review, p.ctx(), n, "9")
    refused(p, "not_your_review", tk.review, p.ctx("agent:9"), n, "9", True, "early")
    tk.report_done(p.cmds, p.ctx("agent:7"), n, "7", "did", ["a"], "ran it")
    refused(p, "already_reported", tk.report_done, p.ctx("agent:7"), n, "7", "did", ["a"], "ran it")
    refused(p, "not_a_reviewer", tk.take_review, p.ctx("agent:8"), n, "8", "builder")
    tk.assign_review(p.cmds, p.ctx(), n, "9")
    refused(p, "review_taken", tk.assign_review, p.ctx(), n, "10")
    refused(p, "not_your_review", tk.review, p.ctx("agent:10"), n, "10", True, "not mine")
    refused(p, "invalid_request", tk.review, p.ctx("agent:9"), n, "9", True, "")


def test_no_worker_reviews_its_own_work(p):
    # "A reviewer (never the worker) passes or fails with notes."
    workers(p, ("7", "reviewer"))
    n = task(p, role="reviewer")
    tk.assign(p.cmds, p.ctx(), n, "7")
    tk.report_done(p.cmds, p.ctx("agent:7"), n, "7", "did", [], "ran it")
    refused(p, "own_work", tk.assign_review, p.ctx(), n, "7")
    refused(p, "own_work", tk.take_review, p.ctx("agent:7"), n, "7", "reviewer")
    refused(p, "own_work", tk.review, p.ctx("agent:7"), n, "7", True, "mine is good")


def test_nothing_starts_while_the_plaza_is_held_but_refunds_go_through(p):
    # STOP ALL: "no new work starts"; refunds still go through while the plaza is held.
    workers(p, ("7", "builder"), ("8", "builder"), ("9", "reviewer"))
    a, b, c = task(p), task(p), task(p)
    tk.bid(p.cmds, p.ctx("agent:8"), c, "8", "builder", 100)
    tk.assign(p.cmds, p.ctx(), b, "7")
    plaza_commands.stop_all(p.cmds, p.ctx("owner", "audit"))
    refused(p, "plaza_held", tk.assign, p.ctx(), a, "8")
    refused(p, "plaza_held", tk.claim, p.ctx("agent:8"), a, "8", "builder")
    refused(p, "plaza_held", tk.bid, p.ctx("agent:8"), a, "8", "builder", 10)
    refused(p, "plaza_held", tk.award, p.ctx(), c, "8")
    refused(p, "plaza_held", tk.report_done, p.ctx("agent:7"), b, "7", "s", [], "c")
    before = p.store.max_position()
    assert run_pass(p).held and p.store.max_position() == before
    tk.withdraw(p.cmds, p.ctx(), a)
    tk.give_up(p.cmds, p.ctx("agent:7"), b, "7")
    plaza_commands.resume(p.cmds, p.ctx())
    tk.award(p.cmds, p.ctx(), c, "8")
    assert state(p, c)[:3] == ("claimed", "working", "8")


# -- bids and awards -----------------------------------------------------------------------------------


def test_workers_of_the_role_bid_and_the_owner_awards_one(p):
    # "Workers of that role can bid a price on it. You then award the call to one of the bidders,
    #  and the awarded worker takes the task, just as if you had assigned it."
    workers(p, ("7", "builder"), ("8", "builder"))
    n = task(p, 500)
    refused(p, "wrong_role", tk.bid, p.ctx("agent:6"), n, "6", "tester", 100)
    refused(p, "bid_over_budget", tk.bid, p.ctx("agent:7"), n, "7", "builder", 501)
    refused(p, "invalid_price", tk.bid, p.ctx("agent:7"), n, "7", "builder", 0)
    tk.bid(p.cmds, p.ctx("agent:7"), n, "7", "builder", 300)
    tk.bid(p.cmds, p.ctx("agent:8"), n, "8", "builder", 250)
    tk.bid(p.cmds, p.ctx("agent:7"), n, "7", "builder", 200)  # a new bid replaces the old
    assert tk.load(p.cmds, n).bids == {"7": 200, "8": 250}
    refused(p, "no_bid", tk.award, p.ctx(), n, "5")
    assert run_pass(p).assigned == []  # an open call with bids waits for the award
    tk.award(p.cmds, p.ctx(), n, "8")
    assert state(p, n)[:3] == ("claimed", "working", "8") and tk.worker(p.cmds, "8").task == n
    refused(p, "task_not_open", tk.award, p.ctx(), n, "7")


def test_a_task_without_a_role_is_not_an_open_call(p):
    n = task(p, role=None)
    refused(p, "no_open_call", tk.bid, p.ctx("agent:7"), n, "7", "builder", 10)


# -- the scheduler -------------------------------------------------------------------------------------


def test_the_scheduler_gives_open_tasks_to_idle_workers_of_their_role_oldest_first(p):
    # "The scheduler gives each open task to an idle worker agent. The worker has the task's role,
    #  or any worker if the task names no role."
    workers(p, ("7", "builder"), ("8", "tester"))
    a = task(p, role="builder")
    b = task(p, role="builder")
    c = task(p, role=None)
    d = task(p, role="designer")
    out = run_pass(p)
    assert [(x["task"], x["worker"]) for x in out.assigned] == [(a, "7"), (c, "8")]
    assert state(p, b)[0] == "open" and state(p, d)[0] == "open"
    assert run_pass(p).assigned == []  # everyone is busy


def test_the_scheduler_gives_done_work_to_an_idle_reviewer_never_its_worker(p):
    workers(p, ("7", "reviewer"), ("9", "reviewer"))
    n = task(p, role="reviewer")
    tk.assign(p.cmds, p.ctx(), n, "7")
    tk.report_done(p.cmds, p.ctx("agent:7"), n, "7", "did", [], "ran it")
    out = run_pass(p)
    assert out.assigned == [{"work": "review", "task": n, "worker": "9"}]


def test_the_scheduler_serves_every_idle_worker_before_any_twice(p):
    # fair: no worker starved
    workers(p, *[(c, "builder") for c in ("1", "2", "3")])
    seen = []
    for _ in range(6):
        n = task(p)
        out = run_pass(p)
        assert len(out.assigned) == 1
        who = out.assigned[0]["worker"]
        seen.append(who)
        tk.withdraw(p.cmds, p.ctx(), n)  # frees the worker again
    assert sorted(seen[:3]) == ["1", "2", "3"] and sorted(seen[3:]) == ["1", "2", "3"]


def test_the_plan_is_fair_and_pure():
    q = scheduler.Queue(
        open=[scheduler.OpenTask("t2", "builder", 2), scheduler.OpenTask("t1", "builder", 1),
              scheduler.OpenTask("t3", None, 3)],
        review=[scheduler.ReviewTask("t9", "r1", 9)],
        idle=[scheduler.Idle("b2", "builder", 5), scheduler.Idle("b1", "builder", 7),
              scheduler.Idle("r1", "reviewer", 0), scheduler.Idle("r2", "reviewer", 3)],
    )
    assert scheduler.plan(q) == [("task", "t1", "b2"), ("task", "t2", "b1"), ("review", "t9", "r2")]


def test_the_scheduler_stops_while_held_and_resumes_where_it_was(p):
    # "STOP ALL holds the whole plaza": the scheduler makes no assignment while held.
    workers(p, ("7", "builder"), ("8", "builder"))
    a, b = task(p), task(p)
    plaza_commands.stop_all(p.cmds, p.ctx("owner", "hold"))
    before = p.store.max_position()
    assert run_pass(p).held and p.store.max_position() == before
    c = task(p)  # creating is not starting work
    plaza_commands.resume(p.cmds, p.ctx())
    out = run_pass(p)
    assert [x["task"] for x in out.assigned] == [a, b] and state(p, c)[0] == "open"


def test_worker_availability_is_reported_by_the_runtime(p):
    tk.worker_available(p.cmds, p.ctx("agent:7"), "7", "builder")
    tk.worker_busy(p.cmds, p.ctx("agent:7"), "7", "chatting with the owner")
    n = task(p)
    assert run_pass(p).assigned == []
    tk.worker_available(p.cmds, p.ctx("agent:7"), "7", "builder")
    assert [x["task"] for x in run_pass(p).assigned] == [n]
    refused(p, "worker_holds_task", tk.worker_available, p.ctx("agent:7"), "7", "builder")
    refused(p, "invalid_tier", tk.worker_available, p.ctx("agent:8"), "8", "builder", "boss")
    tk.worker_available(p.cmds, p.ctx("agent:1"), "1", "orchestrator", "orchestrator")
    refused(p, "not_a_worker", tk.assign, p.ctx(), task(p, role=None), "1")


def test_the_timeline_shows_every_transition_with_who_and_why(p):
    # "agentplaza tasks timeline t12"
    workers(p, ("7", "builder"), ("9", "reviewer"))
    n = task(p)
    to_review(p, n)
    tk.withdraw(p.cmds, p.ctx("owner", "changed my mind"), n)
    p.rm.catch_up()
    rows = timeline_rows(p.rm, n)
    assert [(r["event"], r["state"], r["actor"]) for r in rows] == [
        ("Created", "open", "owner"), ("Claimed", "claimed", "owner"), ("Reported", "claimed", "agent:7"),
        ("ReviewerAssigned", "claimed", "owner"), ("Withdrawn", "withdrawn", "owner")]
    assert rows[-1]["reason"] == "changed my mind" and rows[-1]["detail"] is None
    assert {r["task"] for r in rows} == {n} and [r["position"] for r in rows] == sorted(r["position"] for r in rows)
    assert rows[0]["detail"]["title"] and rows[1]["detail"]["worker"] == "7"
    assert set(rows[2]["detail"]) == {"summary", "files", "checks"} and rows[3]["detail"]["reviewer"] == "9"
    # Read from the task's stream in the log: the events of other tasks are not in it.
    other = task(p)
    p.rm.catch_up()
    assert [r["event"] for r in timeline_rows(p.rm, other)] == ["Created"] and len(timeline_rows(p.rm, n)) == 5
    refused_read = pytest.raises(Refusal, timeline_rows, p.rm, "t9999")
    assert refused_read.value.code == "no_task"


def test_every_task_event_the_work_read_model_folds_is_a_line_of_its_timeline():
    handled = {kind for kind in WorkProjection().handlers if kind.startswith("Task.")}
    assert handled == set(LINE_DETAIL)
