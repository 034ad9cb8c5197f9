"""The decision rules: forbid wins, default deny, read tools, permission modes, ask, enforcement modes."""

import pytest

from jhrl.call import ASK_LAW, ASK_MODE, DEFAULT_DENY, FORBIDDEN, READ, READ_ONLY_MODE, Call
from jhrl.catalog import ROLES, TOOLS, tier_of
from jhrl.compiler import EMPTY, compile_source
from jhrl.evaluator import decide, offered_tools
from jhrl.explain import explain
from jhrl.laws import builtin_lawset

LAWS = compile_source('''
law p-edit "Builders edit" { statement "s" permit engine.edit, engine.exec when role == builder }
law f-rm "No rm" { statement "s" forbid engine.exec when args.cmd matches "rm -rf*" }
law d-big "Big downloads are watched" { statement "s" enforcement detective forbid vm.download when args.mb > 500 }
law j-late "Late-night work is judged" { statement "s" enforcement judgment forbid engine.edit when args.hour >= 23 }
law p-dl "Downloads" { statement "s" permit vm.download }
law a-pay "Big bonuses wait" { statement "s" ask plaza_hire when args.bonus > 500 }
law p-hire "Hiring" { statement "s" permit plaza_hire }
law a-read "Reading the ledger waits" { statement "s" ask ledger.read }
law f-vault "No vault" { statement "s" forbid vault.read }
law p-irrev "Servers" { statement "s" permit droplet.create }
law c4 "Irreversible needs the owner" { statement "s" forbid * when risk == irreversible and not approved }
''')


def c(action, risk="write", role="builder", mode="autonomous", approved=False, **args):
    return Call(role=role, tier=tier_of(role), mode=mode, action=action, risk=risk, args=args, approved=approved)


def test_a_permit_lets_the_call_run():
    d = decide(LAWS, c("engine.edit"))
    assert (d.effect, d.reason, d.permits, d.violation) == ("allow", "permitted", ("p-edit",), False)


def test_forbid_always_wins_and_is_a_violation():
    d = decide(LAWS, c("engine.exec", cmd="rm -rf /"))
    assert d.effect == "deny" and d.reason == FORBIDDEN and d.forbidding == "f-rm" and d.violation
    assert "p-edit" in d.matched  # the permit matched too, and lost


def test_no_permit_is_a_default_deny_not_misconduct():
    d = decide(LAWS, c("engine.edit", role="reviewer"))
    assert d.effect == "deny" and d.reason == DEFAULT_DENY and d.default_deny and not d.violation
    assert d.forbidding is None


@pytest.mark.parametrize("mode", ["autonomous", "ask", "read-only"])
def test_read_tools_pass_at_every_permission_level(mode):
    d = decide(EMPTY, c("vm.read_file", risk="read", role="reviewer", mode=mode))
    assert d.effect == "allow" and d.reason == READ


def test_a_read_tool_is_still_refused_when_a_law_forbids_it():
    d = decide(LAWS, c("vault.read", risk="read", mode="read-only"))
    assert d.effect == "deny" and d.forbidding == "f-vault"


def test_ask_mode_holds_calls_that_change_something():
    assert decide(LAWS, c("engine.edit", mode="ask")).reason == ASK_MODE
    approved = decide(LAWS, c("engine.edit", mode="ask", approved=True))
    assert approved.effect == "allow"  # the owner approved this exact call: it runs once


def test_read_only_mode_refuses_calls_that_change_something():
    d = decide(LAWS, c("engine.edit", mode="read-only"))
    assert d.effect == "deny" and d.reason == READ_ONLY_MODE and not d.violation


def test_an_ask_law_sends_the_call_to_the_owner():
    d = decide(LAWS, c("plaza_hire", bonus=900))
    assert d.effect == "ask" and d.reason == ASK_LAW and d.asks == ("a-pay",)
    assert decide(LAWS, c("plaza_hire", bonus=900, approved=True)).effect == "allow"
    assert decide(LAWS, c("plaza_hire", bonus=100)).effect == "allow"
    assert decide(LAWS, c("ledger.read", risk="read")).effect == "ask"  # an ask law holds even a read


def test_an_ask_law_does_not_permit_on_its_own():
    ls = compile_source('law a "t" { statement "s" ask pay }')
    assert decide(ls, c("pay")).reason == DEFAULT_DENY


def test_detective_and_judgment_laws_let_the_call_run_and_record_it():
    d = decide(LAWS, c("vm.download", mb=900))
    assert d.effect == "allow" and d.recorded == ("d-big",) and d.violation and d.forbidding is None
    d = decide(LAWS, c("engine.edit", hour=23))
    assert d.effect == "allow" and d.recorded == ("j-late",) and d.violation


def test_a_detective_law_does_not_permit_either():
    ls = compile_source('law d "t" { statement "s" enforcement detective forbid x }')
    d = decide(ls, c("x"))
    assert d.effect == "deny" and d.reason == DEFAULT_DENY and d.violation and d.recorded == ("d",)


def test_irreversible_calls_need_the_owners_approval():
    assert decide(LAWS, c("droplet.create", risk="irreversible")).forbidding == "c4"
    assert decide(LAWS, c("droplet.create", risk="irreversible", approved=True)).effect == "allow"


def test_missing_arguments_make_comparisons_false():
    assert decide(LAWS, c("engine.exec")).effect == "allow"  # f-rm needs args.cmd
    ls = compile_source('law f "t" { statement "s" forbid x when args.host != "a.com" }\n'
                        'law p "t" { statement "s" permit x }')
    assert decide(ls, c("x")).effect == "allow"
    assert decide(ls, c("x", host="b.com")).effect == "deny"


def test_kinds_never_mix_and_globs_ignore_case():
    ls = compile_source('''
law f1 "t" { statement "s" forbid x when args.n == 1 }
law f2 "t" { statement "s" forbid x when args.flag == true }
law f3 "t" { statement "s" forbid x when args.host matches "*.internal" }
law p "t" { statement "s" permit x }''')
    assert decide(ls, c("x", n=True)).effect == "allow"
    assert decide(ls, c("x", n="1")).effect == "allow"
    assert decide(ls, c("x", n=1.0)).forbidding == "f1"
    assert decide(ls, c("x", flag=1)).effect == "allow"
    assert decide(ls, c("x", host="DB.Internal")).forbidding == "f3"


def test_calls_reject_unknown_modes_and_risks():
    with pytest.raises(ValueError):
        Call(role="builder", action="x", risk="dangerous")
    with pytest.raises(ValueError):
        Call(role="builder", action="x", mode="yolo")


def test_with_no_laws_only_reads_pass():
    for risk in ("write", "irreversible"):
        assert decide(EMPTY, c("anything", risk=risk)).reason == DEFAULT_DENY
    assert decide(EMPTY, c("anything", risk="read")).effect == "allow"


# ------------------------------------------------------------ offered tools

BUILTIN = builtin_lawset()


def test_a_tool_the_role_may_never_use_is_not_offered():
    builder = offered_tools(BUILTIN, "builder", "worker", "autonomous", TOOLS)
    assert "engine.edit" in builder and "vm.shell" in builder and "plaza_task_claim" in builder
    assert "plaza_vault_list" not in builder  # C-002a
    assert "plaza_project_approve" not in builder and "foundry_job_submit" not in builder
    assert "cloudflare_dns_create" not in builder  # C-004a: irreversible tools are withheld
    assert "vm.read_file" in builder


def test_offers_follow_the_role():
    orch = offered_tools(BUILTIN, "orchestrator", "orchestrator", "autonomous", TOOLS)
    assert "plaza_task_assign" in orch and "plaza_agent_propose" in orch
    assert "plaza_agent_spawn" not in orch and "engine.edit" not in orch and "plaza_task_claim" not in orch
    assert "plaza_project_approve" in offered_tools(BUILTIN, "mayor", "worker", "autonomous", TOOLS)
    assert offered_tools(BUILTIN, "sandbox", "worker", "autonomous", TOOLS) == ["egress.connect"]


def test_argument_dependent_laws_do_not_hide_a_tool():
    # S-008 refuses small budgets, but a task with a larger budget runs: the tool is offered.
    assert "plaza_task_create" in offered_tools(BUILTIN, "planner", "worker", "autonomous", TOOLS)
    # T-012 permits telegram only when the owner allowed the role on the connector: offered, decided per call.
    assert "telegram_send" in offered_tools(BUILTIN, "writer", "worker", "autonomous", TOOLS)


def test_read_only_agents_are_offered_only_what_reads():
    offered = offered_tools(BUILTIN, "builder", "worker", "read-only", TOOLS)
    assert offered and all(TOOLS[name] == "read" for name in offered)
    assert "plaza_vault_read" not in offered


def test_every_role_is_offered_something_and_never_the_vault():
    for role in ROLES:
        offered = offered_tools(BUILTIN, role, tier_of(role), "autonomous", TOOLS)
        assert offered and not any(t.startswith("plaza_vault") for t in offered)


# ------------------------------------------------------------ explain

def test_explain_why_not_names_the_failed_condition_of_each_candidate_permit():
    e = explain(LAWS, c("engine.edit", role="reviewer"))
    assert e.decision.reason == DEFAULT_DENY
    [note] = [p for p in e.permits if p.law_id == "p-edit"]
    assert not note.matched and note.failed == ("role == builder (the call has role = reviewer)",)
    assert "default deny" in e.summary


def test_explain_a_forbid_and_a_missing_argument():
    ls = compile_source('''
law p "Payments" { statement "s" permit pay when role in [finance, mayor] and args.amount <= 500 }
law f "No weekend pay" { statement "s" forbid pay when args.day in [sat, sun] }''')
    e = explain(ls, c("pay", role="builder"))
    assert e.permits[0].failed == ("role in [finance, mayor] (the call has role = builder)",
                                   "args.amount <= 500 (the call has no args.amount)")
    e = explain(ls, c("pay", role="finance", amount=10, day="sat"))
    assert e.forbids == (("f", "No weekend pay"),) and e.permits[0].matched
    assert e.summary.startswith("refused: f (No weekend pay) forbids pay")
    assert any("did not match" in line or "matched" in line for line in e.lines())


def test_explain_or_and_not():
    ls = compile_source('law p "t" { statement "s" permit x when (role == a or role == b) and not approved }')
    e = explain(ls, c("x", role="z", approved=True))
    failed = e.permits[0].failed
    assert failed[0].startswith("none of the alternatives holds: role == a (the call has role = z)")
    assert failed[1] == "not approved (but approved holds)"


def test_explain_an_allowed_read_and_a_built_in_refusal():
    assert "read tool" in explain(EMPTY, c("vm.list_dir", risk="read")).summary
    e = explain(BUILTIN, c("plaza_vault_read", risk="read"))
    assert e.decision.forbidding == "C-002a" and "No credential seeking" in e.summary


def test_a_call_digest_binds_the_tool_and_its_exact_input():
    one = c("plaza_hire", bonus=900, contact_role="tester")
    same = c("plaza_hire", mode="ask", contact_role="tester", bonus=900)
    assert one.digest() == same.digest() and len(one.digest()) == 64
    assert one.digest() != c("plaza_hire", bonus=901, contact_role="tester").digest()
    assert one.digest() != c("plaza_bid", bonus=900, contact_role="tester").digest()
    assert "900" not in one.digest()
