"""The log's own record of the owner's decisions about it: voiding an unreadable event.

The log is append-only: an event that cannot be read back (a damaged disk, an
older hub that wrote one) is never edited or removed.  The owner voids it
instead: ``Log.EventVoided`` names its position and why, and says that the
plaza goes on without it.  The read models step over an unreadable event
whether voided or not; voiding is the owner's word that it was seen and
accepted, so the hub stops warning about it at start and ``overview`` shows it
as voided (see docs/operations.md, "A damaged event in the log").

Rules, in the order ``void`` applies them:

1. A reason is given (it is the log's only account of the gap).
2. Only an event the store says is unreadable can be voided: a readable event
   is history, and no decision of the owner takes it back.
3. A position is voided once.
"""

from __future__ import annotations

from .base import Context, PlazaAggregate, Refusal, fixed_id

LOG_ID = fixed_id("log")


class Log(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        pass

    class EventVoided(PlazaAggregate.Event):
        position: int

        def apply(self, log: Log) -> None:
            log.voided.append(self.position)

    def __init__(self) -> None:
        self.voided: list[int] = []

    @classmethod
    def open(cls, ctx: Context) -> Log:
        return cls.start(ctx, id=LOG_ID)

    def void(self, ctx: Context, position: int, unreadable_because: str | None) -> None:
        if not ctx.reason or not ctx.reason.strip():
            raise Refusal("reason_required", "voiding an event needs a reason")
        if unreadable_because is None:
            raise Refusal("event_readable", f"the event at position {position} reads back; only an unreadable "
                                            "event can be voided")
        if position in self.voided:
            raise Refusal("already_voided", f"the event at position {position} is already voided")
        self.record(self.EventVoided, ctx, position=position)
