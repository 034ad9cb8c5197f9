"""One home per identifier (``domain/names.py``): the fleet's roles, one role-name pattern and one
length, one CID check, the t/a short numbers; and every domain check that takes one of them uses it,
so ``"worker\\n"`` is refused everywhere and a role of 64 characters is a role name everywhere."""

from __future__ import annotations

import ast
import datetime as dt
import pathlib
import re
import uuid

import pytest
from support.source import parsed

import jhrl
from agentplaza.domain import models as dm
from agentplaza.domain import names
from agentplaza.domain.agents import ROLE_INFO, Agent
from agentplaza.domain.approvals import detail_problem
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.conduct import Conduct
from agentplaza.domain.laws import ToolCall, new_book
from agentplaza.domain.tasks import Task, Worker
from jhrl.catalog import ROLES

ROOT = pathlib.Path(__file__).resolve().parent.parent
AT = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
LONGEST = "r" * names.MAX_ROLE_CHARS
TOO_LONG = "r" * (names.MAX_ROLE_CHARS + 1)


def ctx(actor: str = "owner") -> Context:
    return Context(actor, AT, uuid.uuid4().hex)


def code_of(fn, *args, **kw) -> str:
    with pytest.raises(Refusal) as e:
        fn(*args, **kw)
    return e.value.code


# -- the names themselves ---------------------------------------------------------------------------

def test_the_fleet_has_the_17_roles_of_the_society():
    assert len(ROLES) == 17 and tuple(ROLE_INFO) == ROLES
    assert [names.known_role(r) for r in ROLES] == list(ROLES)


def test_an_unknown_role_is_refused_naming_the_17_roles():
    with pytest.raises(Refusal) as e:
        names.known_role("buildr")
    assert e.value.code == "unknown_role"
    assert all(r in e.value.message for r in ROLES) and "buildr" in e.value.message


def test_a_role_name_is_one_pattern_of_one_length():
    assert names.role_name(LONGEST) == LONGEST and names.role_name("my-own_role2") == "my-own_role2"
    for bad in (TOO_LONG, "Builder", "2builder", "build er", "", "worker\n", "worker\r\n", None, 7):
        assert not names.is_role_name(bad), bad
        assert code_of(names.role_name, bad) == "invalid_role"


def test_a_trailing_newline_is_no_role_known_or_named():
    for check in (names.role_name, names.known_role, names.known_role_or_none):
        assert code_of(check, "worker\n") == "invalid_role"
        assert code_of(check, "builder\n") == "invalid_role"


def test_no_role_at_all_is_none_only_where_a_role_may_be_left_out():
    assert names.known_role_or_none(None) is None and names.known_role_or_none("") is None
    assert code_of(names.known_role, None) == "invalid_role"
    assert code_of(names.known_role, "") == "invalid_role"


def test_a_cid_is_one_check():
    assert names.check_cid(" 7 ") == "7" and names.check_cid(7) == "7" and names.check_cid("cid-7.a_b") == "cid-7.a_b"
    assert names.check_cid("x" * names.MAX_CID_CHARS)
    for bad in ("", " ", "x" * (names.MAX_CID_CHARS + 1), "agent 7", "agent:7", "é", "7\n8", None, True, 7.0):
        assert code_of(names.check_cid, bad) == "invalid_cid", bad


def test_the_short_numbers_are_one_pattern_each():
    assert names.task_number("t12") == "t12" and names.task_number("12") == "t12" and names.task_number(12) == "t12"
    assert names.approval_number("a3") == "a3" and names.approval_number(" 3 ") == "a3"
    for bad in ("t0", "0", "a3", "t", "t1x", "tt1", "t" + "9" * (names.MAX_NUMBER_DIGITS + 1), "t1\n2", None):
        assert code_of(names.task_number, bad) == "no_task", bad
    for bad in ("a0", "t3", "a", "a-1", None):
        assert code_of(names.approval_number, bad) == "no_approval", bad
    assert names.task_number("9" * names.MAX_NUMBER_DIGITS) == "t" + "9" * names.MAX_NUMBER_DIGITS


# -- every check that takes a role uses them ----------------------------------------------------------

def _task(role):
    return Task.create(ctx(), "t1", title="A title", acceptance="done", budget=100, role=role)


def test_a_task_for_an_unknown_role_is_refused_and_one_for_a_known_role_or_none_is_made():
    assert code_of(_task, "buildr") == "unknown_role"
    assert code_of(_task, "worker\n") == "invalid_role"
    assert _task("builder").role == "builder" and _task(None).role is None and _task("").role is None


def test_a_worker_is_an_agent_of_a_known_role():
    w = Worker.join(ctx("agent:7"), "7", "builder", "worker")
    assert code_of(w.available, ctx("agent:7"), "buildr", "worker") == "unknown_role"
    assert code_of(w.available, ctx("agent:7"), "builder\n", "worker") == "invalid_role"


def test_an_agent_is_spawned_with_a_known_role_only():
    spawn = Agent.spawn
    assert code_of(spawn, ctx(), agent_id=uuid.uuid4(), cid=3, role="buildr", node="n0", model=None) == "unknown_role"
    assert code_of(spawn, ctx(), agent_id=uuid.uuid4(), cid=3, role="builder\n", node="n0", model=None) == "invalid_role"


def test_an_agent_proposal_names_a_known_role():
    assert "detail.role" in detail_problem("agent", {"role": "buildr"})
    assert "detail.role" in detail_problem("agent", {"role": "worker\n"})
    assert detail_problem("agent", {"role": "builder"}) is None


def _decided(role: str, agent: str = "7") -> ToolCall:
    book = new_book()
    call = jhrl.Call(role=role, action="plaza_status", risk="read")
    return ToolCall.decided(ctx(f"agent:{agent}"), id=uuid.uuid4(), agent=agent, call=call,
                            decision=jhrl.Decision("allow", "read"), lawset=book.lawset, law_args=set(),
                            lawbook_version=0)


def test_a_decision_may_be_for_any_role_name_of_the_one_length():
    assert _decided(LONGEST).agent == "7" and _decided("my_own_role").tool == "plaza_status"
    assert code_of(_decided, TOO_LONG) == "invalid_role"
    assert code_of(_decided, "worker\n") == "invalid_role"
    assert code_of(_decided, "builder", agent="agent 7") == "invalid_cid"


def _policy(**changes) -> dict:
    return dm.check_policy(dict(dm.shipped_policy(), **changes))


def test_the_policy_takes_any_role_name_of_the_one_length():
    assert LONGEST in _policy(sleep_never_roles=[LONGEST])["sleep_never_roles"]
    assert code_of(_policy, sleep_never_roles=[TOO_LONG]) == "invalid_role"
    assert code_of(_policy, sleep_never_roles=["worker\n"]) == "invalid_role"
    assert code_of(_policy, role_models={"worker\n": dm.DEFAULT_WORKER_MODEL}) == "invalid_role"


def test_a_gateway_link_checks_its_cid_and_role_by_the_same_rules():
    policy = dm.check_policy(dm.shipped_policy())
    issue = dm.issue_link
    assert code_of(issue, ctx(), None, policy, "7\n8", "builder", "0" * 64, None, None) == "invalid_cid"
    assert code_of(issue, ctx(), None, policy, "7", "builder\n", "0" * 64, None, None) == "invalid_role"
    assert issue(ctx(), None, policy, "7", LONGEST, "0" * 64, None, None).cid == "7"


def test_a_conduct_is_one_cids():
    assert Conduct.open(ctx(), " 7 ").cid == "7"
    assert code_of(Conduct.open, ctx(), "agent 7") == "invalid_cid"


# -- the source holds no second home -----------------------------------------------------------------

def _domain_sources() -> list[pathlib.Path]:
    return sorted((ROOT / "agentplaza").rglob("*.py"))


def test_no_module_defines_its_own_role_check_or_pattern():
    found = []
    for path in _domain_sources():
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in ("check_role", "check_agent", "check_number"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} def {node.name}")
            if isinstance(node, ast.Assign) and path.name != "names.py":
                for target in node.targets:
                    if isinstance(target, ast.Name) and re.fullmatch(r"_?(ROLE|CID|TASK_ID|NUMBER)(_PATTERN|_RE)?", target.id):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {target.id}")
    assert not found, found


def _anchored_with_dollar(pattern: str) -> bool:
    """A pattern that ends in ``$`` (not escaped): with ``match`` it lets a trailing newline through."""
    return pattern.endswith("$") and not pattern.endswith("\\$")


def test_no_domain_pattern_ends_in_a_dollar_that_lets_a_newline_through():
    found = []
    for path in sorted((ROOT / "agentplaza" / "domain").glob("*.py")):
        for node in ast.walk(parsed(path)):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("compile", "match", "search")
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and _anchored_with_dollar(node.args[0].value)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found
