"""Group commit: many concurrent commands, one transaction, one sync to disk.

Each command hands its pending events to ``submit`` and waits.  A single
writer thread takes everything queued (up to ``MAX_BATCH`` commands), writes
it in one transaction and wakes every waiter with its positions.  When the
batch conflicts (two commands changed one aggregate, or another hub process
got there first), the batch is written again command by command, so only the
command that really conflicted is refused, and nothing of it is stored.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError

#: Most commands written in one transaction.
MAX_BATCH = 256


class CommitConflict(Exception):
    pass


@dataclass
class _Job:
    events: list[Any]
    done: threading.Event = field(default_factory=threading.Event)
    positions: list[int] | None = None
    error: BaseException | None = None


class GroupCommitter:
    def __init__(self, event_store: Any):
        self._events = event_store
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._started = False
        self._start_lock = threading.Lock()
        self._closed = False

    def submit(self, events: list[Any]) -> list[int]:
        if self._closed:
            raise RuntimeError("the store is closed")
        if not self._started:
            with self._start_lock:
                if not self._started:
                    self._thread.start()
                    self._started = True
        job = _Job(events)
        self._queue.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.positions is not None
        return job.positions

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch = [job]
            while len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.append(nxt)
            self._write(batch)

    def _write(self, batch: list[_Job]) -> None:
        if len(batch) > 1:
            try:
                recordings = self._events.put([e for j in batch for e in j.events])
            except IntegrityError:
                pass  # fall through: write them one by one
            except BaseException as e:  # noqa: BLE001 - every waiter must wake
                for j in batch:
                    j.error = e
                    j.done.set()
                return
            else:
                ids = [r.notification.id for r in recordings]
                at = 0
                for j in batch:
                    n = len(j.events)
                    j.positions = ids[at : at + n]
                    at += n
                    j.done.set()
                return
        for j in batch:
            try:
                j.positions = [r.notification.id for r in self._events.put(j.events)]
            except IntegrityError as e:
                j.error = CommitConflict(str(e))
            except BaseException as e:  # noqa: BLE001
                j.error = e
            j.done.set()

    def close(self) -> None:
        self._closed = True
        if self._started:
            self._queue.put(None)
            self._thread.join(timeout=10)
