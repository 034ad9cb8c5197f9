"""The values the command line's plaza, approvals, tasks, agents, conduct and rules areas share
with the hub are defined once, in ``agentplaza.wire``; the rule language keeps its own copy of
the permission modes, risks and tiers (it imports nothing of the plaza), held equal here."""

from agentplaza import wire
from agentplaza.domain import approvals, conduct, tasks
from jhrl import call


def test_the_domain_takes_its_states_and_kinds_from_wire():
    assert tasks.STATES is wire.TASK_STATES
    assert approvals.STATUSES is wire.APPROVAL_STATUSES
    assert tuple(approvals.KINDS) == wire.APPROVAL_KINDS


def test_the_rule_language_names_the_same_modes_risks_and_tiers():
    assert call.MODES == wire.PERMISSION_MODES == conduct.MODES
    assert call.RISKS == wire.RISKS
    assert call.AGENT_TIERS == wire.AGENT_TIERS
