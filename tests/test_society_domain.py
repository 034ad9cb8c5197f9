"""The society's rules and figures on the domain alone: a rating needs a recent interaction and is
given once per interaction, ratings back and forth stop counting after a few (ring damping);
contacts and opinions fade; reputation is unrated until the evidence threshold, flows from the owner's
ratings and from work that passed review, and a ring of agents rating each other "great" for 30 days
gains at most a small bound over an honest agent, while the owner's rating outweighs the ring."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from agentplaza.domain import reputation as rep
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.reputation import Fact
from agentplaza.domain.society import RATING_WINDOW_DAYS, RING_LIMIT, SCORES, Bond, Society

T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
#: What a ring of five rating each other "great" as often as it can for 30 days may gain over an honest
#: agent with the same work record (points of reputation).
RING_GAIN_BOUND = 10


def ctx(actor: str, at: dt.datetime = T0) -> Context:
    return Context(actor, at, "c")


def test_a_rating_needs_an_interaction_of_the_last_30_days_and_is_given_once_per_interaction():
    b = Bond.open(ctx("agent:3"), 3, 5)
    with pytest.raises(Refusal) as e:
        b.rate(ctx("agent:3"), 3, 5, "great")
    assert e.value.code == "nothing_to_rate"
    b.interacted(ctx("agent:3"), "3~5:1", "message")
    b.interacted(ctx("agent:5", T0 + dt.timedelta(hours=1)), "t1", "work", worker=5, passed=True)
    later = T0 + dt.timedelta(hours=2)
    assert b.rate(ctx("agent:3", later), 3, 5, "good")["ref"] == "t1"  # the latest first
    assert b.rate(ctx("agent:3", later), 3, 5, "good", "3~5:1")["counts"] is True
    b.collect_events()
    for args, code in (((3, 5, "good"), "nothing_to_rate"), ((3, 3, "good"), "invalid_rating"),
                       ((3, 5, "superb"), "invalid_rating"), ((3, 9, "good"), "invalid_rating")):
        with pytest.raises(Refusal) as e:
            b.rate(ctx("agent:3", later), *args)
        assert e.value.code == code
    assert b.rate(ctx("agent:5", later), 5, 3, "fair")["counts"] is True  # each side rates once
    b.interacted(ctx("agent:3", later), "3~5:2", "message")
    too_late = later + dt.timedelta(days=RATING_WINDOW_DAYS, seconds=1)
    with pytest.raises(Refusal):
        b.rate(ctx("agent:3", too_late), 3, 5, "great")
    assert b.collect_events()[-1].__class__.__qualname__ == "Bond.Interacted"


def test_ratings_back_and_forth_stop_counting_after_a_few():
    b = Bond.open(ctx("agent:3"), 3, 5)
    counted = []
    for n in range(10):
        at = T0 + dt.timedelta(hours=n)
        b.interacted(ctx("agent:3", at), f"3~5:{n}", "message")
        counted.append(b.rate(ctx("agent:3", at), 3, 5, "great")["counts"])
        counted.append(b.rate(ctx("agent:5", at), 5, 3, "great")["counts"])
    assert sum(counted) == 2 * RING_LIMIT
    one_way = Bond.open(ctx("agent:3"), 3, 7)
    for n in range(6):  # one-sided ratings are no ring: they all count
        one_way.interacted(ctx("agent:3", T0), f"3~7:{n}", "message")
        assert one_way.rate(ctx("agent:3", T0), 3, 7, "good")["counts"] is True


def test_only_the_owner_trusts_more_or_less():
    s = Society.open(ctx("owner"))
    s.owner_rates(ctx("owner"), 3, True)
    with pytest.raises(Refusal) as e:
        s.owner_rates(ctx("agent:3"), 3, True)
    assert e.value.code == "owner_only"


def test_contacts_fade_over_two_weeks_and_opinions_over_ninety_days():
    facts = [Fact("message", T0, 3, 5), Fact("work", T0, 5, 3, passed=True)]
    assert rep.contacts(facts, T0)[(3, 5)] == {"interactions": 2, "last": T0, "strength": 1.0}
    assert rep.contacts(facts, T0 + dt.timedelta(days=7))[(3, 5)]["strength"] == 0.5
    assert rep.contacts(facts, T0 + dt.timedelta(days=15))[(3, 5)]["strength"] == 0.0
    (o,) = rep.opinion_rows(facts, T0)
    assert (o["by"], o["of"], o["trust"]) == (3, 5, round(2 / 3, 4))
    assert rep.opinion_rows(facts, T0 + dt.timedelta(days=91)) == []  # faded away
    assert rep.contacts(facts, T0 - dt.timedelta(days=1)) == {}  # before the facts: nothing yet


def passed_tasks(worker: int, reviewer: int, n: int, start: dt.datetime = T0) -> list[Fact]:
    return [Fact("work", start + dt.timedelta(hours=i), worker, reviewer, passed=True) for i in range(n)]


def test_reputation_is_unrated_until_there_is_enough_evidence_and_stays_in_0_to_100():
    one = passed_tasks(3, 9, 1)
    assert rep.reputation(one, T0 + dt.timedelta(hours=1), [3, 9])[3]["score"] is None
    three = passed_tasks(3, 9, 3)
    r = rep.reputation(three, T0 + dt.timedelta(hours=3), [3, 9])
    assert r[3]["score"] == 80 and r[9]["score"] is None
    owner_up = [Fact("owner", T0, None, 7, passed=True)]
    assert rep.reputation(owner_up, T0)[7]["score"] == round(100 * 13 / 14)  # no shared work needed
    owner_down = [Fact("owner", T0, None, 7, passed=False)]
    assert rep.reputation(owner_down, T0)[7]["score"] == round(100 * 1 / 14)
    failed = [Fact("work", T0, 4, 9, passed=False) for _ in range(5)]
    assert 0 <= rep.reputation(failed, T0)[4]["score"] < 50


def test_an_agent_trusted_by_trusted_agents_scores_higher():
    base = passed_tasks(3, 9, 3) + passed_tasks(4, 9, 3) + passed_tasks(5, 9, 3)
    t = T0 + dt.timedelta(days=1)
    trusted_rater = [Fact("owner", T0, None, 3, passed=True)] + [Fact("rating", T0, 3, 4, SCORES["great"])] * 10
    nobody_rater = [Fact("rating", T0, 8, 5, SCORES["great"])] * 10
    r = rep.reputation(base + trusted_rater + nobody_rater, t)
    assert r[4]["score"] > r[5]["score"] == rep.reputation(base, t)[5]["score"]


def ring_facts(ring: list[int], reviewer: int, days: int, worked: dt.datetime) -> list[Fact]:
    """Five agents with the honest agent's work record, talking and rating each other "great" as often
    as the bonds let them, every hour for ``days`` days (the bonds decide what counts)."""
    facts: list[Fact] = []
    bonds = {pair: Bond.open(ctx(f"agent:{pair[0]}"), *pair) for pair in itertools.combinations(ring, 2)}
    for cid in ring:
        facts += passed_tasks(cid, reviewer, 3, worked)
    for hour in range(days * 24):
        at = T0 + dt.timedelta(hours=hour)
        for (a, b), bond in bonds.items():
            bond.interacted(ctx(f"agent:{a}", at), f"{a}~{b}:{hour}", "message")
            facts.append(Fact("message", at, a, b))
            for rater, ratee in ((a, b), (b, a)):
                got = bond.rate(ctx(f"agent:{rater}", at), rater, ratee, "great")
                if got["counts"]:
                    facts.append(Fact("rating", at, rater, ratee, SCORES["great"]))
    return facts


def test_a_ring_rating_itself_great_for_30_days_gains_at_most_a_small_bound():
    ring, honest, reviewer = [11, 12, 13, 14, 15], 20, 30
    now = T0 + dt.timedelta(days=30)
    worked = now - dt.timedelta(hours=3)
    facts = ring_facts(ring, reviewer, 30, worked) + passed_tasks(honest, reviewer, 3, worked)
    r = rep.reputation(facts, now)
    honest_score = r[honest]["score"]
    assert honest_score is not None
    for cid in ring:
        assert r[cid]["score"] - honest_score <= RING_GAIN_BOUND, (cid, r[cid], honest_score)
    # a ring with no honest work at all lends itself nothing: it stays unrated
    bare = [f for f in ring_facts(ring, reviewer, 30, worked) if f.kind != "work"]
    assert all(rep.reputation(bare, now)[cid]["score"] is None for cid in ring)
    # the owner's word outweighs the ring
    judged = facts + [Fact("owner", now, None, 11, passed=False)]
    assert rep.reputation(judged, now)[11]["score"] < honest_score - 20
