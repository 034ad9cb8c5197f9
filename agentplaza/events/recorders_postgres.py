"""The Postgres recorder, with the hash chain written beside it (see ``recorders``).

The library takes an EXCLUSIVE lock on the events table before it inserts, which
serialises writers in notification order; the chain's head is read under that lock,
so two hub processes cannot fork the chain.  A module of its own so that only a hub
on Postgres imports psycopg.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg.sql import SQL, Identifier

from .chain import CHAIN_TABLE, GENESIS
from .recorders import _head, _links


class ChainedPostgresRecorder(PostgresApplicationRecorder):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        schema = Identifier(self.datastore.schema)
        table = Identifier(CHAIN_TABLE)
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {0}.{1} "
                "(first_position bigint PRIMARY KEY, links bytea NOT NULL)"
            ).format(schema, table)
        )
        self._select_head = SQL(
            "SELECT first_position, links FROM {0}.{1} ORDER BY first_position DESC LIMIT 1"
        ).format(schema, table)
        self._insert_links = SQL("INSERT INTO {0}.{1} VALUES (%s, %s)").format(schema, table)

    def _fetch_ids_after_insert_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any):
        ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        if ids:
            # Still inside the transaction that holds the table lock.
            curs.execute(self._select_head, prepare=True)
            row = curs.fetchone()
            head = _head((row["first_position"], row["links"]) if row else None)
            curs.execute(self._insert_links, _links(head[1] if head else GENESIS, ids, stored_events))
        return ids
