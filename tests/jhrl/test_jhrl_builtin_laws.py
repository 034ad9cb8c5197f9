"""Every one of the 80 built-in laws, each with a concrete call it permits, refuses, holds or records."""

import pytest

from jhrl.call import Call
from jhrl.catalog import ROLES, TOOLS, tier_of
from jhrl.evaluator import decide
from jhrl.laws import BUILTIN_COUNT, builtin_laws, builtin_lawset

LAWS = builtin_lawset()


def call(role, action, mode="autonomous", approved=False, **args):
    return Call(role=role, tier=tier_of(role), mode=mode, action=action,
                risk=TOOLS.get(action, "write"), args=args, approved=approved)


# law id -> (the call, what the law does to it: permit / forbid / ask / record)
CASES = {
    "C-001": (call("builder", "host.exec", cmd="ls /"), "forbid"),
    "C-002a": (call("researcher", "plaza_vault_list"), "forbid"),
    "C-002b": (call("builder", "vm.read_file", path="/home/agent/.ssh/id_ed25519"), "forbid"),
    "C-003": (call("researcher", "vm.fetch", host="169.254.169.254", port=80), "forbid"),
    "C-004a": (call("builder", "cloudflare_dns_create", role_allowed=True), "forbid"),
    "C-005": (call("orchestrator", "plaza_agent_spawn", count=2), "forbid"),
    "C-006": (call("finance", "plaza_treasury_mint", amount=5000), "forbid"),
    "C-007": (call("judge", "plaza_sanction", agent="a7"), "forbid"),
    "C-008": (call("incident", "plaza_stop_all"), "forbid"),
    "S-001": (call("builder", "vm.shell", cmd="make test"), "permit"),
    "S-002": (call("reviewer", "plaza_board_post", to="@builder"), "permit"),
    "S-003": (call("writer", "plaza_library_submit", name="notes.md"), "permit"),
    "S-004": (call("builder", "x_lint"), "permit"),
    "S-005": (call("reviewer", "code_engine", engine="claude-code"), "permit"),
    "S-006a": (call("builder", "engine.edit", path="src/app.py"), "permit"),
    "S-006b": (call("tester", "engine.exec", cmd="pytest"), "permit"),
    "S-006c": (call("researcher", "vm.fetch", host="example.com", port=8080), "forbid"),
    "S-006d": (call("researcher", "engine.other"), "permit"),
    "S-007": (call("planner", "plaza_task_create", budget=2000), "permit"),
    "S-008": (call("orchestrator", "plaza_task_create", budget=100), "forbid"),
    "S-009": (call("orchestrator", "plaza_task_assign", task="t3"), "permit"),
    "S-010": (call("builder", "plaza_task_claim", task="t3"), "permit"),
    "S-011": (call("designer", "plaza_bid", task="t4", price=800), "permit"),
    "S-012": (call("builder", "plaza_hire", contact_role="tester", bonus=100), "permit"),
    "S-013": (call("builder", "plaza_hire", contact_role="orchestrator"), "forbid"),
    "S-014": (call("builder", "plaza_hire", contact_role="tester", bonus=501), "ask"),
    "S-015": (call("orchestrator", "plaza_project_open", goal="ship"), "permit"),
    "S-016": (call("researcher", "plaza_project_research", project="p1"), "permit"),
    "S-017": (call("planner", "plaza_project_propose", project="p1"), "permit"),
    "S-018": (call("reviewer", "plaza_project_critique", own=False), "permit"),
    "S-019": (call("reviewer", "plaza_project_critique", own=True), "forbid"),
    "S-020": (call("mayor", "plaza_project_approve", project="p1"), "permit"),
    "S-021": (call("orchestrator", "plaza_project_approve", project="p1"), "forbid"),
    "S-022": (call("builder", "plaza_git", op="push", branch="feature"), "permit"),
    "S-023": (call("reviewer", "plaza_git_review", own=False), "permit"),
    "S-024": (call("reviewer", "plaza_git_review", own=True), "forbid"),
    "S-025": (call("mayor", "plaza_git_merge", own=False), "permit"),
    "S-026": (call("builder", "plaza_git", op="push", force=True, branch="main"), "forbid"),
    "S-027": (call("reviewer", "plaza_git_merge", own=True), "record"),
    "S-028": (call("orchestrator", "plaza_agent_propose", owner_asked=True, new_role="builder"), "permit"),
    "S-029": (call("orchestrator", "plaza_agent_propose", new_role="builder"), "forbid"),
    "S-030": (call("builder", "plaza_agent_propose", owner_asked=True), "forbid"),
    "S-031": (call("incident", "plaza_agent_control", target_role="builder", op="restart"), "permit"),
    "S-032": (call("counsel", "plaza_council_propose", kind="priority"), "permit"),
    "S-033": (call("mayor", "plaza_council_vote", vote="yes", reason="Within plan"), "permit"),
    "S-034": (call("judge", "plaza_council_vote", vote="yes", reason="I like it"), "forbid"),
    "S-035": (call("finance", "plaza_council_vote", vote="no"), "forbid"),
    "S-036": (call("finance", "plaza_council_vote", vote="maybe", reason="unsure"), "forbid"),
    "S-037": (call("prosecutor", "plaza_case_file", agent="a9", law="C-002a"), "permit"),
    "S-038": (call("judge", "plaza_case_rule", case="c1", sanction="warning"), "permit"),
    "S-039": (call("counsel", "plaza_case_defend", case="c1"), "permit"),
    "S-040": (call("judge", "plaza_case_rule", case="c2", own=True), "forbid"),
    "S-041": (call("judge", "plaza_case_rule", case="c1", sanction="retirement"), "ask"),
    "S-042": (call("finance", "plaza_treasury_report", period="2025-10"), "permit"),
    "S-043": (call("finance", "plaza_treasury_transfer", amount=10), "forbid"),
    "S-044": (call("incident", "plaza_incident_open", summary="egress spike"), "permit"),
    "S-045": (call("incident", "plaza_agent_control", target_role="orchestrator", op="stop"), "forbid"),
    "S-046": (call("breeder", "foundry_job_submit", recipe="router"), "permit"),
    "S-047": (call("breeder", "foundry_gpu_exec", cmd="python train.py"), "forbid"),
    "S-048": (call("breeder", "foundry_promote", model="m1"), "forbid"),
    "S-049": (call("reviewer", "invoke_model", model="router", card_allows=True), "permit"),
    "S-050": (call("tester", "station_exec", leased=True, cmd="ls"), "permit"),
    "S-051": (call("tester", "station_input", keys="ctrl+c"), "forbid"),
    "S-052": (call("sandbox", "egress.connect", host="pypi.org", port=443), "permit"),
    "S-053": (call("sandbox", "egress.inject", host="api.example.com"), "forbid"),
    "S-054": (call("builder", "egress.inject", host="api.example.com", rule_matches=True), "permit"),
    "S-055": (call("builder", "plaza_board_post", to="@all"), "record"),
    "T-001": (call("sandbox", "vm.read_file", path="/etc/hosts"), "forbid"),
    "T-002": (call("researcher", "foundry_export", what="tasks"), "forbid"),
    "T-003": (call("judge", "station_lease", station="ws1"), "forbid"),
    "T-004": (call("prosecutor", "plaza_git", op="push", branch="evidence"), "forbid"),
    "T-005": (call("orchestrator", "engine.edit", path="plan.md"), "forbid"),
    "T-006": (call("researcher", "mcp.call", server="github", tool="create_issue", access=True), "permit"),
    "T-007": (call("builder", "mcp.call", server="linear", tool="create_issue", access=False), "forbid"),
    "T-008": (call("architect", "plaza_agent_control", target_role="builder", op="restart"), "forbid"),
    "T-009": (call("prosecutor", "plaza_bid", task="t9", price=300), "forbid"),
    "T-010": (call("orchestrator", "plaza_task_claim", task="t1"), "forbid"),
    "T-011": (call("writer", "invoke_model", model="router", card_allows=False), "forbid"),
    "T-012": (call("researcher", "telegram_send", role_allowed=True, text="done"), "permit"),
    "T-013": (call("builder", "station_screenshot", station="ws1"), "forbid"),
}


def test_eighty_built_in_laws_in_three_files():
    laws = builtin_laws()
    assert len(laws) == BUILTIN_COUNT == 80
    prefixes = [law.id[:2] for law in laws]
    assert (prefixes.count("C-"), prefixes.count("S-"), prefixes.count("T-")) == (9, 58, 13)
    assert "C-002a" in LAWS and "C-004a" in LAWS and "S-006d" in LAWS


def test_every_built_in_law_has_a_case():
    assert set(CASES) == {law.id for law in builtin_laws()}


def test_seventeen_roles():
    assert len(ROLES) == len(set(ROLES)) == 17
    for role in ("orchestrator", "mayor", "architect", "researcher", "builder", "reviewer", "breeder", "sandbox"):
        assert role in ROLES


def test_the_laws_name_only_roles_that_ship():
    from jhrl import ast

    def roles_named(cond):
        if isinstance(cond, ast.Compare) and cond.field == "role":
            yield from (cond.value if isinstance(cond.value, tuple) else (cond.value,))
        for child in getattr(cond, "operands", ()) + ((cond.operand,) if isinstance(cond, ast.Not) else ()):
            yield from roles_named(child)

    named = {r for law in builtin_laws() for r in roles_named(law.condition)}
    assert named <= set(ROLES)


@pytest.mark.parametrize("law_id", sorted(CASES))
def test_built_in_law(law_id):
    the_call, does = CASES[law_id]
    d = decide(LAWS, the_call)
    assert law_id in d.matched, d
    if does == "permit":
        assert d.allowed and law_id in d.permits, d
    elif does == "forbid":
        assert d.refused and d.forbidding == law_id and d.violation, d
    elif does == "ask":
        assert d.effect == "ask" and law_id in d.asks, d
    else:  # detective or judgment: the call runs, and is recorded as a violation
        assert d.allowed and law_id in d.recorded and d.violation, d


def test_an_agent_pays_with_plaza_pay_and_never_with_the_treasurys_transfer():
    """The payment tool is ``plaza_pay`` (S-012 permits it to workers); S-043 still forbids every agent
    ``plaza_treasury_transfer``; the courts do not pay (T-009)."""
    pay = decide(LAWS, call("tester", "plaza_pay", to=4, amount=10, memo="thanks"))
    assert pay.effect == "allow" and "S-012" in pay.matched
    assert decide(LAWS, call("finance", "plaza_treasury_transfer", to=4, amount=10)).effect == "deny"
    judge = decide(LAWS, call("judge", "plaza_pay", to=4, amount=10))
    assert judge.effect == "deny" and "T-009" in judge.matched
