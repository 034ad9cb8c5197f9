"""The catalogue of event kinds, and the fast decoding of stored events.

A stored event's ``topic`` names its class ("agentplaza.domain.plaza:Plaza.Held").
Its *kind* is the class's qualified name ("Plaza.Held") and its *family* the
aggregate's ``family`` attribute, else the aggregate's lower-cased name
("plaza"); the live bus and ``agentplaza events --kinds`` filter on families.

Schema changes: an event class that changes sets ``class_version = N`` and
defines ``upcast_v{N-1}_v{N}(state)`` static methods.  The library's mapper
applies them when an aggregate is loaded, and ``record`` applies the very same
methods here, so projections and replay see one schema.
"""

from __future__ import annotations

import functools
from collections.abc import Container, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.utils import resolve_topic

from .joined import Separator, read_objects
from .records import EventRecord, UnreadableEvent
from .storable import StateProblem, read_back

#: ``EventRecord``'s fields in order, without the call of its generated ``__new__`` (a rebuild makes one an event).
_new_record = tuple.__new__
_META = ("actor", "reason", "correlation_id")
_HIDDEN = ("timestamp", "originator_topic", "class_version")
#: How the transcoder's wrapper names its type in the stored bytes (a string holding it is escaped: \\").
_TYPE_KEY = b'"_type_"'


@functools.cache
def describe(topic: str) -> tuple[str, str, type | None]:
    """(kind, family, event class or None) for a topic; unknown topics still read."""
    module, _, qualname = topic.partition(":")
    kind = qualname or topic
    outer = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
    family = outer.lower()
    event_class = None
    try:
        event_class = resolve_topic(topic)
        aggregate = resolve_topic(f"{module}:{outer}")
        family = getattr(aggregate, "family", family)
    except Exception:  # an event class removed from the code stays readable
        pass
    return kind, family, event_class


@functools.cache
def upcast_target(topic: str) -> int:
    """The ``class_version`` a topic's stored states are upcast to (1 for a class with no upcasters,
    and for a class the code no longer has)."""
    event_class = describe(topic)[2]
    return 1 if event_class is None else getattr(event_class, "class_version", 1)


def upcast(event_class: type | None, state: dict[str, Any]) -> None:
    if event_class is None:
        state.pop("class_version", None)
        return
    target = getattr(event_class, "class_version", 1)
    version = state.pop("class_version", 1)
    while version < target:
        getattr(event_class, f"upcast_v{version}_v{version + 1}")(state)
        version += 1


def _plain(value: Any) -> Any:
    # The library's transcoder wraps typed values as {"_type_": ..., "_data_": ...}.
    if type(value) is dict and "_type_" in value and "_data_" in value:
        return value["_data_"]
    return value


def decode_state(topic: str, state: bytes) -> dict[str, Any]:
    data = read_back(state)
    upcast(describe(topic)[2], data)
    return data


def check_readable(position: int, originator_id: Any, version: int, topic: str, state: bytes) -> None:
    """Raises ``UnreadableEvent`` exactly when ``record`` would, without building the record
    (``audit verify`` asks this of every stored event)."""
    try:
        data = read_back(state)
        if upcast_target(topic) > 1:  # a class at version 1 has no upcaster that could fail
            upcast(describe(topic)[2], data)
    except StateProblem as e:
        raise UnreadableEvent(position, str(e)) from None
    except Exception as e:  # noqa: BLE001 - an upcaster that cannot read an old state
        raise UnreadableEvent(position, f"it cannot be upcast ({type(e).__name__})") from None


def record(position: int, originator_id: Any, version: int, topic: str, state: bytes) -> EventRecord:
    """The stored event as a record; raises ``UnreadableEvent`` for one the reader cannot read back."""
    try:
        data = read_back(state)
    except StateProblem as e:
        raise UnreadableEvent(position, str(e)) from None
    except Exception as e:  # noqa: BLE001 - as ``check_readable`` words it
        raise UnreadableEvent(position, f"it cannot be upcast ({type(e).__name__})") from None
    return _assemble(position, originator_id, version, topic, state, data)


def records(rows: Sequence[tuple], sep: Separator,
            wanted: Container[str] | None = None) -> list[EventRecord | UnreadableEvent | None]:
    """``record`` of each stored row, or the ``UnreadableEvent`` it raises, their states read in one call
    (``joined.read_objects``, joined by ``sep``: a rebuild reads every state of the log).  Each is read alone where
    that one read does not prove them all.  With ``wanted``, a row whose topic it does not hold is only checked:
    None when it reads (its record is not made), else its ``UnreadableEvent``."""
    states = [r[4] for r in rows]
    read = read_objects(states, sep) if all(type(s) is bytes for s in states) else None
    if read is None:
        if wanted is None:
            return [_record_or_why(r) for r in rows]
        return [_record_or_why(r) if r[3] in wanted else _why(r) for r in rows]
    values, exact = read
    out: list[EventRecord | UnreadableEvent | None] = []
    add = out.append
    for i, (row, data) in enumerate(zip(rows, values, strict=True)):
        if wanted is not None and row[3] not in wanted:
            add(_why(row) if i in exact or upcast_target(row[3]) > 1 else None)
        elif i in exact:  # read again alone, value by value
            add(_record_or_why(row))
        else:
            try:
                add(_assemble(*row, data))
            except UnreadableEvent as e:
                add(e)
    return out


def _why(row: tuple) -> UnreadableEvent | None:
    """None when the stored row reads (``check_readable``: no record made), else why not."""
    try:
        check_readable(*row)
    except UnreadableEvent as e:
        return e
    return None


def _record_or_why(row: tuple) -> EventRecord | UnreadableEvent:
    try:
        return record(*row)
    except UnreadableEvent as e:
        return e


def _assemble(position: int, originator_id: Any, version: int, topic: str, state: bytes,
              data: dict[str, Any]) -> EventRecord:
    """The record of a stored event whose state ``data`` was read back: upcast, its metadata taken out."""
    kind, family, event_class = describe(topic)
    if upcast_target(topic) > 1:  # else nothing to upcast (the payload leaves class_version out)
        try:
            upcast(event_class, data)
        except Exception as e:  # noqa: BLE001 - an upcaster that cannot read an old state
            raise UnreadableEvent(position, f"it cannot be upcast ({type(e).__name__})") from None
    # The state's own dict becomes the payload (a rebuild decodes every event here): the metadata popped,
    # then the transcoder's {"_type_", "_data_"} wrappers unwrapped (``_plain`` inline).  Only the timestamp
    # is wrapped in most states: when the stored bytes name "_type_" no more often than that, nothing is left
    # to unwrap and the walk over the values is skipped.
    pop = data.pop
    at = pop("timestamp", None)
    wrapped = type(at) is dict and "_type_" in at and "_data_" in at
    if wrapped:
        at = at["_data_"]
    pop("originator_topic", None)
    pop("class_version", None)
    actor, reason, correlation_id = pop("actor", None), pop("reason", None), pop("correlation_id", None)
    if type(state) is not bytes or state.count(_TYPE_KEY) > wrapped:
        for k, v in data.items():
            if type(v) is dict and "_type_" in v and "_data_" in v:
                data[k] = v["_data_"]
    oid = originator_id.hex if isinstance(originator_id, UUID) else str(originator_id)
    return _new_record(EventRecord, (position, oid, version, kind, family, at, actor, reason, correlation_id, data))
