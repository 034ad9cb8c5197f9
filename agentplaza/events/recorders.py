"""The library's application recorders, with the hash chain written beside them.

Each subclass adds the ``event_chain`` table and, inside the very transaction
that inserts the events, computes and inserts their links (see ``chain``).  On
Postgres the library takes an EXCLUSIVE lock on the events table before it
inserts, which serialises writers in notification order; the chain's head is
read under that lock, so two hub processes cannot fork the chain.  On SQLite a
write transaction is already exclusive.  The Postgres recorder lives in
``recorders_postgres`` so that a hub on SQLite never imports psycopg (a tenth
of its start, issue 25).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder

from .chain import CHAIN_TABLE, GENESIS, LINK_SIZE, link


def _oid(originator_id: UUID | str) -> str:
    return originator_id.hex if isinstance(originator_id, UUID) else str(originator_id)


def _links(prev: bytes, ids: Sequence[int], events: Sequence[StoredEvent]) -> tuple[int, bytes]:
    """The chain row of one transaction: its first position and its events' links."""
    if list(ids) != list(range(ids[0], ids[0] + len(ids))):
        raise RuntimeError(f"positions of one transaction are not consecutive: {list(ids)}")
    out = []
    for position, e in zip(ids, events, strict=True):
        prev = link(prev, position, _oid(e.originator_id), e.originator_version, e.topic, e.state)
        out.append(prev)
    return ids[0], b"".join(out)


def _head(row: Any) -> tuple[int, bytes] | None:
    if row is None:
        return None
    first, links = row[0], bytes(row[1])
    return first + len(links) // LINK_SIZE - 1, links[-LINK_SIZE:]


class ChainedSQLiteRecorder(SQLiteApplicationRecorder):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # The head we last committed: lets a writer skip reading it back.
        self._head: tuple[int, bytes] | None = None
        self._pending: threading.local = threading.local()

    def construct_create_table_statements(self) -> list[str]:
        return super().construct_create_table_statements() + [
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} "
            "(first_position INTEGER PRIMARY KEY, links BLOB NOT NULL)"
        ]

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any):
        self._pending.head = None
        ids = super().insert_events(stored_events, **kwargs)
        # Only a committed head may be trusted by the next transaction.
        if self._pending.head is not None:
            self._head = self._pending.head
        return ids

    def _insert_events(self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any):
        ids = super()._insert_events(c, stored_events, **kwargs)
        if not ids:
            return ids
        head = self._head
        if head is None or head[0] != ids[0] - 1:
            c.execute(f"SELECT first_position, links FROM {CHAIN_TABLE} ORDER BY first_position DESC LIMIT 1")
            head = _head(c.fetchone())
        first, links = _links(head[1] if head else GENESIS, ids, stored_events)
        c.execute(f"INSERT INTO {CHAIN_TABLE} VALUES (?, ?)", (first, links))
        self._pending.head = (ids[-1], links[-LINK_SIZE:])
        return ids
