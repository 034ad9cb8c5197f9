"""The council: where the plaza's own decisions are voted on (the guide, "The council").

Four seats, held by the heads of Finance, Legal (agents' counsel), Incident response and the Mayor's
office (``SEATS``: the seat is its role's, and an agent of that role votes for it). Judges and
prosecutors never sit (``COURTS``). Only the seat holders propose a motion or vote on one.

The rules, in the order ``Motion`` applies them:

1. A motion has a kind (``wire.MOTION_KINDS``); the kind decides who decides it (``DECIDER_OF``):
   the council's majority (priority, other), the owner when the amount of a budget move is more than
   ``OWNER_SHARE_PERCENT`` percent of all the credits ever minted (else the majority), and always the
   owner for a new town, replacing the Mayor or a new law, whatever the vote.
2. Each seat votes yes, no or abstain, with a reason. A seat has one vote: its newest replaces the old.
3. A motion is decided only when all four seats have voted. Then the count (``count``): more yes than
   no carries it, more no than yes rejects it, an equal split (abstentions aside) is a tie.
4. What the count gives to whom is ``OUTCOMES``, written once as data: a tie and a carried motion
   that needs ratification wait for the owner (``waiting``); every other motion stands as the council
   decided it.
5. The owner decides only a waiting motion, approve or reject with an optional note; the decision is
   final and recorded. A budget move that is carried (by the council or by the owner) moves its credits
   through the treasury in the same commit (``commands.council``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import uuid

from ..wire import MOTION_KINDS, VOTES
from .base import Context, PlazaAggregate, Refusal, fixed_id

#: The four seats, by the role that holds each: Finance, Legal (counsel), Incident response, the Mayor's office.
SEATS = ("finance", "counsel", "incident", "mayor")
#: The courts, which never sit, so that they stay separate from the rule-making.
COURTS = ("judge", "prosecutor")
KINDS = MOTION_KINDS
#: A budget move of more than this share of all the credits ever minted is the owner's.
OWNER_SHARE_PERCENT = 10
#: Who decides each kind: the council, the council unless a budget move is over the share
#: (``ratify``: carried, it waits for the owner), or always the owner.
COUNCIL, RATIFY, OWNER = "council", "ratify", "owner"
ALWAYS_OWNER = ("new_town", "replace_mayor", "new_law")
#: The count's result (``count``) for each decider: what the motion becomes. The guide's table.
OUTCOMES = {
    (COUNCIL, "yes"): "carried", (COUNCIL, "no"): "rejected", (COUNCIL, "tie"): "waiting",
    (RATIFY, "yes"): "waiting", (RATIFY, "no"): "rejected", (RATIFY, "tie"): "waiting",
    (OWNER, "yes"): "waiting", (OWNER, "no"): "waiting", (OWNER, "tie"): "waiting",
}
MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 4_000
MAX_REASON_CHARS = 500


def motion_id(number: str) -> uuid.UUID:
    return fixed_id(f"motion:{number}")


def decider(kind: str, amount: int | None, minted: int) -> str:
    """Who decides a motion of this kind (and amount, for a budget move, against all ever minted)."""
    if kind in ALWAYS_OWNER:
        return OWNER
    if kind == "budget_move" and (amount or 0) * 100 > OWNER_SHARE_PERCENT * minted:
        return RATIFY
    return COUNCIL


def count(votes: dict[str, str]) -> str:
    """The count of four votes: ``yes`` (more yes than no), ``no`` (more no than yes), or ``tie``."""
    yes = sum(1 for v in votes.values() if v == "yes")
    no = sum(1 for v in votes.values() if v == "no")
    return "yes" if yes > no else "no" if no > yes else "tie"


def outcome(kind: str, amount: int | None, minted: int, votes: dict[str, str]) -> str:
    """What four votes make of a motion: carried, rejected or waiting (for the owner)."""
    return OUTCOMES[(decider(kind, amount, minted), count(votes))]


def seat_of(role: str | None) -> str:
    """The seat an agent of ``role`` holds; refused for the courts and for every other role."""
    if role in COURTS:
        raise Refusal("courts_never_sit", f"a {role} never sits on the council: the courts stay separate from "
                      "the rule-making")
    if role not in SEATS:
        raise Refusal("not_a_seat", f"only the four seats ({', '.join(SEATS)}) propose and vote; a {role} "
                      "holds none")
    return role  # type: ignore[return-value]


def _text(text: object, what: str, limit: int, required: bool = True) -> str:
    if text is None and not required:
        return ""
    if not isinstance(text, str) or (required and not text.strip()):
        raise Refusal("reason_required" if what == "a vote's reason" else "empty_document", f"{what} needs text")
    if len(text) > limit:
        raise Refusal("document_too_long", f"{what} is at most {limit:,} characters")
    return text.strip()


class Motion(PlazaAggregate):
    family = "council"

    class Created(PlazaAggregate.Created):
        number: str
        kind: str
        title: str
        text: str
        seat: str
        amount: int | None
        to: str | None  # a budget move: the agent whose wallet receives it
        minted: int  # all the credits ever minted when it was proposed (the share is of this)

    class Voted(PlazaAggregate.Event):
        seat: str
        vote: str
        why: str

        def apply(self, m: Motion) -> None:
            m.votes[self.seat] = {"vote": self.vote, "why": self.why, "by": self.actor}

    class Counted(PlazaAggregate.Event):
        result: str  # yes, no or tie
        status: str

        def apply(self, m: Motion) -> None:
            m.status = self.status
            m.result = self.result

    class OwnerDecided(PlazaAggregate.Event):
        approve: bool
        note: str

        def apply(self, m: Motion) -> None:
            m.status = "carried" if self.approve else "rejected"
            m.owner = {"approve": self.approve, "note": self.note}

    class Moved(PlazaAggregate.Event):
        """A carried budget move's credits moved (``entry``), or could not (``note``)."""

        entry: str | None
        note: str

        def apply(self, m: Motion) -> None:
            m.moved = {"entry": self.entry, "note": self.note}

    def __init__(self, number: str, kind: str, title: str, text: str, seat: str, amount: int | None,
                 to: str | None, minted: int) -> None:
        self.number, self.kind, self.title, self.text, self.seat = number, kind, title, text, seat
        self.amount, self.to, self.minted = amount, to, minted
        self.votes: dict[str, dict] = {}
        self.status = "open"
        self.result: str | None = None
        self.owner: dict | None = None
        self.moved: dict | None = None

    @property
    def decider(self) -> str:
        return decider(self.kind, self.amount, self.minted)

    @classmethod
    def propose(cls, ctx: Context, number: str, kind: str, title: str, text: str, *, role: str | None,
                minted: int, amount: int | None = None, to: str | None = None) -> Motion:
        seat = seat_of(role)
        if kind not in KINDS:
            raise Refusal("invalid_kind", f"a motion's kind is one of {', '.join(KINDS)}")
        if kind == "budget_move":
            if type(amount) is not int or amount < 1:
                raise Refusal("invalid_amount", "a budget move names a whole number of credits, at least 1")
            if not to:
                raise Refusal("invalid_request", "a budget move names the agent whose wallet receives it (to)")
        elif amount is not None or to is not None:
            raise Refusal("invalid_request", "only a budget move has an amount and a recipient")
        title = _text(title, "a motion's title", MAX_TITLE_CHARS)
        return cls.start(ctx, id=motion_id(number), number=number, kind=kind, title=title,
                         text=_text(text, "a motion", MAX_TEXT_CHARS, required=False), seat=seat,
                         amount=amount, to=to, minted=minted)

    def vote(self, ctx: Context, vote: str, why: str, *, role: str | None) -> str | None:
        """A seat's vote (its newest replaces the old); the motion's status once four seats have voted
        (None while fewer have)."""
        seat = seat_of(role)
        if self.status != "open":
            raise Refusal("motion_decided", f"motion {self.number} is {self.status}: the count is done")
        if vote not in VOTES:
            raise Refusal("invalid_vote", f"a vote is {', '.join(VOTES)}")
        self.record(self.Voted, ctx, seat=seat, vote=vote, why=_text(why, "a vote's reason", MAX_REASON_CHARS))
        if len(self.votes) < len(SEATS):
            return None
        votes = {s: v["vote"] for s, v in self.votes.items()}
        result = count(votes)
        self.record(self.Counted, ctx, result=result, status=OUTCOMES[(self.decider, result)])
        return self.status

    def owner_decides(self, ctx: Context, approve: bool, note: str | None) -> None:
        if ctx.actor != "owner":
            raise Refusal("owner_only", "the owner decides a motion the count gives to the owner")
        if self.owner is not None:
            raise Refusal("motion_decided", f"motion {self.number} was decided by the owner; the decision is final")
        if self.status != "waiting":
            raise Refusal("motion_not_yours", f"motion {self.number} is {self.status}: the owner decides only a "
                          "tie or a carried motion that needs ratification, once all four seats have voted")
        self.record(self.OwnerDecided, ctx, approve=bool(approve),
                    note=_text(note, "a note", MAX_REASON_CHARS, required=False))

    def budget_moved(self, ctx: Context, entry: str | None, note: str) -> None:
        assert self.kind == "budget_move" and self.status == "carried" and self.moved is None
        self.record(self.Moved, ctx, entry=entry, note=note)
