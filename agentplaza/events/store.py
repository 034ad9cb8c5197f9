"""The plaza's one append-only store, on the eventsourcing library.

``EventStore.open`` picks the recorder: SQLite in the state folder by default,
PostgreSQL when a ``postgresql://`` URL is given.  Writes go through
``commit``, which checks that every pending event would read back (see
``storable``: a command whose event would not is refused whole, with
``UnstorableEvent``) and hands them to the group committer (one transaction
for many concurrent commands); reads of the global order go through ``read``,
a fast path over the raw rows used by projections, replay, the live bus and
audit.

An event already stored that cannot be read back (a damaged disk, or an older
hub that wrote one) never stops a reader: ``read`` steps over it, and
``unreadable`` names every such position and why, with the position of the
owner's ``Log.EventVoided`` where one was recorded (docs/operations.md, "A
damaged event in the log").
"""

from __future__ import annotations

import contextvars
import copy
import datetime
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import IntegrityError

from ..config import STORE_FILE
from ..permissions import make_private_file
from . import catalogue, chainwalk
from .chain import CHAIN_TABLE, GENESIS, LINK_SIZE, Anchor, Verdict, expand, verify
from .committer import CommitConflict, GroupCommitter
from .commitwatch import commit_watch
from .records import VOIDED_KIND, EventRecord, Unreadable, UnreadableEvent
from .storable import stored_form

log = logging.getLogger(__name__)

#: Aggregates kept in memory per hub process.
AGGREGATE_CACHE_SIZE = 10_000
#: An aggregate is snapshotted every this many events, so loading it never replays
#: more than this many (snapshots are a cache: not chained, never read by projections).
SNAPSHOT_EVERY = 100
#: Rows fetched per round trip when reading the log.
READ_PAGE = 5_000
#: Events of one aggregate read at a time (``stream``): a transcript's page is 50 entries.
STREAM_PAGE = 100
#: How long another process reading this store (``reader_env``) waits for its PostgreSQL connection.
READER_CONNECT_TIMEOUT_S = 5
#: Positions one query of ``topics_at`` names (SQLite takes at most 32,766 bound values a statement).
TOPICS_AT_BATCH = 500


def _readable(rows: Iterable[tuple]) -> Iterator[EventRecord]:
    """The records of stored rows (position, originator id, version, topic, state), stepping over any that
    cannot be read back."""
    for row in rows:
        try:
            yield catalogue.record(*row)
        except UnreadableEvent:
            continue


_IMMUTABLE = (str, int, float, bool, bytes, type(None), uuid.UUID, datetime.datetime, datetime.date, frozenset)


def clone(aggregate: Any) -> Any:
    """A private copy of a cached aggregate: immutable attributes are shared,
    everything else (lists, dicts, objects) is deep-copied."""
    new = object.__new__(type(aggregate))
    state = {}
    for key, value in aggregate.__dict__.items():
        state[key] = value if isinstance(value, _IMMUTABLE) else copy.deepcopy(value)
    new.__dict__.update(state)
    return new


class PlazaApplication(Application):
    name = "agentplaza"
    is_snapshotting_enabled = True
    snapshot_class = Snapshot


#: Another writer changed an aggregate first; the command may be retried.
Conflict = CommitConflict

#: A rider: an object whose ``board(store)`` gives an aggregate (or None) that joins the next commit made in
#: its context, and whose ``boarded(positions)`` hears that commit's positions.  An idempotency key's claim
#: rides this way, so it is written in the same transaction as the request's first change.
_rider: contextvars.ContextVar[Any] = contextvars.ContextVar("apz_rider", default=None)


@contextmanager
def riding(rider: Any) -> Iterator[None]:
    """Within this block (and the worker threads it starts), ``rider`` joins the next commit."""
    token = _rider.set(rider)
    try:
        yield
    finally:
        _rider.reset(token)


def store_env(*, state_dir: Path | None = None, database_url: str | None = None, read_only: bool = False) -> dict[str, str]:
    env = {"ORIGINATOR_ID_TYPE": "uuid"}
    if read_only:
        env["CREATE_TABLE"] = "n"
    if database_url:
        url = urlparse(database_url)
        if url.scheme not in ("postgresql", "postgres"):
            raise ValueError(f"APZ_DATABASE_URL must be postgresql://..., not {url.scheme}://")
        env.update(
            PERSISTENCE_MODULE="eventsourcing.postgres",
            APPLICATION_RECORDER_TOPIC="agentplaza.events.recorders_postgres:ChainedPostgresRecorder",
            POSTGRES_DBNAME=(url.path or "/").lstrip("/") or "postgres",
            POSTGRES_HOST=url.hostname or "127.0.0.1",
            POSTGRES_PORT=str(url.port or 5432),
            POSTGRES_USER=unquote(url.username or "postgres"),
            POSTGRES_PASSWORD=unquote(url.password or ""),
            POSTGRES_ENABLE_DB_FUNCTIONS="n",  # the function path skips the table lock
            POSTGRES_LOCK_TIMEOUT="30",
            POSTGRES_POOL_SIZE="8",
            POSTGRES_MAX_OVERFLOW="16",
        )
    else:
        assert state_dir is not None
        env.update(
            PERSISTENCE_MODULE="eventsourcing.sqlite",
            APPLICATION_RECORDER_TOPIC="agentplaza.events.recorders:ChainedSQLiteRecorder",
            SQLITE_DBNAME=(
                f"file:{Path(state_dir) / STORE_FILE}?mode=ro" if read_only else str(Path(state_dir) / STORE_FILE)
            ),
            SQLITE_LOCK_TIMEOUT="30",
        )
    return env


@dataclass(frozen=True)
class StoreInfo:
    backend: str  # "sqlite" or "postgres"
    where: str  # the file, or host:port/db


class EventStore:
    def __init__(self, env: dict[str, str]):
        self.env = env
        self.app = PlazaApplication(env=env)
        self.backend = "postgres" if "postgres" in env["PERSISTENCE_MODULE"] else "sqlite"
        self.info = StoreInfo(
            self.backend,
            env.get("SQLITE_DBNAME")
            or f"{env['POSTGRES_HOST']}:{env['POSTGRES_PORT']}/{env['POSTGRES_DBNAME']}",
        )
        self._datastore = self.app.factory.datastore
        self.events_table = self._events_table = self.app.recorder.events_table_name
        self.committer = GroupCommitter(self.app.recorder)
        self._cache: OrderedDict[uuid.UUID, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._local = threading.local()
        self._close_lock = threading.Lock()
        self._closed = False
        self._watch = commit_watch(env)  # SQLite's data_version: has anything been committed since?
        self._current: dict[uuid.UUID, tuple[int, int]] = {}  # a guard's (mark, version) last found newest

    @classmethod
    def open(cls, *, state_dir: Path | None = None, database_url: str | None = None, read_only: bool = False) -> EventStore:
        if not database_url and not read_only:
            make_private_file(Path(state_dir) / STORE_FILE)  # SQLite would make it with the umask's mode
        return cls(store_env(state_dir=state_dir, database_url=database_url, read_only=read_only))

    # -- aggregates ------------------------------------------------------

    # The cache holds each aggregate as this process last saw it.  It is not
    # checked against the database on every read: a stale copy that a command
    # changes does no harm, because its save conflicts (optimistic concurrency)
    # and the command runs again ``fresh()``; ``Commands`` confirms every refusal
    # fresh too.  A copy a command only READS would never conflict: a guard read
    # by many commands (the plaza's hold) is read with ``fresh=True``, and a
    # hub that follows the log drops every copy another writer moved on
    # (``forget_moved``).

    def get(self, aggregate_id: uuid.UUID, *, fresh: bool = False) -> Any | None:
        if fresh and not getattr(self._local, "fresh", False):
            return self._get_current(aggregate_id)
        if not getattr(self._local, "fresh", False):
            with self._cache_lock:
                cached = self._cache.get(aggregate_id)
                if cached is not None:
                    self._cache.move_to_end(aggregate_id)
            if cached is not None:
                return clone(cached)
        try:
            aggregate = self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        self._remember([clone(aggregate)])
        return aggregate

    def peek(self, aggregate_id: uuid.UUID) -> Any | None:
        """The cached aggregate itself, not a copy (loaded and cached when it is not there), for a
        reader that changes nothing: ``commands.unit.Look``.  A copy's deep copy was a tenth of the
        gateway's payer check, made on every model call."""
        if not getattr(self._local, "fresh", False):
            with self._cache_lock:
                cached = self._cache.get(aggregate_id)
            if cached is not None:
                return cached
        found = self.get(aggregate_id)
        if found is None:
            return None
        with self._cache_lock:
            return self._cache.get(aggregate_id, found)

    def _get_current(self, aggregate_id: uuid.UUID) -> Any | None:
        """The aggregate as the database holds it now: the cached copy when nothing was committed since
        it was last found the newest (SQLite: ``commitwatch``, no read), or when the newest stored event
        is its version (one indexed read), else loaded."""
        mark = self._watch.mark() if self._watch is not None else None  # taken BEFORE the database is read
        with self._cache_lock:
            cached = self._cache.get(aggregate_id)
        if mark is not None and cached is not None and self._current.get(aggregate_id) == (mark, cached.version):
            return clone(cached)  # nothing at all was committed since this copy was found the newest
        if cached is not None and self._newest_version(aggregate_id) == cached.version:
            found = clone(cached)
        else:
            with self.fresh():
                found = self.get(aggregate_id)
        if mark is not None and found is not None:
            self._current[aggregate_id] = (mark, found.version)
        return found

    def _newest_version(self, aggregate_id: uuid.UUID) -> int | None:
        """The version of the aggregate's newest stored event (None: it has none), read now."""
        if self._watch is not None:
            return self._watch.newest_version(self.events_table, aggregate_id.hex)   # (as the recorder keys it)
        newest = self.app.recorder.select_events(aggregate_id, desc=True, limit=1)
        return newest[0].originator_version if newest else None

    @contextmanager
    def fresh(self) -> Iterator[None]:
        """Within this block, this thread reads every aggregate from the database."""
        self._local.fresh = True
        try:
            yield
        finally:
            self._local.fresh = False

    def _remember(self, aggregates: list[Any]) -> None:
        with self._cache_lock:
            for a in aggregates:
                self._cache[a.id] = a
                self._cache.move_to_end(a.id)
            while len(self._cache) > AGGREGATE_CACHE_SIZE:
                self._cache.popitem(last=False)

    def forget_moved(self, records: Iterable[EventRecord]) -> int:
        """Drop each cached aggregate that the log shows at a later version than the copy (another
        writer's events, read by the hub's follower); how many were dropped."""
        latest: dict[uuid.UUID, int] = {}
        for r in records:
            oid = uuid.UUID(r.originator_id)
            latest[oid] = max(r.version, latest.get(oid, 0))
        with self._cache_lock:
            moved = [i for i, v in latest.items() if i in self._cache and self._cache[i].version < v]
            for i in moved:
                del self._cache[i]
        return len(moved)

    def _forget(self, ids: set) -> None:
        with self._cache_lock:
            for i in ids:
                self._cache.pop(i, None)

    def commit(self, *aggregates: Any) -> list[int]:
        """Save the aggregates' pending events atomically; returns their positions.

        Concurrent callers are grouped into one transaction by the committer.
        Raises ``Conflict`` when another writer changed one of them first.
        After a commit the aggregates belong to the store's cache: do not change them.
        """
        return self._commit(aggregates, self.committer.submit)

    def commit_direct(self, *aggregates: Any) -> list[int]:
        """One transaction for these aggregates alone (no grouping)."""

        def put(stored_events: list[Any]) -> list[int]:
            try:
                return list(self.app.recorder.insert_events(stored_events) or [])
            except IntegrityError as e:
                raise Conflict(str(e)) from e

        return self._commit(aggregates, put)

    def _commit(self, aggregates: tuple, put) -> list[int]:
        aggregates = tuple(a for a in aggregates if a is not None)
        events = [e for a in aggregates for e in a.collect_events()]
        if not events:
            return []
        rider = _rider.get()
        extra = rider.board(self) if rider is not None else None
        if extra is not None:
            aggregates += (extra,)
            events += extra.collect_events()
        try:
            positions = put(stored_form(self.app.mapper, events))
        except Exception:  # a conflict, an unstorable event, a database error: nothing was stored
            self._forget({a.id for a in aggregates})
            raise
        self._remember(list(aggregates))
        self._snapshot(aggregates, events)
        if extra is not None:
            rider.boarded(positions)
        return positions

    def _snapshot(self, aggregates: tuple, events: list[Any]) -> None:
        written: dict[Any, int] = {}
        for e in events:
            written[e.originator_id] = written.get(e.originator_id, 0) + 1
        for a in aggregates:
            before = a.version - written.get(a.id, 0)
            if a.version // SNAPSHOT_EVERY > before // SNAPSHOT_EVERY:
                try:
                    self.app.snapshots.put([Snapshot.take(a)])
                except Exception as e:  # noqa: BLE001 - a snapshot is only a cache
                    log.warning("no snapshot of %s at version %s: %s", type(a).__name__, a.version, e)

    # -- the global order ----------------------------------------------------

    def events_of(self, aggregate_id: uuid.UUID) -> list[Any]:
        """One aggregate's domain events, oldest first, read from the log (never from a snapshot)."""
        return list(self.app.repository.event_store.get(aggregate_id))

    def max_position(self) -> int:
        return self.app.recorder.max_notification_id() or 0

    def _select(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """Rows as the driver's plain tuples: the library's cursors make a ``sqlite3.Row`` or a dict of
        every row, which a rebuild and ``audit verify`` (every event of the log) would only unpack again.
        PostgreSQL sends them in its binary form: a ``bytea`` (a state, the links) as it is, where the
        text form doubles it in hex for the server to write and the driver to read back."""
        with self._held_select() as select:
            return select(sql, params)

    @contextmanager
    def _held_select(self) -> Iterator[Callable[[str, Sequence[Any]], list[tuple]]]:
        """``_select`` on one connection in one transaction, held for many queries: ``audit verify`` asks a
        thousand events a query, and on PostgreSQL each query's own transaction cost it two more round trips
        (its ``BEGIN`` and its rollback) and a turn of the pool."""
        with self._datastore.transaction(commit=False) as c:
            if self.backend == "postgres":
                from psycopg.rows import tuple_row  # here: a hub on SQLite never imports psycopg

                c.row_factory = tuple_row

                def select(sql: str, params: Sequence[Any]) -> list[tuple]:
                    c.execute(sql, params, binary=True)
                    return c.fetchall()
            else:
                c.sqlite_cursor.row_factory = None

                def select(sql: str, params: Sequence[Any]) -> list[tuple]:
                    c.execute(sql, params)
                    return c.fetchall()

            yield select

    def _ph(self) -> str:
        return "%s" if self.backend == "postgres" else "?"

    def _id_col(self) -> str:
        return "notification_id" if self.backend == "postgres" else "rowid"

    def _oid(self) -> str:
        """The originator id as a record names it, its 32 hex digits.  SQLite stores them so; PostgreSQL's
        ``uuid`` column is sent as that text, written by the server: psycopg makes a ``uuid.UUID`` of each
        one it reads, which was two thirds of the time a rebuild spent reading the log on PostgreSQL."""
        return "encode(uuid_send(originator_id), 'hex')" if self.backend == "postgres" else "originator_id"

    def read(self, after: int = 0, limit: int | None = None, upto: int | None = None) -> Iterator[EventRecord]:
        """Events after position ``after`` in the global order, as records.

        An event that cannot be read back is stepped over (``unreadable`` names it);
        it still counts towards ``limit``, so a page never reads past what it was asked."""
        ph, col = self._ph(), self._id_col()
        remaining = limit
        while remaining is None or remaining > 0:
            page = READ_PAGE if remaining is None else min(READ_PAGE, remaining)
            where = f"{col} > {ph}"
            params: list[Any] = [after]
            if upto is not None:
                where += f" AND {col} <= {ph}"
                params.append(upto)
            rows = self._select(
                f"SELECT {col}, {self._oid()}, originator_version, topic, state "
                f"FROM {self._events_table} WHERE {where} ORDER BY {col} LIMIT {int(page)}",
                params,
            )
            yield from _readable(rows)
            if len(rows) < page:
                return
            after = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)

    def read_raw(self, after: int, limit: int, skip: Sequence[str] = (), upto: int | None = None) -> list[tuple]:
        """Rows (position, originator id, version, topic, state) for the fastest folds; without the
        events of the topics in ``skip`` (a fold that takes none of them: the rows are not made at all),
        and none after position ``upto`` (the database steps over no more of the log than that)."""
        ph, col = self._ph(), self._id_col()
        unwanted = f" AND topic NOT IN ({', '.join([ph] * len(skip))})" if skip else ""
        bound = f" AND {col} <= {ph}" if upto is not None else ""
        return self._select(
            f"SELECT {col}, {self._oid()}, originator_version, topic, state "
            f"FROM {self._events_table} WHERE {col} > {ph}{bound}{unwanted} ORDER BY {col} LIMIT {int(limit)}",
            [after, *([upto] if upto is not None else []), *skip],
        )

    def stream(self, originator_id: uuid.UUID, after_version: int = 0, *, upto: int | None = None,
               newest_first: bool = False, page: int = STREAM_PAGE) -> Iterator[EventRecord]:
        """One aggregate's events as records, read from the log in pages of ``page`` (its key: O(page), however
        long the log): oldest first after version ``after_version``, or ``newest_first`` from its last; none after
        position ``upto`` (a reader that shows them beside read models: only what those have folded).  An event
        that cannot be read back is stepped over, as a read model's fold steps over it.  A reader of a long stream
        (a transcript) stops when it has what it wants; the pages after are never read."""
        if newest_first and after_version:
            raise ValueError("after_version is for a stream read oldest first")
        ph, col = self._ph(), self._id_col()
        oid = originator_id if self.backend == "postgres" else originator_id.hex
        bound, order = (("<", "DESC") if newest_first else (">", "ASC"))
        at = None if newest_first else after_version
        while True:
            where, params = f"originator_id = {ph}", [oid]
            if upto is not None:
                where, params = f"{where} AND {col} <= {ph}", [*params, upto]
            if at is not None:
                where, params = f"{where} AND originator_version {bound} {ph}", [*params, at]
            rows = self._select(
                f"SELECT {col}, {self._oid()}, originator_version, topic, state FROM {self._events_table} "
                f"WHERE {where} ORDER BY originator_version {order} LIMIT {int(page)}", params)
            yield from _readable(rows)
            if len(rows) < page:
                return
            at = rows[-1][2]

    def topics_at(self, positions: Sequence[int]) -> list[str]:
        """The topics of the events at ``positions`` (where there is one): a sample of the log's mix."""
        ph, col = self._ph(), self._id_col()
        found: list[str] = []
        for i in range(0, len(positions), TOPICS_AT_BATCH):
            part = list(positions[i : i + TOPICS_AT_BATCH])
            found += [r[0] for r in self._select(
                f"SELECT topic FROM {self._events_table} WHERE {col} IN ({', '.join([ph] * len(part))})", part)]
        return found

    def unreadable(self, after: int = 0) -> list[Unreadable]:
        """Every stored event after ``after`` that the reader cannot read back, with why, and the
        position of the owner's ``Log.EventVoided`` for it where one was recorded."""
        found: dict[int, Unreadable] = {}
        voided: dict[int, int] = {}
        while rows := self.read_raw(after, READ_PAGE):
            for row in rows:
                try:
                    rec = catalogue.record(*row)
                except UnreadableEvent as e:
                    found[e.position] = Unreadable(e.position, e.reason)
                    continue
                if rec.kind == VOIDED_KIND:
                    voided.setdefault(int(rec.data["position"]), rec.position)
            after = rows[-1][0]
        return [Unreadable(u.position, u.reason, voided.get(u.position)) for _, u in sorted(found.items())]

    def unreadable_at(self, position: int) -> str | None:
        """Why the event at ``position`` cannot be read back; None when it reads (or is not there)."""
        rows = self.read_raw(position - 1, 1)
        if not rows or rows[0][0] != position:
            return None
        try:
            catalogue.record(*rows[0])
        except UnreadableEvent as e:
            return e.reason
        return None

    def position_at(self, when_iso: str) -> int:
        """The last position whose event happened at or before ``when_iso`` (UTC)."""
        last = 0
        for rec in self.read():
            if rec.at > when_iso:
                break
            last = rec.position
        return last

    # -- tamper evidence ---------------------------------------------------------

    def verify(self, anchors: Sequence[Anchor] = ()) -> Verdict:
        """Walk every stored event against the hash chain (see ``chain``), check that the
        store's own reader can read each one, and that the chain passes through ``anchors``
        (``chainwalk``: the reference walk's verdict, its intact stretches walked fast)."""
        # One bound for both reads: events and their chain rows are committed together, so up to the
        # head seen here the two agree, whatever commits while the walk goes on.
        upto = max(self.max_position(), self.chain_head()[0])
        return chainwalk.verify(self, upto, anchors)

    def verify_after(self, position: int, head: bytes, upto: int) -> Verdict:
        """Does the log still extend ``head`` at ``position``?  The stored link there must
        be ``head``, and the events after it, up to ``upto``, must chain on from it."""
        if self.link_at(position) != head:
            return Verdict(False, 0, head, position, f"the chain at position {position} is not the head it had")
        return chainwalk.verify(self, upto, after=position, prev=head, read=False)

    def _walk_exact(self, after: int, prev: bytes, upto: int, anchors: Sequence[Anchor], read: bool) -> Verdict:
        """``chain.verify``, the reference walk, over the events after ``after`` up to ``upto``."""
        links = ((p, x) for p, x in expand(self._chain_rows(after, upto)) if after < p <= upto)
        return verify(self._chain_events(after, upto), links, prev=prev, anchors=anchors,
                      read=catalogue.check_readable if read else None)

    def _segment_rows(self, after: int, upto: int, limit: int | None = None, positions: bool = True,
                      select: Callable[[str, Sequence[Any]], list[tuple]] | None = None) -> list[tuple]:
        """The walk's rows ([position,] originator id, version, topic, state) after ``after`` up to ``upto``, in
        one read (``chainwalk`` asks for a segment of a thousand at a time).  On SQLite the id comes as the
        UTF-8 bytes the link hashes (NULL for an id stored as anything but text, which the walk then leaves to
        the reference walk); on PostgreSQL as the uuid's 16 bytes (``segment_ids_raw``), whose hex digits the
        walk makes itself: the server's ``encode`` and ``convert_to`` of every id cost both sides more."""
        ph, col = self._ph(), self._id_col()
        oid = ("CASE WHEN typeof(originator_id) = 'text' THEN CAST(originator_id AS BLOB) END" if self.backend == "sqlite"
               else "uuid_send(originator_id)")
        bound = "" if limit is None else f" LIMIT {int(limit)}"
        first = f"{col}, " if positions else ""
        return (select or self._select)(
            f"SELECT {first}{oid}, originator_version, topic, state FROM {self._events_table} "
            f"WHERE {col} > {ph} AND {col} <= {ph} ORDER BY {col}{bound}", [after, upto])

    @property
    def segment_ids_raw(self) -> bool:
        """Does ``_segment_rows`` give each originator id as its 16 bytes (else as its hex digits)?"""
        return self.backend == "postgres"

    def link_position_near(self, position: int) -> int | None:
        """The position of the stored link at ``position``, else of the last one before it."""
        row = self._chain_row_at(position)
        return None if row is None else min(position, row[0] + len(row[1]) // LINK_SIZE - 1)

    def shareable(self) -> bool:
        """Can another process open this store (a file or a server, not memory)?"""
        return self.backend == "postgres" or not self._datastore.pool.is_sqlite_memory_mode

    def reader_env(self) -> dict[str, str]:
        """Settings another process opens this store with, to read it only (on PostgreSQL with one
        connection, not the hub's pool, and giving up after ``READER_CONNECT_TIMEOUT_S``)."""
        env = {**self.env, "CREATE_TABLE": "n"}
        if self.backend == "postgres":
            env.update(POSTGRES_POOL_SIZE="1", POSTGRES_MAX_OVERFLOW="0",
                       POSTGRES_CONNECT_TIMEOUT=str(READER_CONNECT_TIMEOUT_S))
        if self.backend == "sqlite" and not env["SQLITE_DBNAME"].startswith("file:"):
            env["SQLITE_DBNAME"] = f"file:{quote(str(Path(env['SQLITE_DBNAME']).resolve()))}?mode=ro"
        return env

    def chain_head(self) -> tuple[int, bytes]:
        """(position, link) of the last event in the chain; (0, GENESIS) for an empty log."""
        rows = self._select(f"SELECT first_position, links FROM {CHAIN_TABLE} ORDER BY first_position DESC LIMIT 1", [])
        if not rows:
            return 0, GENESIS
        first, links = rows[0][0], bytes(rows[0][1])
        return first + len(links) // LINK_SIZE - 1, links[-LINK_SIZE:]

    def link_at(self, position: int) -> bytes | None:
        """The stored chain link of the event at ``position``, if there is one."""
        row = self._chain_row_at(position)
        if row is None:
            return None
        first, links = row
        i = (position - first) * LINK_SIZE
        return links[i : i + LINK_SIZE] if i + LINK_SIZE <= len(links) else None

    def _chain_row_at(self, position: int) -> tuple[int, bytes] | None:
        """The chain row that holds ``position`` if any holds it: the last one starting at or before it."""
        rows = self._select(
            f"SELECT first_position, links FROM {CHAIN_TABLE} WHERE first_position <= {self._ph()} "
            "ORDER BY first_position DESC LIMIT 1", [position])
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    def _pages(self, sql: str, after: int, upto: int | None,
               select: Callable[[str, Sequence[Any]], list[tuple]] | None = None) -> Iterator[tuple]:
        """Rows of ``sql`` (which selects position first) after ``after``, page by page."""
        params = [after] if upto is None else [after, upto]
        while True:
            page = (select or self._select)(sql, params)
            yield from page
            if len(page) < READ_PAGE:
                return
            params[0] = page[-1][0]

    def _chain_events(self, after: int, upto: int | None = None) -> Iterator[tuple]:
        ph, col = self._ph(), self._id_col()
        bound = "" if upto is None else f" AND {col} <= {ph}"
        return self._pages(
            f"SELECT {col}, {self._oid()}, originator_version, topic, state FROM {self._events_table} "
            f"WHERE {col} > {ph}{bound} ORDER BY {col} LIMIT {READ_PAGE}", after, upto)

    def _chain_rows(self, after: int, upto: int | None = None,
                    select: Callable[[str, Sequence[Any]], list[tuple]] | None = None) -> Iterator[tuple]:
        """Chain rows holding a link after ``after`` (the one that holds ``after + 1`` first)."""
        ph, select = self._ph(), select or self._select
        first = select(
            f"SELECT first_position FROM {CHAIN_TABLE} WHERE first_position <= {ph} "
            "ORDER BY first_position DESC LIMIT 1", [after + 1])
        start = first[0][0] - 1 if first else after
        bound = "" if upto is None else f" AND first_position <= {ph}"
        return self._pages(
            f"SELECT first_position, links FROM {CHAIN_TABLE} WHERE first_position > {ph}{bound} "
            f"ORDER BY first_position LIMIT {READ_PAGE}", start, upto, select)

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self.committer.close()
        if self._watch is not None:
            self._watch.close()
        self.app.close()
