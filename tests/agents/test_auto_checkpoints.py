"""Automatic checkpoints without a VM: which calls are high-risk, the setting (on by default, checked,
read as on from a policy stored before it existed), the names and the pruning limit."""

from __future__ import annotations

import datetime as dt

import pytest

from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.models import MODELS_ID, ModelSettings, shipped_policy
from agentplaza.runtime import tools
from agentplaza.runtime.fleet import AUTO_CHECKPOINTS_KEPT, auto_checkpoints, auto_name, auto_pruned
from jhrl.catalog import HIGH_RISK_TOOLS, high_risk

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def ctx() -> Context:
    return Context("owner", T0, "c")


def test_the_high_risk_class_is_the_irreversible_calls_and_the_shell_and_installs():
    assert high_risk("vm.shell") and high_risk("vm.install") and high_risk("cloudflare_dns_create")
    assert not any(high_risk(t) for t in ("vm.write_file", "vm.read_file", "vm.fetch", "plaza_status"))
    assert high_risk("no_such_tool")  # an unknown tool is taken for the riskiest (it is refused anyway)
    assert all(tools.tool(t) is not None or t == "vm.install" for t in HIGH_RISK_TOOLS)


def test_the_setting_is_on_by_default_checked_and_read_as_on_from_an_older_policy():
    s = ModelSettings.create(ctx(), [])
    assert s.policy["vm_auto_checkpoints"] is True and shipped_policy()["vm_auto_checkpoints"] is True
    s.set_policy(ctx(), {"vm_auto_checkpoints": False})
    assert s.policy["vm_auto_checkpoints"] is False
    before = (dict(s.policy), s.version)
    for bad in ("yes", 1, None):
        with pytest.raises(Refusal) as r:
            s.set_policy(ctx(), {"vm_auto_checkpoints": bad})
        assert r.value.code == "invalid_policy"
    assert (s.policy, s.version) == before
    old = shipped_policy()
    del old["vm_auto_checkpoints"]
    s = ModelSettings.start(ctx(), id=MODELS_ID, providers={}, policy=old)  # what an older hub recorded
    assert s.policy["vm_auto_checkpoints"] is True
    s.set_policy(ctx(), {"idle_sleep_min": 3})
    assert s.policy["vm_auto_checkpoints"] is True


def test_names_say_which_call_they_guard_and_only_the_oldest_automatic_ones_are_pruned():
    assert auto_name(3, "vm.shell") == "auto-3-vm-shell"
    assert auto_name(12, "plaza_git_merge") == "auto-12-plaza-git-merge"
    assert len(auto_name(10**6, "x" * 80)) <= 40
    names = ["evening", "snap-4", *(auto_name(n, "vm.shell") for n in range(1, AUTO_CHECKPOINTS_KEPT + 3)), "auto-x"]
    assert [n for n, _ in auto_checkpoints(names)] == list(range(1, AUTO_CHECKPOINTS_KEPT + 3))
    assert auto_pruned(names) == ["auto-1-vm-shell", "auto-2-vm-shell"]  # the owner's checkpoints stay
    assert auto_pruned(names[:4]) == []
    # numbers, not text: auto-10 is newer than auto-9
    assert auto_pruned([auto_name(n, "vm.shell") for n in (10, 9, 8, 7, 6, 5)]) == ["auto-5-vm-shell"]
