"""What an attacker with write access to the database can do to the log, done for tests.

``rewrite`` changes a stored event's bytes and recomputes every chain link from
there on with ``chain.link``, so the chain alone still reads intact;
``cut_last_transaction`` deletes the last transaction's events and its chain
row.  Both work on SQLite and PostgreSQL, on a store opened for writing while
no hub runs.
"""

from __future__ import annotations

from collections.abc import Callable

from agentplaza.events.chain import CHAIN_TABLE, GENESIS, LINK_SIZE, link
from agentplaza.events.store import EventStore


def open_writable(folders, database_url: str | None) -> EventStore:
    return EventStore.open(state_dir=folders.state, database_url=database_url)


def _execute(store: EventStore, statements: list[tuple[str, tuple]]) -> None:
    with store.app.factory.datastore.transaction(commit=True) as c:
        for sql, params in statements:
            c.execute(sql, params)


def rewrite(store: EventStore, position: int, change: Callable[[bytes], bytes]) -> None:
    """Replace the state of the event at ``position`` with ``change(state)`` and recompute
    the links of it and of every event after it, rows and all, in one transaction."""
    ph, col = store._ph(), store._id_col()
    events = list(store._chain_events(position - 1))
    assert events and events[0][0] == position, f"no event at position {position}"
    new_state = change(bytes(events[0][4]))
    events[0] = (*events[0][:4], new_state)
    prev = GENESIS if position == 1 else store.link_at(position - 1)
    assert prev is not None
    links: dict[int, bytes] = {}
    for p, oid, version, topic, state in events:
        prev = link(prev, p, oid, version, topic, bytes(state))
        links[p] = prev
    statements = [(f"UPDATE {store.events_table} SET state = {ph} WHERE {col} = {ph}", (new_state, position))]
    for first, row_links in store._chain_rows(position - 1):
        count = len(bytes(row_links)) // LINK_SIZE
        new = b"".join(links.get(first + i) or bytes(row_links)[i * LINK_SIZE:(i + 1) * LINK_SIZE] for i in range(count))
        statements.append((f"UPDATE {CHAIN_TABLE} SET links = {ph} WHERE first_position = {ph}", (new, first)))
    _execute(store, statements)


def cut_last_transaction(store: EventStore) -> int:
    """Delete the last transaction's events and its chain row; returns its first position."""
    ph, col = store._ph(), store._id_col()
    rows = store._select(f"SELECT first_position FROM {CHAIN_TABLE} ORDER BY first_position DESC LIMIT 1", [])
    first = rows[0][0]
    _execute(store, [
        (f"DELETE FROM {store.events_table} WHERE {col} >= {ph}", (first,)),
        (f"DELETE FROM {CHAIN_TABLE} WHERE first_position = {ph}", (first,)),
    ])
    return first
