"""The council's count as a property: for every combination of four votes, every motion kind and
amount, what the motion becomes equals the guide's table (``council.OUTCOMES``, written once as data);
the newest vote of a seat replaces the old; nothing is decided before four seats have voted; a
budget move above 10 % of all the credits ever minted waits for the owner when it carries."""

from __future__ import annotations

import datetime as dt
import itertools

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from agentplaza.domain import council as c
from agentplaza.domain.base import Context, Refusal
from agentplaza.sim.invariants import council_outcome

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
MINTED = 100_000


def ctx(actor: str = "agent:7") -> Context:
    return Context(actor=actor, at=T0, correlation_id="x")


def motion(kind: str, amount: int | None) -> c.Motion:
    return c.Motion.propose(ctx(), "m1", kind, "a motion", "why", role="finance", minted=MINTED,
                            amount=amount, to="3" if kind == "budget_move" else None)


def expected(kind: str, amount: int | None, votes: tuple[str, ...]) -> str:
    """The guide, read directly (the simulator's invariant reads it the same way: one reading)."""
    return council_outcome(kind, amount, MINTED, votes)


kinds = st.sampled_from(c.KINDS)
amounts = st.sampled_from([1, MINTED // 10 - 1, MINTED // 10, MINTED // 10 + 1, MINTED, 7_777])
four = st.tuples(*[st.sampled_from(("yes", "no", "abstain"))] * 4)


@settings(max_examples=400, deadline=None)
@given(kind=kinds, amount=amounts, votes=four, earlier=st.lists(st.tuples(st.sampled_from(c.SEATS),
                                                                          st.sampled_from(("yes", "no", "abstain")))))
def test_the_count_of_four_votes_is_the_guides_table(kind, amount, votes, earlier):
    amount = amount if kind == "budget_move" else None
    m = motion(kind, amount)
    # earlier votes by some seats, replaced by each seat's newest; never all four before the last round
    for seat, v in earlier:
        if len(set(m.votes) | {seat}) == len(c.SEATS):
            continue
        assert m.vote(ctx(), v, "because", role=seat) is None
        assert m.status == "open"
    wanted = dict(zip(c.SEATS, votes, strict=True))
    order = sorted(c.SEATS, key=lambda s: s not in m.votes)  # replace the earlier votes first, then complete
    for seat in order:
        status = m.vote(ctx(), wanted[seat], "because", role=seat)
        if len(m.votes) < len(c.SEATS):
            assert status is None and m.status == "open", "decided before four seats voted"
    assert {s: m.votes[s]["vote"] for s in c.SEATS} == wanted, "the newest vote counts"
    assert m.status == expected(kind, amount, votes)


def test_every_cell_of_the_table_is_reached():
    seen = set()
    for kind, votes in itertools.product(c.KINDS, itertools.product(("yes", "no", "abstain"), repeat=4)):
        for amount in (1, MINTED):
            a = amount if kind == "budget_move" else None
            seen.add((c.decider(kind, a, MINTED), c.count(dict(zip(c.SEATS, votes, strict=True)))))
    assert seen == set(c.OUTCOMES)


def test_a_budget_move_over_a_tenth_of_all_minted_waits_for_the_owner_when_carried():
    for amount, status in ((MINTED // 10, "carried"), (MINTED // 10 + 1, "waiting")):
        m = motion("budget_move", amount)
        for seat in c.SEATS:
            m.vote(ctx(), "yes", "fits the plan", role=seat)
        assert m.status == status


@pytest.mark.parametrize("role,code", [("judge", "courts_never_sit"), ("prosecutor", "courts_never_sit"),
                                       ("builder", "not_a_seat"), ("orchestrator", "not_a_seat"), (None, "not_a_seat")])
def test_only_seat_holders_propose_or_vote_and_the_courts_never_sit(role, code):
    with pytest.raises(Refusal) as e:
        c.Motion.propose(ctx(), "m1", "priority", "x", "", role=role, minted=MINTED)
    assert e.value.code == code
    m = motion("priority", None)
    with pytest.raises(Refusal) as e:
        m.vote(ctx(), "yes", "because", role=role)
    assert e.value.code == code and m.votes == {}


def test_a_vote_needs_a_reason_and_is_yes_no_or_abstain_and_the_owner_decides_only_what_the_count_gives():
    m = motion("other", None)
    for vote, why, code in (("yes", "  ", "reason_required"), ("maybe", "x", "invalid_vote")):
        with pytest.raises(Refusal) as e:
            m.vote(ctx(), vote, why, role="finance")
        assert e.value.code == code and m.votes == {}
    with pytest.raises(Refusal) as e:
        m.owner_decides(ctx("owner"), True, None)
    assert e.value.code == "motion_not_yours"
    for seat, v in zip(c.SEATS, ("yes", "yes", "no", "no"), strict=True):
        m.vote(ctx(), v, "because", role=seat)
    assert m.status == "waiting"
    with pytest.raises(Refusal) as e:
        m.vote(ctx(), "yes", "again", role="finance")
    assert e.value.code == "motion_decided"
    m.owner_decides(ctx("owner"), False, "not now")
    assert m.status == "rejected" and m.owner == {"approve": False, "note": "not now"}
    with pytest.raises(Refusal) as e:
        m.owner_decides(ctx("owner"), True, None)
    assert e.value.code == "motion_decided"
