"""Has anything been committed to the store since a moment?  One cheap question, asked before a guard
is read fresh (``EventStore.get(..., fresh=True)``: the plaza's hold, read on every model call).

On SQLite the answer is ``PRAGMA data_version`` on a connection of the watch's own that never writes:
SQLite changes that number whenever ANY other connection commits to the file (another hub, the CLI,
this hub's own committer).  So an unchanged number since the guard's copy was checked against the
database means no event at all was written since: the copy is still the newest, and the indexed read
of its newest event can be skipped.  A changed number says nothing about which aggregate moved; the
guard is then checked as before.  PostgreSQL has no such number: there the watch is absent and every
fresh read asks the database (``None`` below).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class SQLiteCommitWatch:
    def __init__(self, path: Path):
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()

    def mark(self) -> int:
        """A number that changes whenever another connection commits (not ordered, only compared)."""
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def newest_version(self, table: str, originator_id: str) -> int | None:
        """The version of the newest stored event of one aggregate, read now (its own read transaction:
        the newest commit of any connection), or None when it has none. The primary key's index only:
        a quarter of the recorder's ``select_events(desc=True, limit=1)``, which reads and decodes the
        whole row through its own transaction machinery (tens of microseconds on every model call)."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT originator_version FROM {table} WHERE originator_id=? "
                "ORDER BY originator_version DESC LIMIT 1", (originator_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def commit_watch(env: dict[str, str]) -> SQLiteCommitWatch | None:
    """The watch for a store opened with ``env`` (``store.store_env``): a SQLite file's, else None
    (PostgreSQL, a read-only or in-memory store: every fresh read goes to the database)."""
    if "sqlite" not in env.get("PERSISTENCE_MODULE", ""):
        return None
    name = env.get("SQLITE_DBNAME", "")
    if not name or name.startswith("file:") or ":memory:" in name or not Path(name).is_file():
        return None
    return SQLiteCommitWatch(Path(name))
