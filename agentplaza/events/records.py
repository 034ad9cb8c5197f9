"""One stored event as the read side sees it: plain data, no domain objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class EventRecord:
    position: int
    originator_id: str
    version: int
    kind: str  # "Plaza.Held": the event class's qualified name
    family: str  # "plaza": what the live bus calls it
    at: str  # UTC, ISO 8601
    actor: str
    reason: str | None
    correlation_id: str
    data: dict[str, Any] = field(default_factory=dict)

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
