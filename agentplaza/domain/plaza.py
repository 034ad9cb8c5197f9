"""The plaza itself and its master switch, STOP ALL.

STOP ALL holds the whole plaza: no new work starts, model calls are refused,
and the hold records who pressed it, when and why.  RESUME releases it.  The
hold is an event, so a hub that restarts while held starts held.

"Is the plaza held?" has one answer, ``held(get)``: every part asks it (the runtime, the gateway,
the scheduler, the commands that start work through ``require_running(get)``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .base import Context, PlazaAggregate, Refusal, fixed_id

PLAZA_ID = fixed_id("plaza")
#: The message an agent's model call gets while the plaza is held.
HELD_MESSAGE = "the plaza is held (STOP ALL)"


class Plaza(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        name: str

    class Held(PlazaAggregate.Event):
        def apply(self, plaza: Plaza) -> None:
            plaza.held = True
            plaza.held_since = self.timestamp
            plaza.held_by = self.actor
            plaza.held_reason = self.reason

    class Resumed(PlazaAggregate.Event):
        def apply(self, plaza: Plaza) -> None:
            plaza.held = False
            plaza.held_since = self.timestamp
            plaza.held_by = self.actor
            plaza.held_reason = self.reason

    def __init__(self, name: str):
        self.name = name
        self.held = False
        self.held_since: dt.datetime | None = None
        self.held_by: str | None = None
        self.held_reason: str | None = None

    @classmethod
    def found(cls, ctx: Context, name: str = "plaza") -> Plaza:
        return cls.start(ctx, id=PLAZA_ID, name=name)

    def stop_all(self, ctx: Context) -> None:
        if ctx.reason is not None and not ctx.reason.strip():  # none is fine; a blank one is a slip
            raise Refusal("reason_required", "a reason for STOP ALL, when given, is not blank")
        if self.held:
            raise Refusal("plaza_held", f"the plaza is already held since {self.held_since:%Y-%m-%d %H:%M:%S} UTC by {self.held_by}")
        self.record(self.Held, ctx)

    def resume(self, ctx: Context) -> None:
        if not self.held:
            raise Refusal("plaza_running", "the plaza is not held")
        self.record(self.Resumed, ctx)



def held(get: Callable[[uuid.UUID], Any]) -> bool:
    """Is the plaza held (STOP ALL)? ``get`` gives what is known of ``PLAZA_ID``: the store's or a unit's
    ``get`` (the ``Plaza``), or a read model's (its ``rm_plaza`` row, a mapping with ``held``). A plaza not
    founded yet is not held."""
    found = get(PLAZA_ID)
    if found is None:
        return False
    return bool(found["held"] if isinstance(found, Mapping) else found.held)


def require_running(get: Callable[[uuid.UUID], Any]) -> None:
    """Every action that starts work calls this first: refused ``plaza_held`` while the plaza is held."""
    if held(get):
        raise Refusal("plaza_held", HELD_MESSAGE)
