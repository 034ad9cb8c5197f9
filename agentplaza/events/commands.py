"""Running a command: load, decide, commit, and retry when another writer won.

A command is a function of no arguments that loads the aggregates it needs
from the store, asks them to decide (they raise ``Refusal`` or trigger events)
and returns them.  ``Commands.run`` commits what it returns atomically; on a
conflict it runs the whole function again on fresh state, so a decision is
never made on stale data; a refusal is confirmed on fresh state before it is
reported, so a hub whose cache is behind another hub's writes never refuses
wrongly.  Retries in one process take turns (one lock), so many commands
fighting over one aggregate all get through instead of starving.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from ..domain.base import Context, Refusal
from .committer import CommitConflict
from .store import EventStore

#: Times a command is re-run after losing a race to another writer.
MAX_RETRIES = 50

Clock = Callable[[], dt.datetime]


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

    def run(self, decide: Callable[[], Iterable[Any]], *, grouped: bool = True) -> list[int]:
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

    def _attempt(self, decide: Callable[[], Iterable[Any]], grouped: bool) -> list[int]:
        aggregates = [a for a in decide() if a is not None]
        if grouped:
            return self.store.commit(*aggregates)
        return self.store.commit_direct(*aggregates)
