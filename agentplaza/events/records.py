"""One stored event as the read side sees it: plain data, no domain objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class EventRecord(NamedTuple):
    """An immutable record (a named tuple: a rebuild makes one for every event of the log, and a frozen
    dataclass's ``__init__``, one ``object.__setattr__`` a field, was a fifth of decoding one)."""

    position: int
    originator_id: str
    version: int
    kind: str  # "Plaza.Held": the event class's qualified name
    family: str  # "plaza": what the live bus calls it
    at: str  # UTC, ISO 8601
    actor: str
    reason: str | None
    correlation_id: str
    data: dict[str, Any]

    def as_message(self) -> dict[str, Any]:
        """The live bus's message: {"event": family, "data": ...}."""
        return {
            "event": self.family,
            "data": {
                "kind": self.kind,
                "position": self.position,
                "id": self.originator_id,
                "version": self.version,
                "at": self.at,
                "actor": self.actor,
                "reason": self.reason,
                "correlation_id": self.correlation_id,
                **self.data,
            },
        }


#: The kind of the owner's event that voids an unreadable one (``agentplaza.domain.log``).
VOIDED_KIND = "Log.EventVoided"


class UnreadableEvent(Exception):
    """A stored event that the store's reader cannot read back (see ``storable``)."""

    def __init__(self, position: int, reason: str):
        super().__init__(f"the event at position {position} cannot be read: {reason}")
        self.position, self.reason = position, reason


@dataclass(frozen=True, slots=True)
class Unreadable:
    """One stored event that cannot be read, and the owner's voiding of it, if any."""

    position: int
    reason: str
    voided_at: int | None = None  # the position of the Log.EventVoided that voids it

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "reason": self.reason, "voided_at": self.voided_at}
