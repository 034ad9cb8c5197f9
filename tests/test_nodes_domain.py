"""Joined nodes, pure: the signed messages (``agentplaza.nodesign``), placement's score
(``domain.placement``), the CID ranges, and drain, undrain and revoke in the registry."""

from __future__ import annotations

import datetime as dt

import pytest

from agentplaza import nodesign as ns
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.nodes import NodeRegistry, range_node
from agentplaza.domain.placement import PER_AGENT_MIB, WARM_BONUS_MIB, Candidate, eligible, place, score

HUB = "https://10.77.0.1:7700"


def ctx() -> Context:
    return Context("owner", dt.datetime(2026, 12, 1, tzinfo=dt.UTC), "c1")


# -- signed messages ------------------------------------------------------------------------------------
def test_a_node_makes_its_key_owner_only_once_and_the_hub_keeps_its_43_character_public_half(tmp_path):
    key = ns.make_key(tmp_path)
    assert (tmp_path / ns.KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert len(ns.public_key_text(key)) == 43
    assert ns.public_key_text(ns.load_key(tmp_path)) == ns.public_key_text(key)
    with pytest.raises(FileExistsError):
        ns.make_key(tmp_path)


def test_a_signed_hello_is_accepted_once_and_its_replay_is_refused(tmp_path):
    key = ns.make_key(tmp_path)
    now = [1_000_000.0]
    replay = ns.Replay(clock=lambda: now[0])
    text = ns.sign(key, "hello", "n1", HUB, at=int(now[0]))
    m = ns.parse(text)
    ns.verify(m, ns.public_key_text(key), HUB)
    replay.accept(m)
    with pytest.raises(ns.BadSignature, match="replay"):
        replay.accept(ns.parse(text))
    now[0] += 30  # still inside the window: still a replay
    with pytest.raises(ns.BadSignature, match="replay"):
        replay.accept(ns.parse(text))
    now[0] += 200  # past the window: refused by its time, though its nonce is forgotten
    with pytest.raises(ns.BadSignature, match="time"):
        replay.accept(ns.parse(text))


def test_a_message_out_of_time_or_for_another_hub_or_another_key_is_refused(tmp_path):
    key = ns.make_key(tmp_path / "a")
    other = ns.make_key(tmp_path / "b")
    replay = ns.Replay(clock=lambda: 5_000.0)
    with pytest.raises(ns.BadSignature, match="time"):
        replay.accept(ns.parse(ns.sign(key, "hello", "n1", HUB, at=5_000 - ns.SKEW_S_MAX - 1)))
    m = ns.parse(ns.sign(key, "hello", "n1", HUB))
    with pytest.raises(ns.BadSignature):
        ns.verify(m, ns.public_key_text(key), "https://elsewhere:7700")
    with pytest.raises(ns.BadSignature):
        ns.verify(m, ns.public_key_text(other), HUB)


@pytest.mark.parametrize("field, value", [("kind", "owner"), ("node", "n0"), ("node", "../n1"), ("at", "5"),
                                          ("nonce", "zz"), ("sig", "x" * 10)])
def test_a_malformed_message_is_no_node_message(tmp_path, field, value):
    import json

    d = json.loads(ns.sign(ns.make_key(tmp_path), "hello", "n1", HUB))
    d[field] = value
    with pytest.raises(ns.BadSignature):
        ns.parse(json.dumps(d))


def test_a_changed_field_breaks_the_signature(tmp_path):
    import json

    key = ns.make_key(tmp_path)
    d = json.loads(ns.sign(key, "beat", "n1", HUB))
    d["node"] = "n2"  # n1's signature, claimed for n2
    with pytest.raises(ns.BadSignature):
        ns.verify(ns.parse(json.dumps(d)), ns.public_key_text(key), HUB)


# -- CID ranges -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cid, node", [(3, "n0"), (102, "n0"), (103, ""), (999, ""), (1000, "n1"), (1099, "n1"),
                                       (1100, "n2"), (1250, "n3"), (2, "")])
def test_each_cid_names_the_machine_whose_range_holds_it(cid, node):
    assert range_node(cid) == node


# -- placement ------------------------------------------------------------------------------------------
def node(name, **kw) -> Candidate:
    return Candidate(**{"name": name, "free_mib": 4096, "agents": 0, "free_cids": 100, **kw})


def test_the_score_is_free_memory_plus_1024_for_a_warm_template_minus_512_an_agent():
    assert score(node("n1", free_mib=4000, agents=3, warm=True)) == 4000 + WARM_BONUS_MIB - 3 * PER_AGENT_MIB
    assert (WARM_BONUS_MIB, PER_AGENT_MIB) == (1024, 512)


def test_a_new_agent_goes_to_the_eligible_node_with_the_highest_score():
    assert place([node("n1", free_mib=2048), node("n2", free_mib=8192)], 256) == "n2"
    assert place([node("n1", agents=2), node("n2", agents=1)], 256) == "n2"


def test_a_node_holding_a_warm_template_is_preferred():
    assert place([node("n1", free_mib=4096), node("n2", free_mib=3500, warm=True)], 256) == "n2"


@pytest.mark.parametrize("why", [{"draining": True}, {"revoked": True}, {"online": False}, {"free_cids": 0},
                                 {"free_mib": 100}])
def test_a_draining_revoked_offline_or_full_node_is_never_chosen_and_then_n0_takes_it(why):
    best = node("n1", **{"free_mib": 64_000, "warm": True, **why})
    assert not eligible(best, 256)
    assert place([best], 256) == "n0"
    assert place([best, node("n2", free_mib=512)], 256) == "n2"


def test_placement_with_no_node_goes_to_n0_and_ties_go_to_the_first_named():
    assert place([], 256) == "n0"
    assert place([node("n2"), node("n1")], 256) == "n1"


# -- drain, undrain, revoke -----------------------------------------------------------------------------
def registry() -> NodeRegistry:
    r = NodeRegistry.open(ctx())
    r.join(ctx(), "atlas", "A" * 43, "0123456789ab", "10.0.0.2")
    return r


def test_a_drained_node_can_be_undrained_and_each_twice_is_refused():
    r = registry()
    r.drain(ctx(), "n1")
    assert r.draining("n1")
    with pytest.raises(Refusal) as e:
        r.drain(ctx(), "n1")
    assert e.value.code == "node_draining"
    r.undrain(ctx(), "n1")
    assert not r.draining("n1")
    with pytest.raises(Refusal) as e:
        r.undrain(ctx(), "n1")
    assert e.value.code == "node_not_draining"


def test_revoking_cannot_be_undone_and_a_revoked_node_cannot_be_drained_or_undrained():
    r = registry()
    r.drain(ctx(), "n1")
    r.revoke(ctx(), "n1")
    assert r.revoked("n1")
    for act in (r.revoke, r.drain, r.undrain):
        with pytest.raises(Refusal) as e:
            act(ctx(), "n1")
        assert e.value.code == "node_revoked"
    pending = len(r.collect_events())
    with pytest.raises(Refusal):
        r.drain(ctx(), "n1")
    assert len(r.collect_events()) == 0 and pending > 0  # a refusal records nothing


@pytest.mark.parametrize("name", ["n0", "n2", "", "N1"])
def test_only_a_joined_node_is_drained_or_revoked(name):
    with pytest.raises(Refusal) as e:
        registry().revoke(ctx(), name)
    assert e.value.code == "unknown_node"
