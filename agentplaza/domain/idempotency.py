"""Idempotency keys: a request the owner repeats with the same ``Idempotency-Key`` is done once.

One ``IdempotencyKey`` aggregate per key (its id comes from the key's hash, so
two hubs on one database race for the same aggregate and only one wins).  Its
``Claimed`` event is written in the same commit as the first request's first
change, so a key is claimed exactly when something was done; its ``Answered``
event keeps that request's answer (status and body, sealed with a key only
the client's Idempotency-Key derives, because an answer may carry a token).

What a request with a claimed key gets, in the order ``verdict`` decides:

1. the claim is older than ``WINDOW``: the key is free again (``Reclaimed``);
2. another method, route or body than the first: refused, ``idempotency_key_reused`` (422);
3. answered: the first answer, status and body (nothing is done again);
4. not answered, claimed less than ``IN_FLIGHT`` ago: the first is still running, 409;
5. not answered and older: the first was done but its hub stopped before it answered; 409, and
   nothing is done again (a client's retry after a crash never doubles a mint).
"""

from __future__ import annotations

import datetime as dt
import uuid

from .base import Context, PlazaAggregate, Refusal, _validator_for

#: How long a key holds its first answer; after that the same key is a new request.
WINDOW = dt.timedelta(hours=24)
#: A claimed key with no answer yet is "in flight" this long; after that its answer is taken as lost.
IN_FLIGHT = dt.timedelta(minutes=2)

REPLAY, NEW = "replay", "new"


def key_id(key_sha256: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:idempotency:{key_sha256}")


class KeyTaken(Refusal):
    """The key was claimed by another request (found at commit time); the wrapper answers for it."""

    def __init__(self) -> None:
        super().__init__("idempotency_key_in_flight",
                         "a request with this Idempotency-Key is still running; ask again when it has answered")


class IdempotencyKey(PlazaAggregate):
    family = "idempotency"

    class Claimed(PlazaAggregate.Created):
        key_sha256: str
        fingerprint: str
        method: str
        path: str

    class Reclaimed(PlazaAggregate.Event):
        fingerprint: str
        method: str
        path: str

        def apply(self, k: IdempotencyKey) -> None:
            k.fingerprint, k.method, k.path = self.fingerprint, self.method, self.path
            k.reclaimed_at, k.answered, k.status, k.answer, k.positions = self.timestamp, False, None, None, []

    class Answered(PlazaAggregate.Event):
        status: int
        answer: str | None  # the sealed body, or None when it was too large to keep
        positions: list[int]

        def apply(self, k: IdempotencyKey) -> None:
            k.answered, k.status, k.answer, k.positions = True, self.status, self.answer, list(self.positions)

    def __init__(self, key_sha256: str, fingerprint: str, method: str, path: str) -> None:
        self.key_sha256, self.fingerprint, self.method, self.path = key_sha256, fingerprint, method, path
        self.reclaimed_at: dt.datetime | None = None
        self.answered = False
        self.status: int | None = None
        self.answer: str | None = None
        self.positions: list[int] = []

    @classmethod
    def claim(cls, ctx: Context, existing: IdempotencyKey | None, key_sha256: str, fingerprint: str,
              method: str, path: str) -> IdempotencyKey:
        """The key for a request about to change something; raises ``KeyTaken`` when it is not free."""
        if existing is None:
            payload = dict(key_sha256=key_sha256, fingerprint=fingerprint, method=method, path=path,
                           actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
            _validator_for(cls.Claimed)(payload)
            return cls._create(cls.Claimed, id=key_id(key_sha256), timestamp=ctx.at, **payload)
        if not existing.expired(ctx.at):
            raise KeyTaken()
        existing.record(cls.Reclaimed, ctx, fingerprint=fingerprint, method=method, path=path)
        return existing

    @property
    def claimed_at(self) -> dt.datetime:
        return self.reclaimed_at or self.created_on

    def expired(self, now: dt.datetime) -> bool:
        return now - self.claimed_at >= WINDOW

    def verdict(self, fingerprint: str, now: dt.datetime) -> str:
        """``NEW`` (the key is free), ``REPLAY`` (give the kept answer), or raise the refusal."""
        if self.expired(now):
            return NEW
        if fingerprint != self.fingerprint:
            raise Refusal("idempotency_key_reused",
                          f"this Idempotency-Key was used for another request ({self.method} {self.path} with "
                          "another body); use a new key for a new request")
        if self.answered:
            if self.answer is None:
                raise Refusal("idempotency_answer_not_kept",
                              f"the request with this Idempotency-Key was done (status {self.status}); its answer "
                              "was too large to keep, and nothing was done again")
            return REPLAY
        if now - self.claimed_at < IN_FLIGHT:
            raise KeyTaken()
        raise Refusal("idempotency_answer_lost",
                      "the request with this Idempotency-Key was done, but the hub stopped before it answered; "
                      "nothing was done again (see agentplaza events for what it did)")

    def answered_with(self, ctx: Context, status: int, answer: str | None, positions: list[int]) -> None:
        assert not self.answered, "a key is answered once per claim"
        self.record(self.Answered, ctx, status=status, answer=answer, positions=list(positions))
