"""The board's rules, on the aggregate alone: numbering, the capacity drop, mentions, replies, pausing
and the mentions a resume releases; a refusal records nothing."""

from __future__ import annotations

import datetime as dt

import pytest

from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.board import (
    BOARD_CAPACITY,
    MAX_POST_CHARS,
    Board,
    BoardMarker,
    Member,
    mentions_in,
    named,
)

AT = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
OWNER = Context("owner", AT, "c1")
ROSTER = [Member(3, "Ann", "builder"), Member(4, "Bob Lee", "builder"), Member(5, None, "reviewer"),
          Member(6, "Orla", "orchestrator")]


def agent(cid: int) -> Context:
    return Context(f"agent:{cid}", AT, "c2")


def new_board() -> Board:
    b = Board.open(OWNER)
    b.collect_events()
    return b


def test_posts_are_numbered_and_the_oldest_is_dropped_when_the_board_is_full():
    b = new_board()
    numbers = [b.post(OWNER, f"note {i}", None, None, []) for i in range(BOARD_CAPACITY)]
    assert numbers[0] == "p1" and numbers[-1] == f"p{BOARD_CAPACITY}" and len(b.live) == BOARD_CAPACITY
    b.collect_events()
    assert b.post(OWNER, "one more", None, None, []) == f"p{BOARD_CAPACITY + 1}"
    kinds = [type(e).__qualname__ for e in b.collect_events()]
    assert kinds == ["Board.Dropped", "Board.Posted"]
    assert len(b.live) == BOARD_CAPACITY and not b.holds("p1") and b.holds("p2")
    with pytest.raises(Refusal) as e:
        b.reply(OWNER, "p1", "too late", [])
    assert e.value.code == "no_post"


def test_a_mention_names_an_agent_by_name_or_role_and_all_everyone():
    assert mentions_in("hi @Ann and @ann, mail x@y.z, @all.") == ["ann", "all"]
    assert named("@ann please", ROSTER, None, None) == [3]
    assert named("@bob-lee and @reviewer", ROSTER, None, None) == [4, 5]
    assert named("@builder", ROSTER, None, 3) == [4]  # every builder but the author
    assert named("@all", ROSTER, None, 6) == [3, 4, 5]  # no project: every agent
    assert named("@all", ROSTER, [4, 5, 99], None) == [4, 5]  # a project: those on it
    assert named("@nobody here", ROSTER, None, None) == []


def test_a_project_board_knows_who_took_part():
    b = new_board()
    b.post(agent(3), "plan @bob-lee", "rel-9", None, [4])
    assert b.members_of("rel-9") == [3, 4] and b.members_of(None) is None and b.members_of("other") == []


def test_pausing_holds_mentions_and_resuming_releases_them_once():
    b = new_board()
    b.pause(OWNER, None)
    b.post(OWNER, "@ann look", None, None, [3])
    b.post(OWNER, "@bob-lee look", "rel-9", None, [4])
    b.pause(OWNER, "rel-9")
    assert b.reply(OWNER, "p1", "@bob-lee too", [4]) == 1
    released = b.resume(OWNER, None)  # the project stays paused: its post waits
    assert sorted(released) == ["p1", "p1.r1"] and released["p1"]["cids"] == [3]
    assert released["p1"]["text"] == "@ann look" and released["p1"]["by"] == "owner"
    assert list(b.pending) == ["p2"]
    assert b.resume(OWNER, "rel-9") == {"p2": {"cids": [4], "text": "@bob-lee look", "by": "owner"}}
    assert b.pending == {} and b.paused == []


def test_a_refusal_records_nothing():
    b = new_board()
    b.post(OWNER, "first", None, None, [])
    b.collect_events()
    for attempt, code in ((lambda: b.post(OWNER, "  ", None, None, []), "empty_message"),
                          (lambda: b.post(OWNER, "x" * (MAX_POST_CHARS + 1), None, None, []), "message_too_long"),
                          (lambda: b.post(OWNER, "x", "bad project!", None, []), "invalid_project"),
                          (lambda: b.reply(OWNER, "p9", "x", []), "no_post"),
                          (lambda: b.resume(OWNER, None), "no_change")):
        with pytest.raises(Refusal) as e:
            attempt()
        assert e.value.code == code
    b.pause(OWNER, None)
    b.collect_events()
    with pytest.raises(Refusal) as e:
        b.pause(OWNER, None)
    assert e.value.code == "no_change"
    assert b.collect_events() == [] and b.next == 2


def test_a_read_marker_only_moves_forward():
    m = BoardMarker.open(agent(3), 3)
    assert m.seen(agent(3), 4) and not m.seen(agent(3), 2) and not m.seen(agent(3), 4) and m.upto == 4
