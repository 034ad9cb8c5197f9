"""Running a command: one unit of work that loads, decides, commits, and retries when another
writer won.

A command's decision is a function of one ``Unit``: it loads the aggregates it needs with
``unit.get`` (the same object each time in one unit, so several decisions made in one unit see
each other's changes), asks them to decide (they raise ``Refusal`` or trigger events), names what
it changed with ``unit.add`` and returns a value.  ``Commands.run`` commits everything added
atomically and returns ``Done(value, positions)``.  On a conflict it runs the whole decision
again on a fresh unit, so a decision is never made on stale data; a refusal is confirmed on fresh
state before it is reported, so a hub whose cache is behind another hub's writes never refuses
wrongly.  Retries in one process take turns (one lock), so many commands fighting over one
aggregate all get through instead of starving.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..domain.base import Context, Refusal
from ..domain.plaza import PLAZA_ID
from ..events.committer import CommitConflict
from ..events.store import EventStore

#: Times a command is re-run after losing a race to another writer.
MAX_RETRIES = 50

Clock = Callable[[], dt.datetime]
T = TypeVar("T")


@dataclass(frozen=True)
class Done(Generic[T]):
    """What a command gives back: its value, and the positions of the events it wrote."""

    value: T
    positions: list[int]


#: Aggregates that many commands read and never change: no save of theirs would conflict with a
#: stale copy, so a unit reads them from the database every time. The plaza's hold: a STOP ALL
#: made on another hub (or another store handle) holds this hub's next command at once.
GUARDS = frozenset({PLAZA_ID})


class Unit:
    """One unit of work: the aggregates a command loads and the ones it changes, saved together."""

    def __init__(self, store: EventStore):
        self.store = store
        self._loaded: dict[uuid.UUID, Any] = {}
        self._changed: dict[int, Any] = {}

    def get(self, aggregate_id: uuid.UUID) -> Any | None:
        """The aggregate, loaded once per unit (None when there is none); a guard from the database."""
        if aggregate_id not in self._loaded:
            self._loaded[aggregate_id] = self.store.get(aggregate_id, fresh=aggregate_id in GUARDS)
        return self._loaded[aggregate_id]

    def add(self, *aggregates: Any) -> None:
        """These are to be saved with the unit (a new aggregate, or one loaded and changed)."""
        for a in aggregates:
            if a is None:
                continue
            held = self._loaded.get(a.id)
            if held is None:  # new here, or looked for before it was made: get() gives it from now on
                self._loaded[a.id] = a
            elif held is not a:
                raise ValueError(f"two copies of aggregate {a.id} in one unit: load it with unit.get")
            self._changed[id(a)] = a

    @property
    def changed(self) -> list[Any]:
        return list(self._changed.values())


class Look(Unit):
    """A unit for a check that changes nothing and is made very often (the gateway's payer check
    on every model call): it reads the store's cached aggregates themselves (``EventStore.peek``),
    not private copies, so it may not change one; a guard is still read from the database.
    Nothing it holds can be added or committed."""

    def get(self, aggregate_id: uuid.UUID) -> Any | None:
        if aggregate_id not in self._loaded:
            store = self.store
            self._loaded[aggregate_id] = (store.get(aggregate_id, fresh=True) if aggregate_id in GUARDS
                                          else store.peek(aggregate_id))
        return self._loaded[aggregate_id]

    def add(self, *aggregates: Any) -> None:
        raise TypeError("a Look changes nothing: run the command in a Unit")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Commands:
    def __init__(self, store: EventStore, clock: Clock = utc_now, new_id: Callable[[], str] | None = None):
        self.store = store
        self.clock = clock
        self.new_id = new_id or (lambda: uuid.uuid4().hex)
        self._retry_turn = threading.Lock()

    def context(self, actor: str, reason: str | None = None, correlation_id: str | None = None) -> Context:
        return Context(actor=actor, at=self.clock(), correlation_id=correlation_id or self.new_id(), reason=reason)

    def run(self, decide: Callable[[Unit], T], *, grouped: bool = True) -> Done[T]:
        """Run ``decide`` in a unit of work and commit what it added; its value and positions."""
        try:
            return self._attempt(decide, grouped)
        except (CommitConflict, Refusal):
            pass
        with self._retry_turn, self.store.fresh():
            for attempt in range(MAX_RETRIES):
                try:
                    return self._attempt(decide, grouped)
                except CommitConflict:
                    if attempt == MAX_RETRIES - 1:
                        raise
        raise AssertionError("unreachable")

    def _attempt(self, decide: Callable[[Unit], T], grouped: bool) -> Done[T]:
        unit = Unit(self.store)
        value = decide(unit)
        changed = unit.changed
        positions = self.store.commit(*changed) if grouped else self.store.commit_direct(*changed)
        return Done(value, positions)
