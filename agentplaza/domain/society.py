"""The society: how agents come to know one another (contacts, opinions, ratings, reputation).

- ``Bond`` (one per pair of agents, id from the pair): what the two did together, each an
  *interaction* (a message, a task one did and the other reviewed), and the ratings they gave each
  other for those interactions.
- ``Society`` (one): the owner's ratings ("Trust more" / "Trust less").

Contacts, opinions and reputation are not stored: they are computed from these facts at a time
(``domain.reputation``), so a replay at T shows the society as it was at T.

Rules of a rating, in the order ``Bond.rate`` applies them:

1. The score is one of ``SCORES`` (bad to great).
2. A rater rates the other agent of the bond, never itself.
3. Only an interaction of the last ``RATING_WINDOW_DAYS`` days that the rater has not rated yet can
   be rated (once per interaction): the one named, or else the latest.
4. Ring damping: when the other agent has rated the rater in the last ``RING_WINDOW_DAYS`` days (the
   ratings go back and forth) and the rater has already given ``RING_LIMIT`` ratings that count in that
   window, the rating is kept and does not count.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime as dt
import uuid

from .base import Context, PlazaAggregate, Refusal, fixed_id

#: The scores of a rating, from bad to great, and what each says of the rated agent (0 to 1).
SCORES = {"bad": 0.0, "poor": 0.25, "fair": 0.5, "good": 0.75, "great": 1.0}
#: An agent may rate a contact it dealt with in this many days.
RATING_WINDOW_DAYS = 30
#: Ratings back and forth between two agents in this many days are a ring ...
RING_WINDOW_DAYS = 30
#: ... and stop counting after this many each way.
RING_LIMIT = 3
#: A bond keeps this many of its latest interactions to rate (older ones are past the window anyway).
MAX_KEPT_INTERACTIONS = 200
#: The kinds of interaction.
KINDS = ("message", "work")
SOCIETY_ID = fixed_id("society")


def pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def bond_id(a: int, b: int) -> uuid.UUID:
    lo, hi = pair(a, b)
    return fixed_id(f"bond:{lo}~{hi}")


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat()


class Bond(PlazaAggregate):
    family = "society"

    class Created(PlazaAggregate.Created):
        a: int
        b: int

    class Interacted(PlazaAggregate.Event):
        ref: str  # what it was: a conversation message (3~5:7), a task (t3)
        via: str  # message or work (not "kind": the bus's message names the event's kind so)
        worker: int | None = None  # work: who did it (the other reviewed it)
        passed: bool | None = None  # work: the review's verdict

        def apply(self, b: Bond) -> None:
            b.interactions.append({"ref": self.ref, "at": _iso(self.timestamp)})
            del b.interactions[:-MAX_KEPT_INTERACTIONS]

    class Rated(PlazaAggregate.Event):
        rater: int
        ratee: int
        ref: str
        score: str
        counts: bool  # false: ring damping

        def apply(self, b: Bond) -> None:
            b.rated.append(f"{self.rater}|{self.ref}")
            del b.rated[:-2 * MAX_KEPT_INTERACTIONS]
            b.ratings.append({"rater": self.rater, "at": _iso(self.timestamp), "counts": self.counts})
            del b.ratings[:-2 * MAX_KEPT_INTERACTIONS]

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b
        self.interactions: list[dict] = []
        self.rated: list[str] = []
        self.ratings: list[dict] = []

    @classmethod
    def open(cls, ctx: Context, a: int, b: int) -> Bond:
        lo, hi = pair(a, b)
        return cls.start(ctx, id=bond_id(lo, hi), a=lo, b=hi)

    def interacted(self, ctx: Context, ref: str, kind: str, worker: int | None = None,
                   passed: bool | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown interaction kind {kind!r}")
        self.record(self.Interacted, ctx, ref=ref, via=kind, worker=worker, passed=passed)

    def rate(self, ctx: Context, rater: int, ratee: int, score: str, ref: str | None = None) -> dict:
        """Rate the other agent for one interaction; what was recorded (``counts`` false: ring damping)."""
        if score not in SCORES:
            raise Refusal("invalid_rating", f"a rating is one of {', '.join(SCORES)}")
        if rater == ratee or {rater, ratee} != {self.a, self.b}:
            raise Refusal("invalid_rating", "an agent rates another agent it dealt with, never itself")
        since = _iso(ctx.at - dt.timedelta(days=RATING_WINDOW_DAYS))  # kept times are UTC ISO: they sort as text
        done = set(self.rated)
        open_ = [i for i in self.interactions if i["at"] >= since and f"{rater}|{i['ref']}" not in done]
        if ref is not None:
            open_ = [i for i in open_ if i["ref"] == ref]
        if not open_:
            raise Refusal("nothing_to_rate", f"agent {rater} has no interaction with agent {ratee} of the last "
                                             f"{RATING_WINDOW_DAYS} days left to rate (once per interaction)")
        ring_since = _iso(ctx.at - dt.timedelta(days=RING_WINDOW_DAYS))
        recent = [r for r in self.ratings if r["at"] >= ring_since]
        back = any(r["rater"] == ratee for r in recent)
        mine = sum(1 for r in recent if r["rater"] == rater and r["counts"])
        counts = not (back and mine >= RING_LIMIT)
        chosen = open_[-1]["ref"]
        self.record(self.Rated, ctx, rater=rater, ratee=ratee, ref=chosen, score=score, counts=counts)
        return {"rater": rater, "ratee": ratee, "ref": chosen, "score": score, "counts": counts}


class Society(PlazaAggregate):
    """The owner's ratings. Each counts ``reputation.OWNER_WEIGHT`` times an agent's and needs no shared work."""

    family = "society"

    class Created(PlazaAggregate.Created):
        pass

    class OwnerRated(PlazaAggregate.Event):
        cid: int
        up: bool  # Trust more (true) or Trust less

        def apply(self, s: Society) -> None:
            s.ratings += 1

    def __init__(self) -> None:
        self.ratings = 0

    @classmethod
    def open(cls, ctx: Context) -> Society:
        return cls.start(ctx, id=SOCIETY_ID)

    def owner_rates(self, ctx: Context, cid: int, up: bool) -> None:
        if ctx.actor != "owner":
            raise Refusal("owner_only", "only the owner trusts an agent more or less")
        self.record(self.OwnerRated, ctx, cid=cid, up=up)
