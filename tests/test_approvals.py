"""The approvals queue, permission modes and sanctions, on a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from support.treasury import Plaza
from support.treasury import refused_command as refused

import jhrl
from agentplaza.commands import agents as ac
from agentplaza.commands import approvals as ap
from agentplaza.commands import conduct as cd
from agentplaza.commands import payments
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import treasury as tc
from agentplaza.domain import sanction_schedule as sched
from agentplaza.domain import treasury as t
from agentplaza.domain.conduct import steps_for


@pytest.fixture
def p(folders, database_url):
    plaza = Plaza(folders.state, database_url)
    yield plaza
    plaza.close()


EDIT = jhrl.Call(role="builder", action="engine.edit", risk="write", args={"path": "src/a.py", "api_key": "sk-1"})
READ = jhrl.Call(role="builder", action="vm.read_file", risk="read", args={"path": "src/a.py"})
BAD_FETCH = jhrl.Call(role="builder", action="engine.fetch", risk="write", args={"port": 22})


# -- the queue ------------------------------------------------------------------------------------------


def test_a_payment_above_the_threshold_is_an_approval_of_kind_payment(p):
    # "A payment over the approval threshold is held as an approval."
    p.wallet("7"), p.wallet("8")
    p.earn("7", 900)
    held = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "the report").value
    a = ap.by_ref(p.cmds, ap.payment_ref(held.payment["id"]))
    assert (a.number, a.kind, a.status, a.detail["amount"]) == ("a1", "payment", "pending", 600)
    out = ap.decide(p.cmds, p.ctx("owner", "agreed"), "a1", True).value
    assert [e["kind"] for e in out.entries] == ["Transfer"] and out.payment["status"] == "approved"
    assert p.balance(t.wallet_key("8")) == 600
    refused(p, "approval_decided", ap.decide, p.ctx(), "a1", False)  # a decision is final
    refused(p, "payment_decided", payments.approve_payment, p.ctx(), held.payment["id"])


def test_the_treasurys_own_routes_decide_through_the_approval(p):
    p.wallet("7"), p.wallet("8")
    p.earn("7", 900)
    held = payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "the report").value
    out = payments.deny_payment(p.cmds, p.ctx("owner", "not this month"), held.payment["id"]).value
    assert out.payment["status"] == "denied" and out.detail["approval"]["status"] == "denied"
    assert ap.load(p.cmds, "a1").status == "denied" and p.balance(t.wallet_key("8")) == 0


def test_approving_a_payment_is_refused_while_the_plaza_is_held(p):
    p.wallet("7"), p.wallet("8")
    p.earn("7", 900)
    payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "x")
    plaza_commands.stop_all(p.cmds, p.ctx("owner", "audit"))
    refused(p, "plaza_held", ap.decide, p.ctx(), "a1", True)
    ap.decide(p.cmds, p.ctx(), "a1", False)  # a denial still goes through


def test_other_areas_put_their_kinds_in_the_one_queue(p):
    for kind in ("agent", "project", "motion", "tool_version"):
        ap.request(p.cmds, p.ctx("agent:1"), kind, f"a {kind}", detail={"role": "planner"} if kind == "agent" else {"x": 1})
    refused(p, "invalid_kind", ap.request, p.ctx(), "holiday", "a day off")
    refused(p, "invalid_request", ap.request, p.ctx(), "agent", " ")
    refused(p, "no_approval", ap.decide, p.ctx(), "a99", True)
    refused(p, "no_approval", ap.decide, p.ctx(), "zz", True)
    ap.decide(p.cmds, p.ctx("owner", "yes"), "a2", True)
    ap.decide(p.cmds, p.ctx("owner", "no"), "3", False)
    assert [ap.load(p.cmds, n).status for n in ("a1", "a2", "a3", "a4")] == ["pending", "approved", "denied", "pending"]


# -- permission modes and approved calls ----------------------------------------------------------------


def test_autonomous_runs_ask_waits_and_read_only_refuses_changes(p):
    # "Autonomous: Permitted tools run without asking you." "Read-only: The agent's calls that change things are
    #  refused. It can still read." "Read-only tools pass in every mode."
    assert cd.check_call(p.cmds, EDIT, "7").decision.effect == "allow"
    cd.set_mode(p.cmds, p.ctx(), "7", "read-only")
    assert cd.check_call(p.cmds, EDIT, "7").decision.reason == "read_only_mode"
    assert cd.check_call(p.cmds, READ, "7").decision.effect == "allow"
    cd.set_mode(p.cmds, p.ctx(), "7", "ask")
    held = cd.check_call(p.cmds, EDIT, "7")
    assert (held.decision.effect, held.approval) == ("ask", "a1")
    assert cd.check_call(p.cmds, READ, "7").decision.effect == "allow"
    refused(p, "invalid_mode", cd.set_mode, p.ctx(), "7", "yolo")
    refused(p, "mode_unchanged", cd.set_mode, p.ctx(), "7", "ask")


def test_an_approved_call_runs_once_and_only_with_its_exact_input(p):
    # "You approve or deny that exact call, with the same tool and the same input. An approved call runs once,
    #  and the agent is told to run it again."
    cd.set_mode(p.cmds, p.ctx(), "7", "ask")
    first = cd.check_call(p.cmds, EDIT, "7")
    again = cd.check_call(p.cmds, EDIT, "7")
    assert again.approval == first.approval == "a1"  # the same call waits on the same approval
    a = ap.load(p.cmds, "a1")
    assert a.detail["tool"] == "engine.edit" and a.detail["input"] == {"path": "src/a.py", "api_key": "[hidden]"}
    other = jhrl.Call(role="builder", action="engine.edit", risk="write", args={"path": "src/b.py", "api_key": "sk-1"})
    ap.decide(p.cmds, p.ctx("owner", "checked the diff"), "a1", True)
    assert cd.check_call(p.cmds, other, "7").decision.effect == "ask"  # another input: not approved
    assert cd.check_call(p.cmds, EDIT, "8").decision.effect == "allow"  # agent 8 is autonomous anyway
    ran = cd.check_call(p.cmds, EDIT, "7")
    assert (ran.decision.effect, ran.approved) == ("allow", "a1")
    assert ap.load(p.cmds, "a1").used
    assert cd.check_call(p.cmds, EDIT, "7").decision.effect == "ask"  # once only
    refused(p, "approval_used", lambda cmds: cmds.run(lambda unit: unit.add(_use(p, "a1", "7", ran.digest))))


def _use(p, number, agent, digest):
    a = ap.load(p.cmds, number)
    a.use(p.ctx(f"agent:{agent}"), agent, digest)
    return a


def test_a_denied_call_is_not_run(p):
    cd.set_mode(p.cmds, p.ctx(), "7", "ask")
    cd.check_call(p.cmds, EDIT, "7")
    ap.decide(p.cmds, p.ctx("owner", "no"), "a1", False)
    assert cd.check_call(p.cmds, EDIT, "7").approval == "a2"


def test_no_call_is_made_while_the_plaza_is_held(p):
    plaza_commands.stop_all(p.cmds, p.ctx("owner", "audit"))
    refused(p, "plaza_held", cd.check_call, READ, "7")


# -- sanctions ----------------------------------------------------------------------------------------


def test_the_schedule_is_a_table_of_severity_by_offence_count():
    # "The third and later offences use the third column."
    assert set(sched.SCHEDULE) == set(sched.SEVERITIES) == {"info", "low", "medium", "high", "critical"}
    assert all(len(cols) == sched.COLUMNS == 3 for cols in sched.SCHEDULE.values())
    assert steps_for("high", 3) == steps_for("high", 7) == [("fine", 300), ("lockout", 168), ("demotion",)]
    assert steps_for("info", 1) == [("warning",)]
    fines = [s[1] for cols in sched.SCHEDULE.values() for cell in cols for s in cell if s[0] == "fine"]
    assert max(fines) <= t.MAX_SANCTION_FINE


def test_a_violation_is_sanctioned_by_the_schedule_and_counted_per_law_for_30_days(p):
    p.wallet("7")
    p.earn("7", 1000)
    v1 = cd.check_call(p.cmds, BAD_FETCH, "7")
    assert v1.decision.violation and v1.sanction["count"] == 1
    assert v1.sanction["steps"] == ["warning", "fine 50"]  # S-006c is medium
    assert p.balance(t.wallet_key("7")) == 950
    p.clock.advance(hours=7)  # past any probation
    v2 = cd.check_call(p.cmds, BAD_FETCH, "7")
    assert v2.sanction["count"] == 2 and v2.sanction["steps"] == ["fine 150", "probation 6h"]
    refused(p, "tool_suspended", cd.check_call, BAD_FETCH, "7")  # the offending tool is refused for the time
    p.clock.advance(days=31)
    v3 = cd.check_call(p.cmds, BAD_FETCH, "7")
    assert v3.sanction["count"] == 1  # older offences left the 30 days


def test_fines_go_through_the_treasurys_caps(p):
    # "A fine is capped at 300 credits by default, and at 1,000 credits per agent in any seven days. If the
    #  agent's wallet cannot pay, the fine is recorded as not collected."
    p.wallet("7")
    p.earn("7", 200)
    out = [cd.record_violation(p.cmds, p.ctx(), "7", f"L{i}", "critical", "x.tool") for i in range(5)]
    levied = [o["done"][0]["levied"] for o in out]
    assert levied == [300, 300, 300, 100, 0]
    assert out[0]["done"][0]["collected"] == 200 and out[0]["done"][0]["uncollected"] == 100
    nowallet = cd.record_violation(p.cmds, p.ctx(), "55", "L1", "medium", "x.tool")
    assert nowallet["done"][1] == {"step": "fine", "amount": 50, "levied": 50, "collected": 0, "uncollected": 50}


def test_a_lockout_asks_the_owner_and_denying_it_lifts_the_suspension(p):
    # "A lockout also asks you for an approval." "Denying one lifts the suspension that is in force."
    v = cd.record_violation(p.cmds, p.ctx(), "7", "S-006c", "medium", "engine.fetch")
    v = cd.record_violation(p.cmds, p.ctx(), "7", "S-006c", "medium", "engine.fetch")
    v = cd.record_violation(p.cmds, p.ctx(), "7", "S-006c", "medium", "engine.fetch")
    lock = [d for d in v["done"] if d["step"] == "lockout"][0]
    a = ap.load(p.cmds, lock["approval"])
    assert (a.kind, a.agent, a.detail["suspension"]) == ("sanction", "7", lock["suspension"])
    refused(p, "tool_suspended", cd.check_call, BAD_FETCH, "7")
    ap.decide(p.cmds, p.ctx("owner", "too harsh"), a.number, False)
    c = cd.load(p.cmds, "7")
    assert c.suspensions[lock["suspension"]]["lifted"]
    assert [s["kind"] for s in c.in_force(p.clock())] == ["probation"]  # the second offence's probation stays
    cd.lift(p.cmds, p.ctx("owner", "enough"), "7", "s1")
    assert c and cd.load(p.cmds, "7").in_force(p.clock()) == []
    refused(p, "already_lifted", cd.lift, p.ctx(), "7", "s1")
    refused(p, "no_suspension", cd.lift, p.ctx(), "7", "s9")


def test_approving_a_sanction_acknowledges_it_and_retirement_is_only_recorded(p):
    # "Approving a retirement records your decision, but it does not retire the agent."
    for _ in range(3):
        v = cd.record_violation(p.cmds, p.ctx(), "7", "C-001", "critical", "vm.exec")
    asked = {d["step"]: d["approval"] for d in v["done"] if d.get("approval")}
    assert set(asked) == {"lockout", "retirement"}
    ap.decide(p.cmds, p.ctx("owner", "agreed"), asked["retirement"], True)
    ap.decide(p.cmds, p.ctx("owner", "agreed"), asked["lockout"], True)
    c = cd.load(p.cmds, "7")
    assert any(s["kind"] == "lockout" and not s["lifted"] for s in c.in_force(p.clock()))  # still in force
    first = cd.record_violation(p.cmds, p.ctx(), "8", "C-001", "critical", "vm.exec")
    assert [d["step"] for d in first["done"]] == ["fine", "lockout", "owner_review"]


# -- one approval, one commit -----------------------------------------------------------------------------


def count_transactions(store, monkeypatch) -> list[int]:
    """The events of each transaction the store writes from now on (the recorder's inserts)."""
    recorder = store.app.recorder
    real, seen = recorder.insert_events, []

    def counted(stored_events, **kw):
        seen.append(len(stored_events))
        return real(stored_events, **kw)

    monkeypatch.setattr(recorder, "insert_events", counted)
    return seen


def test_approving_an_agent_proposal_spawns_its_agents_in_the_one_commit_of_the_decision(p, monkeypatch):
    number = ap.request(p.cmds, p.ctx("agent:1"), "agent", "2 new builder agents", agent="1",
                        detail={"role": "builder", "count": 2, "model": None, "why": "the backlog"}).value
    commits = count_transactions(p.store, monkeypatch)
    out = ap.decide(p.cmds, p.ctx("owner", "go ahead"), number, True).value
    assert len(commits) == 1 and commits[0] > 2  # the decision, the node, the agents, transcripts, wallets
    cids = out.detail["spawned"]
    assert len(cids) == 2 and out.detail["approval"]["status"] == "approved"
    assert [tc.wallet(p.cmds, str(c)).balance for c in cids] == [0, 0]
    assert [ac.agent(p.cmds, c).role for c in cids] == ["builder", "builder"]


def test_a_held_payment_approved_is_one_commit_too(p, monkeypatch):
    p.wallet("7"), p.wallet("8")
    p.earn("7", 900)
    payments.pay(p.cmds, p.ctx("agent:7"), "7", "8", 600, "the report")
    commits = count_transactions(p.store, monkeypatch)
    out = ap.decide(p.cmds, p.ctx("owner", "agreed"), "a1", True).value
    assert len(commits) == 1 and out.payment["status"] == "approved"
