"""The base every aggregate of the plaza stands on.

Each event carries who did it (``actor``), why (``reason``, where a person gave
one) and the ``correlation_id`` of the command that caused it; ``timestamp`` is
the library's field, always given by the caller from an injected clock, never
read from the wall here.  A command that cannot be done raises ``Refusal``
before any event is triggered, so a refusal changes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import typing
import uuid
from dataclasses import dataclass

from eventsourcing.domain import Aggregate

from .. import dataclass_code
from .refusals import kind_of

dataclass_code.share()  # before any of the plaza's event classes is made

#: Who can act: the owner, an agent by its CID, a node, the hub itself, a token.
ACTOR_KINDS = ("owner", "agent", "node", "hub", "token")
#: Longest reason a person may give (the guide's banners show it whole).
MAX_REASON_CHARS = 500


class Refusal(Exception):
    """A rule said no. ``code`` is stable and names its kind in ``refusals.CATALOGUE``;
    ``message`` is for a person."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.kind = kind_of(code)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Context:
    """Who, when and why for one command; passed down to every decision."""

    actor: str
    at: dt.datetime
    correlation_id: str
    reason: str | None = None

    def __post_init__(self) -> None:
        kind = self.actor.split(":", 1)[0]
        if kind not in ACTOR_KINDS:
            raise Refusal("invalid_actor", f"unknown actor {self.actor!r}")
        if self.at.tzinfo is None or self.at.utcoffset() != dt.timedelta(0):
            raise ValueError("command time must be UTC")
        if self.reason is not None and len(self.reason) > MAX_REASON_CHARS:
            raise Refusal(
                "reason_too_long", f"a reason is at most {MAX_REASON_CHARS} characters"
            )


#: Singleton ids remembered (a name's id never changes): the treasury's accounts are looked up by
#: name on every model call, and a UUID5 is a SHA-1.
FIXED_IDS_CACHED = 4096


@functools.lru_cache(maxsize=FIXED_IDS_CACHED)
def fixed_id(name: str) -> uuid.UUID:
    """The id of a singleton aggregate (the plaza, the treasury's budget ...)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:{name}")


_BASE_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}
_validators: dict[type, typing.Callable[[dict], None]] = {}


def _validator_for(event_class: type) -> typing.Callable[[dict], None]:
    """A pydantic check of an event's own fields, built once per event class."""
    found = _validators.get(event_class)
    if found is None:
        import pydantic

        hints = typing.get_type_hints(event_class)
        # A field with a default may be left out (an event stored before the field existed reads with it).
        fields = {
            f.name: (hints[f.name], ... if f.default is dataclasses.MISSING else f.default)
            for f in dataclasses.fields(event_class)
            if f.name not in _BASE_FIELDS
        }
        model = pydantic.create_model(
            f"{event_class.__qualname__}Payload",
            __config__=pydantic.ConfigDict(strict=True, extra="forbid"),
            **fields,
        )

        def found(kwargs: dict, model=model) -> None:
            model.model_validate(kwargs)

        _validators[event_class] = found
    return found


class PlazaAggregate(Aggregate):
    """An aggregate whose every event says who, when and why."""

    class Event(Aggregate.Event):
        actor: str
        reason: str | None
        correlation_id: str

    class Created(Event, Aggregate.Created):
        pass

    def record(self, event_class: type, ctx: Context, **fields: typing.Any) -> None:
        """Validate the payload, then trigger the event at the context's time."""
        payload = dict(fields, actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
        _validator_for(event_class)(payload)
        self.trigger_event(event_class, timestamp=ctx.at, **payload)

    @classmethod
    def start(cls, ctx: Context, *, id: uuid.UUID | None = None, **fields: typing.Any):
        """Create the aggregate; its Created event carries the context too."""
        payload = dict(fields, actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
        _validator_for(cls.Created)(payload)
        return cls._create(cls.Created, id=id, timestamp=ctx.at, **payload)
