"""The model policy: tier lists, effort pins, resolution order with its source, contributor refusal."""

from __future__ import annotations

import datetime as dt

import pytest

from agentplaza.commands.models import ensure_models, load, set_policy
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.models import (
    DEFAULT_ORCHESTRATOR_MODEL,
    DEFAULT_WORKER_MODEL,
    EFFORTS,
    MAX_FETCH_BLOCKLIST,
    MAX_IDLE_SLEEP_MIN,
    MODELS_ID,
    ModelSettings,
    check_agent_model,
    is_contributor,
    parse_entry,
    permit,
    resolve,
    shipped_policy,
    tier_of,
)
from agentplaza.domain.refusals import Kind
from agentplaza.events.store import EventStore

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def ctx() -> Context:
    return Context("owner", T0, "c")


def settings() -> ModelSettings:
    return ModelSettings.create(ctx(), [])


def test_shipped_defaults_are_the_guides():
    p = shipped_policy()
    assert p["orchestrator_model"] == DEFAULT_ORCHESTRATOR_MODEL == "anthropic/claude-opus-5-5"
    assert p["default_model"] == DEFAULT_WORKER_MODEL == "deepseek/deepseek-flash"
    assert p["allow_training_models"] is False and p["idle_sleep_min"] == 10
    assert p["sleep_never_roles"] == ["orchestrator"]
    assert EFFORTS == ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def test_entries_parse_with_and_without_a_pin():
    assert str(parse_entry("anthropic/claude-opus-5-5@low")) == "anthropic/claude-opus-5-5@low"
    e = parse_entry("openrouter/anthropic/claude-opus-5-5")
    assert (e.provider, e.model, e.pin) == ("openrouter", "anthropic/claude-opus-5-5", None)
    # an @ suffix that is no effort stays part of the name (Vertex names carry dates)
    assert parse_entry("vertex/claude-haiku-4-5@20251001").model == "claude-haiku-4-5@20251001"
    for bad in ("no-provider", "/model", "Anthropic/x", "a/"):
        with pytest.raises(Refusal) as r:
            parse_entry(bad)
        assert r.value.code in ("invalid_model", "invalid_provider")


def test_a_list_given_replaces_the_whole_list_and_the_defaults_must_stay_on_it():
    s = settings()
    s.set_policy(ctx(), {"orchestrator": ["anthropic/claude-opus-5-5", "openai/gpt-6-astra"]})
    assert s.policy["orchestrator"] == ["anthropic/claude-opus-5-5", "openai/gpt-6-astra"]
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), {"worker": ["anthropic/claude-haiku-5-5"]})  # drops the worker default
    assert r.value.code == "model_not_allowed" and "deepseek/deepseek-flash" in r.value.message
    s.set_policy(ctx(), {"worker": ["anthropic/claude-haiku-5-5"], "default_model": "anthropic/claude-haiku-5-5"})
    assert s.policy["default_model"] == "anthropic/claude-haiku-5-5"
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), {"worker": ["a/b", "a/b@low"]})
    assert r.value.code == "invalid_policy"
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), {"worker": []})
    assert r.value.code == "invalid_policy"


def test_a_refusal_changes_nothing():
    s = settings()
    before = (dict(s.policy), s.version)
    with pytest.raises(Refusal):
        s.set_policy(ctx(), {"effort": "turbo"})
    with pytest.raises(Refusal):
        s.set_policy(ctx(), {"idle_sleep_min": MAX_IDLE_SLEEP_MIN + 1})
    assert (s.policy, s.version) == before and not s.collect_events()[1:]


def test_idle_sleep_min_bounds():
    s = settings()
    s.set_policy(ctx(), {"idle_sleep_min": 0})
    s.set_policy(ctx(), {"idle_sleep_min": MAX_IDLE_SLEEP_MIN})
    with pytest.raises(Refusal):
        s.set_policy(ctx(), {"idle_sleep_min": -1})


def test_the_fetch_blocklist_is_bare_host_names_lower_cased_once_each():
    s = settings()
    assert s.policy["fetch_blocklist"] == [] and shipped_policy()["fetch_blocklist"] == []
    s.set_policy(ctx(), {"fetch_blocklist": ["Example.COM ", "*.example.net", "example.com", "x-1.io"]})
    assert s.policy["fetch_blocklist"] == ["example.com", "*.example.net", "x-1.io"]
    before = (dict(s.policy), s.version)
    for bad in ("http://example.com", "example.com/x", "*example.com", "*.", "a..b", "example.com:443", 7):
        with pytest.raises(Refusal) as r:
            s.set_policy(ctx(), {"fetch_blocklist": ["ok.example", bad]})
        assert r.value.code == "invalid_blocklist_entry" and repr(bad) in r.value.message and r.value.kind is Kind.INVALID
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), {"fetch_blocklist": [f"h{i}.example" for i in range(MAX_FETCH_BLOCKLIST + 1)]})
    assert r.value.code == "invalid_policy"
    assert (s.policy, s.version) == before
    with pytest.raises(Refusal) as r:  # the same list, written differently, is no change
        s.set_policy(ctx(), {"fetch_blocklist": ["EXAMPLE.com", "*.example.net", "x-1.io"]})
    assert r.value.code == "no_change"
    s.set_policy(ctx(), {"fetch_blocklist": []})
    assert s.policy["fetch_blocklist"] == []


def test_a_policy_stored_before_the_fetch_blocklist_reads_it_as_empty():
    old = shipped_policy()
    del old["fetch_blocklist"]
    s = ModelSettings.start(ctx(), id=MODELS_ID, providers={}, policy=old)  # what an older hub recorded
    assert s.policy["fetch_blocklist"] == []
    s.set_policy(ctx(), {"idle_sleep_min": 3})
    assert s.policy["fetch_blocklist"] == [] and s.policy["idle_sleep_min"] == 3


def test_tiers_follow_the_role():
    assert tier_of("orchestrator") == "orchestrator"
    assert tier_of("builder") == tier_of("reviewer") == tier_of(None) == "worker"


def test_resolution_order_agent_then_role_then_default():
    s = settings()
    s.set_policy(ctx(), {"role_models": {"builder": "anthropic/claude-haiku-5-5"}})
    p = s.policy
    assert resolve(p, "builder", "gemini/gemini-3.5-flash-lite") == \
        type(resolve(p, "builder"))("gemini/gemini-3.5-flash-lite", "agent", "worker")
    r = resolve(p, "builder")
    assert (r.model, r.source, r.tier) == ("anthropic/claude-haiku-5-5", "role", "worker")
    r = resolve(p, "reviewer")
    assert (r.model, r.source) == ("deepseek/deepseek-flash", "default")
    r = resolve(p, "orchestrator")
    assert (r.model, r.source, r.tier) == ("anthropic/claude-opus-5-5", "default", "orchestrator")
    # an empty model clears a role's model: the PATCH body removes it, and the default comes back
    s.set_policy(ctx(), {"role_models": {}})
    assert resolve(s.policy, "builder").source == "default"


def test_a_role_model_must_be_on_its_tier_list():
    s = settings()
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), {"role_models": {"builder": "anthropic/claude-opus-5-5"}})  # orchestrator-only
    assert r.value.code == "model_not_allowed"
    s.set_policy(ctx(), {"role_models": {"orchestrator": "openai/gpt-6-astra"}})
    assert resolve(s.policy, "orchestrator").model == "openai/gpt-6-astra"


def test_a_per_agent_model_must_be_allowed_for_its_tier():
    p = settings().policy
    assert check_agent_model(p, "builder", "anthropic/claude-haiku-5-5") == "anthropic/claude-haiku-5-5"
    with pytest.raises(Refusal):
        check_agent_model(p, "builder", "openai/gpt-6-astra")
    assert check_agent_model(p, "orchestrator", "openai/gpt-6-astra") == "openai/gpt-6-astra"
    assert check_agent_model(p, "builder", None) is None


def test_permit_fails_closed_and_matches_full_then_bare_names():
    s = settings()
    s.set_policy(ctx(), {"worker": ["deepseek/deepseek-flash", "anthropic/claude-haiku-5-5@low",
                                     "openrouter/anthropic/claude-opus-5-5"]})
    p = s.policy
    a = permit(p, "worker", "claude-haiku-5-5")
    assert (a.provider, a.model, a.effort, a.effort_source) == ("anthropic", "claude-haiku-5-5", "low", "pin")
    # the pin wins over what the request asks
    assert permit(p, "worker", "anthropic/claude-haiku-5-5", "max").effort == "low"
    # a bare OpenRouter id matches the openrouter entry's model
    o = permit(p, "worker", "anthropic/claude-opus-5-5")
    assert (o.provider, o.model) == ("openrouter", "anthropic/claude-opus-5-5")
    for wrong in ("gpt-6-astra", "openai/gpt-6-astra", "", "claude-opus-5-5"):
        with pytest.raises(Refusal) as r:
            permit(p, "worker", wrong)
        assert r.value.code == "model_not_allowed" and r.value.kind is Kind.FORBIDDEN
    # the orchestrator tier has its own list
    assert permit(p, "orchestrator", "claude-opus-5-5").provider == "anthropic"
    with pytest.raises(Refusal):
        permit(p, "orchestrator", "deepseek-flash")


def test_effort_the_request_then_the_default_then_none():
    s = settings()
    p = s.policy
    assert permit(p, "worker", "deepseek-flash").effort_source == "none"
    r = permit(p, "worker", "deepseek-flash", "high")
    assert (r.effort, r.effort_source) == ("high", "request")
    s.set_policy(ctx(), {"effort": "medium"})
    r = permit(s.policy, "worker", "deepseek-flash")
    assert (r.effort, r.effort_source) == ("medium", "default")
    with pytest.raises(Refusal) as e:
        permit(s.policy, "worker", "deepseek-flash", "turbo")
    assert e.value.code == "invalid_effort"


@pytest.mark.parametrize("where", ["orchestrator", "worker", "default_model", "orchestrator_model", "role",
                                   "decision_models"])
def test_contributor_models_are_refused_everywhere_while_training_is_off(where):
    c = "meta/muse-spark-1.3-contributor"
    assert is_contributor(c) and is_contributor("muse-spark-1.2-contributor") and not is_contributor("meta/muse-spark-1.3")
    s = settings()
    change = {
        "orchestrator": {"orchestrator": [*s.policy["orchestrator"], c]},
        "worker": {"worker": [*s.policy["worker"], c]},
        "default_model": {"worker": [*s.policy["worker"], c], "default_model": c},
        "orchestrator_model": {"orchestrator": [*s.policy["orchestrator"], c], "orchestrator_model": c},
        "role": {"worker": [*s.policy["worker"], c], "role_models": {"builder": c}},
        "decision_models": {"decision_models": [c]},
    }[where]
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), change)
    assert r.value.code == "training_model_refused" and "allow_training_models" in r.value.message
    s.set_policy(ctx(), dict(change, allow_training_models=True))
    # turning the setting off again while a contributor is in use is refused too
    with pytest.raises(Refusal):
        s.set_policy(ctx(), {"allow_training_models": False})


def test_a_contributor_model_is_not_permitted_for_a_call_while_training_is_off():
    s = settings()
    p = dict(s.policy, worker=[*s.policy["worker"], "meta/muse-spark-1.2-contributor"])
    with pytest.raises(Refusal) as r:
        permit(p, "worker", "muse-spark-1.2-contributor")
    assert r.value.code == "training_model_refused"


def test_policy_changes_are_events_on_the_store(folders, database_url):
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    try:
        cmds = Commands(store, lambda: T0)
        ensure_models(cmds, [])
        ensure_models(cmds, [])  # a no-op on every later start
        set_policy(cmds, cmds.context("owner"), {"effort": "low", "idle_sleep_min": 30})
        with pytest.raises(Refusal) as r:
            set_policy(cmds, cmds.context("owner"), {"effort": "low"})
        assert r.value.code == "no_change"
        kinds = [e.kind for e in store.read()]
        assert kinds == ["ModelSettings.Created", "ModelSettings.PolicySet"]
        assert load(cmds).policy["idle_sleep_min"] == 30
    finally:
        store.close()


def test_an_unknown_effort_pin_in_a_tier_list_is_refused_naming_the_efforts():
    """Drift fix (issue 15): ``mock/echo@turbo`` was kept as a model named ``echo@turbo``."""
    s = settings()
    before = dict(s.policy)
    with pytest.raises(Refusal) as r:
        s.set_policy(ctx(), {"worker": ["deepseek/deepseek-flash", "mock/echo@turbo"]})
    assert r.value.code == "invalid_effort" and "'turbo'" in r.value.message
    assert all(e in r.value.message for e in EFFORTS)
    assert s.policy == before
    s.set_policy(ctx(), {"worker": ["deepseek/deepseek-flash", "mock/echo@high", "vertex/claude-haiku-4-5@20251001"]})
    assert s.policy["worker"][1:] == ["mock/echo@high", "vertex/claude-haiku-4-5@20251001"]
