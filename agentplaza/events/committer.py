"""Group commit: many concurrent commands, one transaction, one sync to disk.

Each command queues its pending events.  If nobody is writing, it becomes the
writer at once (a lone command writes on its own thread, with no hand-off).
Otherwise it sleeps until it is done.  The writer takes everything queued (up
to ``MAX_BATCH`` commands), writes it in one transaction, wakes each command
with its positions, and hands the writer's role to the oldest command still
queued, which takes all that queued meanwhile.  Every thread wakes once.

When a batch conflicts (two commands changed one aggregate, or another hub
process got there first), the batch is written again command by command, so
only the command that really conflicted is refused, and nothing of it is stored.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError

#: Most commands written in one transaction.
MAX_BATCH = 256


class CommitConflict(Exception):
    """Another writer changed an aggregate first; nothing of this command was stored."""


@dataclass
class _Job:
    events: list[Any]
    done: bool = False
    positions: list[int] | None = None
    error: BaseException | None = None
    wake: threading.Event = field(default_factory=threading.Event)

    def finish(self) -> None:
        self.done = True
        self.wake.set()


class GroupCommitter:
    def __init__(self, event_store: Any):
        self._events = event_store
        self._queue: list[_Job] = []
        self._queue_lock = threading.Lock()
        self._writing = False
        self._closed = False

    def submit(self, events: list[Any]) -> list[int]:
        if self._closed:
            raise RuntimeError("the store is closed")
        job = _Job(events)
        with self._queue_lock:
            self._queue.append(job)
            lead = not self._writing
            self._writing = True
        if not lead:
            job.wake.wait()  # done, or handed the writer's role
        if not job.done:
            self._lead()
        if job.error is not None:
            raise job.error
        assert job.positions is not None
        return job.positions

    def _lead(self) -> None:
        with self._queue_lock:
            batch = self._queue[:MAX_BATCH]
            del self._queue[: len(batch)]
        try:
            self._write(batch)
        finally:
            with self._queue_lock:
                if self._queue:
                    self._queue[0].wake.set()  # the oldest waiting command writes next
                else:
                    self._writing = False

    def _write(self, batch: list[_Job]) -> None:
        if len(batch) > 1:
            try:
                recordings = self._events.put([e for j in batch for e in j.events])
            except IntegrityError:
                pass  # fall through: write them one by one
            except BaseException as e:  # noqa: BLE001 - every waiter must hear of it
                for j in batch:
                    j.error = e
                    j.finish()
                return
            else:
                ids = [r.notification.id for r in recordings]
                at = 0
                for j in batch:
                    n = len(j.events)
                    j.positions = ids[at : at + n]
                    j.finish()
                    at += n
                return
        for j in batch:
            try:
                j.positions = [r.notification.id for r in self._events.put(j.events)]
            except IntegrityError as e:
                j.error = CommitConflict(str(e))
            except BaseException as e:  # noqa: BLE001
                j.error = e
            j.finish()

    def close(self) -> None:
        self._closed = True
