"""Group commit: many concurrent commands, one transaction, one sync to disk.

Each command queues its pending events.  If nobody is writing, it becomes the
writer at once (a lone command writes on its own thread, with no hand-off).
Otherwise it sleeps until it is done.  The writer takes everything queued (up
to ``MAX_BATCH`` commands), writes it in one transaction, wakes each command
with its positions, and hands the writer's role to the oldest command still
queued, which takes all that queued meanwhile.  Every thread wakes once.

Closing waits for the write in progress and for every command queued before it (at most
``CLOSE_WAIT_S``), and refuses any command after it: the store's database is closed only once
no thread is inside it (a connection closed under a writer's ``execute`` crashed the process).

When a batch fails (two commands changed one aggregate, another hub process
got there first, or the database refused something in it), the batch is
written again command by command, so only the command that really failed is
refused, nothing of it is stored, and its neighbours land as if it had never
been queued.  A failure only ever reaches the command it belongs to: the
writer's role is always handed on, so the committer outlives any error.

The committer writes *stored* events (the library's ``StoredEvent``, already
checked to read back, see ``storable``) straight to the recorder, so an event
is encoded once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError

#: Most commands written in one transaction.
MAX_BATCH = 256
#: How long closing waits for the writes under way.
CLOSE_WAIT_S = 30.0


class CommitConflict(Exception):
    """Another writer changed an aggregate first; nothing of this command was stored."""


class StoreClosed(RuntimeError):
    """The store was closed (the hub is stopping): nothing of this command was stored."""


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
    def __init__(self, recorder: Any):
        self._recorder = recorder
        self._queue: list[_Job] = []
        self._queue_lock = threading.Lock()
        self._idle = threading.Condition(self._queue_lock)  # notified when the last writer stops
        self._writing = False
        self._closed = False

    def submit(self, events: list[Any]) -> list[int]:
        """Write these stored events in one transaction with whatever else is queued; their positions."""
        job = _Job(events)
        with self._queue_lock:
            if self._closed:
                raise StoreClosed("the store is closed")
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
                    self._idle.notify_all()

    def _put(self, stored_events: list[Any]) -> list[int]:
        ids = self._recorder.insert_events(stored_events)
        assert ids is not None and len(ids) == len(stored_events), "the recorder returned no position per event"
        return list(ids)

    def _write(self, batch: list[_Job]) -> None:
        if len(batch) > 1:
            try:
                ids = self._put([e for j in batch for e in j.events])
            except Exception:  # noqa: BLE001 - write them one by one: only the failing command fails
                pass
            else:
                at = 0
                for j in batch:
                    n = len(j.events)
                    j.positions = ids[at : at + n]
                    j.finish()
                    at += n
                return
        for j in batch:
            try:
                j.positions = self._put(j.events)
            except IntegrityError as e:
                j.error = CommitConflict(str(e))
            except BaseException as e:  # noqa: BLE001 - the command hears of it, the committer goes on
                j.error = e
            j.finish()

    def close(self) -> None:
        """No command after this one; returns once the writes under way are done (or CLOSE_WAIT_S passed)."""
        with self._queue_lock:
            self._closed = True
            self._idle.wait_for(lambda: not self._writing, CLOSE_WAIT_S)
