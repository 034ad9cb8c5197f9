"""The vault's pure rules: names, kinds, scopes, bindings, versions, hints, lockout, resolution, matrix, .env."""

from __future__ import annotations

import datetime as dt

import pytest

from agentplaza.domain import vault as V
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.refusals import Kind

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def ctx(at=T0, actor="owner"):
    return Context(actor, at, "c")


@pytest.fixture
def vault():
    return V.Vault.create(ctx(actor="hub"), "slot_1")


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "A", "X9_"])
def test_good_names(name):
    assert V.check_name(name) == name


@pytest.mark.parametrize("name", ["", "anthropic", "9KEY", "_KEY", "KEY-1", "KEY 1", "K" * 129])
def test_bad_names_are_refused(name):
    with pytest.raises(Refusal) as r:
        V.check_name(name)
    assert r.value.code == "invalid_name"


def test_kinds_default_and_refusal():
    assert V.check_kind(None) == "api_key"
    assert [V.check_kind(k) for k in V.KINDS] == list(V.KINDS)
    with pytest.raises(Refusal):
        V.check_kind("ssh_key")


@pytest.mark.parametrize("b", ["provider:anthropic", "connector:slack", "mcp:github", "hf", "tool:web-search", "egress", "engine:auggie"])
def test_every_binding_of_the_guide(b):
    assert V.check_bindings([b]) == [b]


@pytest.mark.parametrize("b", ["provider", "provider:", "bank:x", "hf:x", "provider:Anthropic", "egress:1"])
def test_bad_bindings(b):
    with pytest.raises(Refusal) as r:
        V.check_bindings([b])
    assert r.value.code == "invalid_binding"


def test_bindings_split_on_commas_and_dedupe():
    assert V.check_bindings(["mcp:github,hf", "hf"]) == ["hf", "mcp:github"]


def test_hints_only_for_values_of_twenty_or_more():
    assert V.hint_of("x" * 19) is None
    assert V.hint_of("a" * 16 + "WXYZ") == "WXYZ"


def test_scope_rules_one_plaza_entry_and_no_node_twice(vault):
    vault.add_secret(ctx(), "s1", "KEY", "v1", scope="plaza")
    with pytest.raises(Refusal) as r:
        vault.add_secret(ctx(), "s2", "KEY", "v2", scope="plaza")
    assert r.value.code == "secret_exists" and r.value.kind is Kind.CONFLICT
    vault.add_secret(ctx(), "s3", "KEY", "v3", nodes=["n1", "n3"])
    with pytest.raises(Refusal):
        vault.add_secret(ctx(), "s4", "KEY", "v4", nodes=["n3"])
    vault.add_secret(ctx(), "s5", "KEY", "v5", nodes=["n2"])
    with pytest.raises(Refusal):
        vault.rebind(ctx(), "s5", nodes=["n2", "n1"])
    with pytest.raises(Refusal) as r:
        V.check_scope("plaza", ["n1"])
    assert r.value.code == "invalid_scope"


def test_a_refusal_changes_nothing(vault):
    before = len(vault.pending_events)
    with pytest.raises(Refusal):
        vault.add_secret(ctx(), "s1", "bad name", "v")
    with pytest.raises(Refusal):
        vault.add_secret(ctx(), "s1", "KEY", "")
    assert len(vault.pending_events) == before and vault.entries == {}


def test_rotate_keeps_the_new_value_and_two_before_and_rollback_makes_no_version(vault):
    vault.add_secret(ctx(), "s", "KEY", "v1")
    destroyed = []
    for i in range(2, 7):
        _, d = vault.rotate(ctx(), "s", f"v{i}")
        destroyed += d
    e = vault.entry("s")
    assert e.kept == (4, 5, 6) and e.current == 6 and destroyed == [1, 2, 3]
    e = vault.rollback(ctx(), "s", 4)
    assert e.current == 4 and e.kept == (4, 5, 6)
    with pytest.raises(Refusal) as r:
        vault.rollback(ctx(), "s", 3)
    assert r.value.code == "unknown_version"
    e, d = vault.rotate(ctx(), "s", "v7")
    assert e.kept == (5, 6, 7) and d == [4] and e.current == 7


def test_five_failures_in_a_minute_lock_unsealing_for_ten_minutes(vault):
    for i in range(4):
        assert vault.unseal_failed(ctx(T0 + dt.timedelta(seconds=i)), "passphrase") is False
    vault.check_unseal(T0 + dt.timedelta(seconds=5))
    assert vault.unseal_failed(ctx(T0 + dt.timedelta(seconds=10)), "passphrase") is True
    with pytest.raises(Refusal) as r:
        vault.check_unseal(T0 + dt.timedelta(minutes=9))
    assert r.value.code == "vault_locked" and r.value.kind is Kind.TOO_MANY
    vault.check_unseal(T0 + dt.timedelta(minutes=10, seconds=11))


def test_failures_spread_over_more_than_a_minute_do_not_lock(vault):
    for i in range(10):
        assert vault.unseal_failed(ctx(T0 + dt.timedelta(seconds=20 * i)), "passphrase") is False


def test_resolve_prefers_the_node_entry_and_hides_unbound_secrets(vault):
    vault.add_secret(ctx(), "plaza", "ANTHROPIC_API_KEY", "a", bindings=["provider:anthropic"])
    vault.add_secret(ctx(), "n3", "ANTHROPIC_API_KEY", "b", nodes=["n3"], bindings=["provider:anthropic"])
    vault.add_secret(ctx(), "gh", "GITHUB_TOKEN", "c", nodes=["n1"], bindings=["mcp:github"])
    es = vault.all_entries()
    assert V.resolve(es, "ANTHROPIC_API_KEY", "provider:anthropic", "n3").id == "n3"
    assert V.resolve(es, "ANTHROPIC_API_KEY", "provider:anthropic", "n0").id == "plaza"
    with pytest.raises(V.Denied) as d:
        V.resolve(es, "ANTHROPIC_API_KEY", "mcp:github", "n0")
    assert d.value.why == "not_bound"
    with pytest.raises(V.Denied) as d:
        V.resolve(es, "GITHUB_TOKEN", "mcp:github", "n2")
    assert d.value.why == "out_of_scope"
    with pytest.raises(V.Denied) as d:
        V.resolve(es, "NOPE", "mcp:github", "n2")
    assert d.value.why == "no_entry"
    with pytest.raises(V.Denied) as unbound:
        V.resolve(es, "GITHUB_TOKEN", "provider:anthropic", "n1")
    # an unbound secret is invisible: the caller hears the same as for no secret at all
    assert unbound.value.message.replace("provider:anthropic", "X").replace("n1", "N") == \
        V.Denied("GITHUB_TOKEN", "X", "N", "no_entry").message
    m = V.matrix(es)
    rows = {(r["consumer"], r["name"]): r["nodes"] for r in m["consumers"]}
    assert m["nodes"] == ["n0", "n1", "n3"]
    assert rows[("provider:anthropic", "ANTHROPIC_API_KEY")] == {"n0": "plaza", "n1": "plaza", "n3": "n3"}
    assert rows[("mcp:github", "GITHUB_TOKEN")] == {"n0": "out_of_scope", "n1": "gh", "n3": "out_of_scope"}
    assert rows[("hf", "HF_TOKEN")] == {"n0": "missing", "n1": "missing", "n3": "missing"}


def test_dotenv_plan_skips_and_says_why_never_quoting_a_value(vault):
    vault.add_secret(ctx(), "s1", "PRESENT", "x")
    vault.add_secret(ctx(), "s2", "GONE", "x")
    vault.delete(ctx(), "s2")
    text = "\n".join([
        "# comment", "export GOOD=sk-1", "QUOTED='sk 2'", "EMPTY=", "TWICE=a", "TWICE=b", "lower=x",
        "sk-ant-not-a-line", "PRESENT=y", "GONE=z", "",
    ])
    take, skipped = V.plan_import(vault, V.parse_dotenv(text), "plaza", [])
    assert [(t.name, t.value) for t in take] == [("GOOD", "sk-1"), ("QUOTED", "sk 2")]
    reasons = {(s["line"], s["reason"].split(":")[0]) for s in skipped}
    assert reasons == {(4, "empty"), (5, "repeated in the file"), (6, "repeated in the file"), (7, "invalid name"),
                       (8, "invalid"), (9, "already present in that scope"), (10, "deleted before")}
    assert "sk-ant-not-a-line" not in repr(skipped)


def test_recovery_codes_normalize():
    sym = "0123456789ABCDEFGHJKMNPQRSTVWXYZ" + "0123456789ABCDEFGHJK"
    code = V.format_recovery_code(sym)
    assert len(code.split("-")) == 13 and all(len(g) == 4 for g in code.split("-"))
    assert V.normalize_recovery_code(code.lower()) == sym
    assert V.normalize_recovery_code(code[:-1]) is None


def test_use_groups_one_per_secret_consumer_node_and_minute(vault):
    e = vault.add_secret(ctx(), "s", "KEY", "v")
    g = V.UseGroups()
    assert g.add(e, "hf", "n0", T0) == []
    assert g.add(e, "hf", "n0", T0 + dt.timedelta(seconds=59)) == []
    assert g.add(e, "egress", "n0", T0 + dt.timedelta(seconds=30)) == []
    done = g.add(e, "hf", "n0", T0 + dt.timedelta(seconds=61))
    assert sorted((x.consumer, x.count) for x in done) == [("egress", 1), ("hf", 2)]
    assert [(x.count, x.minute) for x in g.drain()] == [(1, T0 + dt.timedelta(minutes=1))]
