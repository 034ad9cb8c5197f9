"""Keeps every read model caught up with the log, rebuilds and replays them."""

from __future__ import annotations

import json
import logging
import operator
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from ..config import READ_MODELS_FILE
from ..events.gcpause import collector_paused
from ..events.records import EventRecord
from ..permissions import make_private_file
from . import parallel
from .framework import (
    CATCH_UP_BATCH,
    REBUILD_PAGE,
    Loader,
    Page,
    Projection,
    Rows,
    _State,
    decoded,
    fold,
    handler_for,
    metadata,
    positions,
)

log = logging.getLogger(__name__)


def read_model_url(*, state_dir: Path | None, database_url: str | None) -> str:
    """Read models live beside the store: the same Postgres, or their own SQLite file."""
    if database_url:
        rest = database_url.split("://", 1)[1]
        return f"postgresql+psycopg://{rest}"
    assert state_dir is not None
    return f"sqlite:///{Path(state_dir) / READ_MODELS_FILE}"


def equal_to(table: sa.Table, **values: Any) -> list:
    """Conditions ``column == value`` for every value given (None means: any)."""
    return [table.c[name] == value for name, value in values.items() if value]


def json_text(value: Any) -> str:
    """A JSON column's text: orjson's (a rebuild writes tens of thousands of JSON values, and the standard
    library's encoder was most of the writes' own time); the standard library's for what orjson refuses
    (an integer over 64 bits, a key that is not a string).  Both read back as the same value (a number
    that is not finite orjson writes as null; no event holds one, see ``events.storable``)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def make_engine(url: str, search_path: str | None = None) -> sa.Engine:
    """The read models' engine; on PostgreSQL, ``search_path`` names the schema their tables are in
    (a rebuild's second process writes into a schema of its own, ``parallel``)."""
    if url.startswith("sqlite"):
        path = sa.engine.make_url(url).database
        if path and path != ":memory:" and not path.startswith("file:"):
            make_private_file(Path(path))  # SQLite would make it with the umask's mode
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                                  json_serializer=json_text)

        @sa.event.listens_for(engine, "connect")
        def _wal(dbapi_conn: Any, _: Any) -> None:
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        return engine
    connect_args = {"options": f"-c search_path={search_path}"} if search_path else {}
    return sa.create_engine(url, pool_size=4, max_overflow=4, json_serializer=json_text, connect_args=connect_args)


#: Rows a single executemany of ``insert_many`` sends.
INSERT_BATCH = 5_000
#: From this many rows, ``insert_many`` on PostgreSQL sends them with one ``COPY``: psycopg's
#: ``executemany`` costs a statement's round of Python for every row, which was over half of a
#: rebuild's time on PostgreSQL.
COPY_FROM = 64
#: The most records a catch-up without ``most`` hands back (the newest): such a caller (a route that
#: wants the read models current, the price fetch) rarely reads them, and a long way behind it must
#: not hold the log's records while it folds: it holds one page being folded and at most this many
#: of the pages before. A caller that needs every record pages with ``most``.
SEEN_MAX = CATCH_UP_BATCH


class _InsertPlan:
    """A table's INSERT of every column compiled once for a dialect: the SQL, the columns' names in the
    statement's order, and the dialect's own bind processor of each column that has one (JSON's
    serializer, Boolean's)."""

    def __init__(self, table: sa.Table, dialect: sa.Dialect):
        cols = list(table.columns)
        compiled = table.insert().compile(dialect=dialect, column_keys=[c.key for c in cols])
        by_key = {c.key: c for c in cols}
        order = [by_key[k] for k in (compiled.positiontup if compiled.positional else [c.key for c in cols])]
        self.sql, self.positional = compiled.string, compiled.positional
        self.names = [c.name for c in order]
        self.keys = [c.key for c in order]
        bound = [(i, c, proc) for i, c in enumerate(order)
                 if (proc := c.type.dialect_impl(dialect).bind_processor(dialect)) is not None]
        self.procs = [(i, proc) for i, _, proc in bound]
        #: For ``COPY``, where every value goes as text whatever its column's type: a JSON column's dict or list
        #: as its JSON text (``_json_as_text``), not wrapped for psycopg's own JSON dumper.
        self.copy_procs = [(i, _json_as_text(c.type, proc, dialect) or proc) for i, c, proc in bound]
        self.pick = operator.itemgetter(*self.names) if len(self.names) > 1 else (lambda row: (row[self.names[0]],))
        quote = dialect.identifier_preparer.quote
        self.copy_sql = (f"COPY {dialect.identifier_preparer.format_table(table)} "
                         f"({', '.join(quote(n) for n in self.names)}) FROM STDIN") if dialect.name == "postgresql" else None

    def params(self, row: dict[str, Any]) -> tuple | dict:
        vals = self.values(row)
        return tuple(vals) if self.positional else dict(zip(self.keys, vals, strict=True))

    def values(self, row: dict[str, Any], procs: list | None = None) -> list:
        """The row's values in the statement's order, each through its column's bind processor (``procs``: other
        processors, ``copy_procs``)."""
        procs = self.procs if procs is None else procs
        try:
            vals = list(self.pick(row))
        except KeyError:  # a column the row does not name is NULL, as SQLAlchemy's insert leaves it
            vals = [row.get(n, _MISSING) for n in self.names]
            for i, proc in procs:
                if vals[i] is not _MISSING:
                    vals[i] = proc(vals[i])
            vals = [None if v is _MISSING else v for v in vals]
        else:
            for i, proc in procs:
                vals[i] = proc(vals[i])
        return vals


def _json_as_text(column_type: sa.types.TypeEngine, proc: Callable[[Any], Any],
                  dialect: sa.Dialect) -> Callable[[Any], Any] | None:
    """A JSON column's value as ``COPY`` sends it: a dict or a list as the dialect's serializer writes it (the very
    text psycopg's JSON dumper would send, the dialect having set its dumps to that serializer), anything else
    through the column's bind processor ``proc``, which wraps each value for psycopg's JSON dumper: ``COPY``ing
    100,000 transcript lines took this process 0.30-0.38 CPU s so, and 0.17-0.28 as text (the server's own
    work, some 0.8 s, the same).  None for a column that is not JSON."""
    if not isinstance(column_type, sa.JSON):
        return None
    serialize = dialect._json_serializer or json.dumps
    whole = (dict, list)

    def as_text(value: Any) -> Any:
        return serialize(value) if type(value) in whole else proc(value)

    return as_text


_MISSING = object()


def _select_by_key(table: sa.Table) -> tuple[sa.Select, list[str]]:
    """The select of one row by its primary key, with bound parameters: built once a table, so SQLAlchemy
    compiles it once (a rebuild reads rows of evictable tables back by key often: the board's dropped posts)."""
    found = table.info.get("select_by_key")
    if found is None:
        pk = list(table.primary_key.columns)
        names = [f"k{i}" for i in range(len(pk))]
        q = sa.select(table).where(*[c == sa.bindparam(n) for c, n in zip(pk, names, strict=True)])
        found = table.info["select_by_key"] = (q, names)
    return found


def create_tables(engine: sa.Engine, tables: list[sa.Table]) -> None:
    """Create those of ``tables`` that are not there yet, with their indexes.  On PostgreSQL as one script, one
    round trip (``IF NOT EXISTS``: one that another hub made since the check is left as it is). ``create_all``
    sent the read models' 122 statements one by one: 0.09-0.13 CPU s of this process on a first start, against
    0.015-0.03 s for the script (the server's own work, 0.2-0.45 s, is the same).  SQLite, in this process,
    keeps ``create_all``."""
    if engine.dialect.name != "postgresql":
        metadata.create_all(engine, tables=tables)
        return
    there = set(sa.inspect(engine).get_table_names())  # in the schema the connection writes to (its search_path)
    missing = [t for t in tables if t.name not in there]
    if not missing:
        return
    script = []
    for table in sa.schema.sort_tables(missing):
        script.append(str(sa.schema.CreateTable(table, if_not_exists=True).compile(dialect=engine.dialect)))
        script += [str(sa.schema.CreateIndex(index, if_not_exists=True).compile(dialect=engine.dialect))
                   for index in sorted(table.indexes, key=lambda ix: ix.name or "")]
    with engine.begin() as conn, conn.connection.driver_connection.cursor() as cur:
        cur.execute(";\n".join(script))  # no parameters: the text is sent as it is


_insert_plans: dict[tuple[int, str], _InsertPlan] = {}


def insert_many(conn: sa.Connection, table: sa.Table, values: list[dict[str, Any]]) -> None:
    """Insert rows with one compiled statement and the driver's executemany (on PostgreSQL, from
    ``COPY_FROM`` rows, one ``COPY``): the values SQLAlchemy's ``conn.execute(table.insert(), values)``
    would send (each through its column's bind processor), without its bookkeeping for every row,
    which was most of a rebuild's writing time."""
    plan = _insert_plans.get((id(table), conn.dialect.name))
    if plan is None:
        plan = _insert_plans[(id(table), conn.dialect.name)] = _InsertPlan(table, conn.dialect)
    if plan.copy_sql is not None and len(values) >= COPY_FROM:
        # In the connection's own transaction: the rows are written with everything else or not at all.
        with conn.connection.driver_connection.cursor() as cur, cur.copy(plan.copy_sql) as copy:
            for row in values:
                copy.write_row(plan.values(row, plan.copy_procs))
        return
    params = [plan.params(row) for row in values]
    for i in range(0, len(params), INSERT_BATCH):
        conn.exec_driver_sql(plan.sql, params[i : i + INSERT_BATCH])


#: Keys in one ``DELETE ... IN`` of ``delete_many`` (on PostgreSQL).
DELETE_BATCH = 500


def delete_many(conn: sa.Connection, table: sa.Table, keys: list[Any]) -> None:
    """Delete rows by primary key (a key of one column its value, of several a tuple).  On SQLite one compiled
    ``DELETE ... WHERE key = ?`` and the driver's executemany, a C loop (SQLAlchemy's compiling of an ``IN`` of
    500 keys, a statement for each 500, was most of a rebuild's deleting); on PostgreSQL an ``IN`` of
    ``DELETE_BATCH`` keys a statement, one round trip each."""
    pk = list(table.primary_key.columns)
    if conn.dialect.name == "sqlite":
        sql = table.info.get("delete_by_key")
        if sql is None:
            quote = conn.dialect.identifier_preparer.quote
            sql = table.info["delete_by_key"] = (f"DELETE FROM {quote(table.name)} WHERE "
                                                 + " AND ".join(f"{quote(c.name)} = ?" for c in pk))
        conn.exec_driver_sql(sql, [(k,) for k in keys] if len(pk) == 1 else [tuple(k) for k in keys])
        return
    for i in range(0, len(keys), DELETE_BATCH):
        part = keys[i : i + DELETE_BATCH]
        if len(pk) == 1:
            conn.execute(table.delete().where(pk[0].in_(part)))
        else:
            conn.execute(table.delete().where(sa.tuple_(*pk).in_(part)))


def _plan(states: list[_State], kind: str | None) -> list[tuple[_State, str, Callable]]:
    """The read models that take events of ``kind`` (None: an event that cannot be read), with
    each one's name and handler (``framework.handler_for``)."""
    return [(st, st.projection.name, h) for st in states if (h := handler_for(st.projection, kind)) is not None]


class ReadModels:
    def __init__(self, engine: sa.Engine, store: Any, projections: Iterable[Projection]):
        self.engine = engine
        self.store = store
        self.states = {p.name: _State(p, self._backed(p.new_rows())) for p in projections}
        self._lock = threading.RLock()
        self._caught_up = threading.Condition(self._lock)
        #: Called with each page's readable records as soon as it is folded, by whichever catch-up folded
        #: it (the follower's, a route's, the runtime's): the hub hands them to the bus from here, so an
        #: event folded by a caller that drops what ``catch_up`` returns still reaches the live stream.
        self.on_folded: Callable[[list[EventRecord]], None] | None = None
        #: Read models whose last catch-up failed, and why: they stay at their saved position.
        self.failing: dict[str, str] = {}

    # -- start ----------------------------------------------------------------

    def setup(self, defer_over: int | None = None) -> bool:
        """Create tables, then load each read model, rebuilding any whose version changed.

        A read model whose version changed may have changed its columns: its tables are
        dropped and made anew before the rebuild (they hold nothing the log cannot give back),
        and the tables it no longer has (``retired_tables``) dropped.
        With ``defer_over``, when the read models are more than that many events behind the log,
        the rebuilds are left to ``catch_up`` (each such read model starts empty at position 0)
        and True is returned: a hub can listen at once and catch up after."""
        create_tables(self.engine, [positions])
        with self.engine.connect() as conn:
            stored = {r.name: r for r in conn.execute(sa.select(positions))}
        moved = [s.projection for name, s in self.states.items()
                 if name in stored and stored[name].version != s.projection.version]
        changed = [t for p in moved for t in p.tables]
        if changed:
            metadata.drop_all(self.engine, tables=changed)
        retired = [name for p in moved for name in p.retired_tables]
        if retired:
            quote = self.engine.dialect.identifier_preparer.quote
            with self.engine.begin() as conn:
                for name in retired:
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {quote(name)}"))
        create_tables(self.engine, [t for s in self.states.values() for t in s.projection.tables])
        todo = [name for name in self.states
                if stored.get(name) is None or stored[name].version != self.states[name].projection.version]
        for name, st in self.states.items():
            if name not in todo:
                self._load(st, stored[name].position)
        if not todo:
            return False
        if defer_over is not None and self.store.max_position() > defer_over:
            with self.engine.begin() as conn:
                for name in todo:
                    p = self.states[name].projection
                    for table in p.tables:
                        conn.execute(table.delete())
                    conn.execute(positions.delete().where(positions.c.name == name))
                    conn.execute(positions.insert().values(name=name, version=p.version, position=0))
            for name in todo:
                st = self.states[name]
                st.rows, st.position = self._backed(st.projection.new_rows()), 0
            return True
        self._rebuild(todo)  # one pass over the log for all of them
        return False

    def behind(self) -> int:
        """How many events the slowest read model has still to fold."""
        return max(0, self.store.max_position() - self.position())

    def _loader(self, conn: sa.Connection | None = None) -> Loader:
        """Reads one row of an evictable table back from SQL: on ``conn`` (inside a rebuild's
        transaction), else on a connection of its own."""

        def load(table: sa.Table, key: Any) -> dict | None:
            q, names = _select_by_key(table)
            params = dict(zip(names, key if len(names) > 1 else (key,), strict=True))
            if conn is not None:
                r = conn.execute(q, params).first()
            else:
                with self.engine.connect() as c:
                    r = c.execute(q, params).first()
            return dict(r._mapping) if r is not None else None

        return load

    def _backed(self, rows: Rows, conn: sa.Connection | None = None) -> Rows:
        rows.load = self._loader(conn)
        return rows

    def _load(self, st: _State, position: int | None = None) -> None:
        """A read model's rows kept in memory, and its position (``position``: as just read with every other's)."""
        rows = self._backed(st.projection.new_rows())
        with self.engine.connect() as conn:
            pos = position if position is not None else conn.execute(
                sa.select(positions.c.position).where(positions.c.name == st.projection.name)
            ).scalar()
            for name, table in rows.tables.items():
                if name in rows.append_only or name in rows.evictable:
                    continue
                for r in conn.execute(sa.select(table)):
                    row = dict(r._mapping)
                    rows.data[name][Rows.key_of(table, row)] = row
        st.rows, st.position = rows, pos or 0

    # -- writing ------------------------------------------------------------

    @staticmethod
    def _write_rows(conn: sa.Connection, rows: Rows, *, everything: bool = False, fresh: bool = False) -> None:
        """Write what changed (``everything``: every row, into empty tables).  ``fresh``: the tables
        were emptied when this fold began (a rebuild), so an append-only table's new rows replace
        nothing and are inserted without a delete first."""
        for name, table in rows.tables.items():
            changed = rows.data[name].keys() if everything else rows.dirty[name]
            replaced = set() if everything or (fresh and name in rows.append_only) else changed - rows.added[name]
            gone = rows.removed[name] | replaced
            if gone and not everything:
                delete_many(conn, table, list(gone))
            values = [rows.data[name][k] for k in changed if k in rows.data[name]]
            if values:
                insert_many(conn, table, values)

    def _save_together(self, sts: list[_State], new_position: int) -> list[_State] | None:
        """Write every read model of ``sts``'s changes and move their positions to ``new_position``, in one
        transaction: each position by compare-and-set, all in one ``UPDATE``.  The read models another hub
        moved first are returned (nothing of theirs written: they are to be loaded back).  None when the
        transaction failed: nothing of it was written, and each read model is then saved alone (``_save``),
        so that one read model's failure is its own.  One commit a page, not one a read model: on PostgreSQL
        each commit waits for its write-ahead log, and a hub's every write was followed by 27 of them."""
        try:
            with self.engine.begin() as conn:
                moved = set(conn.execute(
                    positions.update()
                    .where(sa.tuple_(positions.c.name, positions.c.position)
                           .in_([(st.projection.name, st.position) for st in sts]))
                    .values(position=new_position)
                    .returning(positions.c.name)
                ).scalars())
                for st in sts:
                    if st.projection.name in moved:
                        self._write_rows(conn, st.rows)
        except Exception as e:  # noqa: BLE001 - saved one by one instead, each failure its read model's own
            log.info("the read models' save in one transaction failed (%s); saving each alone", e)
            return None
        for st in sts:
            if st.projection.name in moved:
                st.rows.clear_changes()
                st.position = new_position
        return [st for st in sts if st.projection.name not in moved]

    def _save(self, st: _State, new_position: int) -> bool:
        """Write a projection's changes and move its position by compare-and-set."""
        with self.engine.begin() as conn:
            moved = conn.execute(
                positions.update()
                .where(positions.c.name == st.projection.name, positions.c.position == st.position)
                .values(position=new_position)
            ).rowcount
            if moved != 1:
                conn.rollback()
                return False
            self._write_rows(conn, st.rows)
        st.rows.clear_changes()
        st.position = new_position
        return True

    # -- the live path --------------------------------------------------------

    def position(self) -> int:
        return min((s.position for s in self.states.values()), default=0)

    def position_of(self, name: str) -> int:
        """Where one read model is: what a reader that shows the log beside it may show (``EventStore.stream``'s
        ``upto``); where the read models are, when there is none of that name."""
        st = self.states.get(name)
        return st.position if st is not None else self.position()

    def catch_up(self, most: int | None = None) -> list[EventRecord]:
        """Fold every new event into every read model; returns the new (readable) events in order (at
        most the newest ``SEEN_MAX`` of them without ``most``).
        With ``most``, it stops once it has that many events, and never reads past them (the hub's
        follower catching up a long way hands each batch to the bus, instead of holding the whole log).
        Either way what it holds at once is bounded by a page and ``most`` (or ``SEEN_MAX``), never by
        how far behind the log it is.

        A read model's rows in memory never run ahead of its saved position: when its fold
        or its save fails, it is loaded back from SQL (else the next catch-up would fold the
        same events a second time into rows that already hold them, and a counting read
        model such as ``event_counts`` would count them twice).  Its failure is logged and
        kept in ``failing`` (the overview shows it); the other read models and the hub go on."""
        seen: list[EventRecord] = []
        page = CATCH_UP_BATCH
        with self._lock:
            while True:
                want = page if most is None else max(1, min(page, most - len(seen)))
                read, failed, recs = self._fold_page(want)
                if not read:
                    break
                if recs and self.on_folded is not None:
                    self.on_folded(recs)
                seen.extend(recs)
                del recs  # the page's records live on in ``seen`` only as far as it keeps them
                if most is None and len(seen) > SEEN_MAX:
                    del seen[:-SEEN_MAX]
                if failed or read < want or (most is not None and len(seen) >= most):
                    break
                page = REBUILD_PAGE  # far behind (a first start): bigger batches, fewer writes
            self._caught_up.notify_all()
        return seen

    def _fold_page(self, page: int) -> tuple[int, bool, list[EventRecord]]:
        """Read at most ``page`` events after the slowest read model and fold them into each read
        model that has not seen them; (events read, whether a read model failed, the readable
        records).  The page's rows and records are this call's own: nothing of the page before is
        still held while the next is read and decoded."""
        with collector_paused():  # (see gcpause: the page's objects go before the collector runs again)
            return self._fold_page_now(page)

    def _fold_page_now(self, page: int) -> tuple[int, bool, list[EventRecord]]:
        raw = self.store.read_raw(self.position(), page)
        if not raw:
            return 0, False, []
        recs = list(decoded(raw))
        last, read, topics = raw[-1][0], len(raw), [r[3] for r in raw]
        del raw
        behind = [st for st in self.states.values() if st.position < last]
        # Each event goes only to the read models that take its kind (worked out once a kind, as
        # ``fold`` does): calling every read model for every event was most of a long catch-up.
        errors: dict[str, Exception] = {}  # a read model whose fold failed: it takes no more of the page
        plans: dict[str | None, list[tuple[_State, str, Callable]]] = {}
        for rec in recs:
            readable = type(rec) is EventRecord
            kind = rec.kind if readable else None
            plan = plans.get(kind)
            if plan is None:
                plan = plans[kind] = _plan(behind, kind)
            for st, name, handler in plan:
                if rec.position > st.position and name not in errors:
                    try:
                        if readable:
                            handler(rec, st.rows)
                        else:
                            handler(rec.position, rec.reason, st.rows)
                    except Exception as e:  # noqa: BLE001 - this read model stays where it was saved
                        errors[name] = e
        paged = [st for st in behind if st.projection.paged is not None and st.projection.name not in errors]
        if paged:
            whole = Page([r.position for r in recs], topics,
                         {r.position: r.reason for r in recs if type(r) is not EventRecord}, recs.__getitem__)
            for st in paged:
                try:
                    st.projection.paged(whole.since(st.position), st.rows)
                except Exception as e:  # noqa: BLE001 - as a handler's
                    errors[st.projection.name] = e
        folded = [st for st in behind if st.projection.name not in errors]
        taken = self._save_together(folded, last) if folded else []
        if taken is None:  # saved one by one: a failure is its read model's own
            taken = []
            for st in folded:
                try:
                    if not self._save(st, last):
                        taken.append(st)
                except Exception as e:  # noqa: BLE001 - as a failed fold
                    errors[st.projection.name] = e
        for st in behind:
            name = st.projection.name
            error = errors.get(name)
            if error is None:
                self.failing.pop(name, None)
                continue
            log.error("read model %s cannot fold events %s-%s: %s", name, st.position + 1, last, error)
            self._load(st)
            self.failing[name] = f"cannot fold events after {st.position}: {error}"
        for st in taken:
            self._load(st)  # another hub moved it first: take its work
        failed = bool(errors)
        return read, failed, [r for r in recs if type(r) is EventRecord]

    def wait_for(self, position: int, timeout: float = 5.0) -> bool:
        with self._caught_up:
            return self._caught_up.wait_for(lambda: self.position() >= position, timeout)

    # -- rebuild and replay ----------------------------------------------------

    def _fold_from_zero(self, projections: list[Projection], upto: int | None) -> tuple[list[list], int]:
        slots: list[list] = [[p.new_rows(), 0] for p in projections]
        after, last = 0, 0
        while True:
            raw = self.store.read_raw(after, REBUILD_PAGE)
            if upto is not None:
                raw = [r for r in raw if r[0] <= upto]
            if not raw:
                break
            last = fold(projections, slots, raw)
            after = raw[-1][0]
            if len(raw) < REBUILD_PAGE or (upto is not None and after >= upto):
                break
        return slots, last

    def rebuild(self, name: str | None = None) -> dict[str, int]:
        """Drop and rebuild one read model (or all) from event 1; returns positions."""
        names = [name] if name else list(self.states)
        unknown = [n for n in names if n not in self.states]
        if unknown:
            raise KeyError(unknown[0])
        return self._rebuild(names)

    def _rebuild(self, names: list[str]) -> dict[str, int]:
        """One pass over the log, up to its last event now, for every read model named, in one
        transaction.  A long log's read models are split with a second process (``parallel``),
        whose tables are brought in within the same transaction."""
        with self._lock:
            projections = [self.states[n].projection for n in names]
            upto = self.store.max_position()
            with self.engine.connect() as conn:
                staging = parallel.Staging.make(self, conn) if parallel.worth_it(self, projections, upto) else None
                second = None
                try:
                    # (started first: it imports the plaza's code while this process empties the tables)
                    second = parallel.Second.start(staging) if staging is not None else None
                    with conn.begin():
                        for p in projections:
                            for table in p.tables:
                                conn.execute(table.delete())
                        slots: list[list] = [[self._backed(p.new_rows(), conn), 0] for p in projections]
                        after, skip, owned = 0, [], None
                        if second is not None:
                            after, skip, owned = parallel.first_page(self, conn, projections, slots, upto, REBUILD_PAGE,
                                                                     second)
                        theirs = second.names if second is not None else set()
                        mine = [(p, slot) for p, slot in zip(projections, slots, strict=True) if p.name not in theirs]
                        self._fold_all(conn, [p for p, _ in mine], upto, [slot for _, slot in mine], after, skip, owned)
                        folded = {p.name: slot[0] for p, slot in mine}
                        if theirs and second.finish(conn, projections, upto):
                            for p, (rows, _) in mine:  # the halves: the second process's merged in
                                if p.name in second.halves:
                                    second.merge_into(conn, p, rows)
                                    self._write_rows(conn, rows)
                                    rows.clear_changes()
                        elif theirs:  # the second process failed: its read models, and the halves whole, folded here
                            again = [p for p in projections if p.name in theirs | second.halves]
                            for p in again:
                                for table in p.tables:
                                    conn.execute(table.delete())
                            again_slots = [[self._backed(p.new_rows(), conn), 0] for p in again]
                            self._fold_all(conn, again, upto, again_slots)
                            folded.update((p.name, slot[0]) for p, slot in zip(again, again_slots, strict=True))
                        for p in projections:
                            conn.execute(positions.delete().where(positions.c.name == p.name))
                            conn.execute(positions.insert().values(name=p.name, version=p.version, position=upto))
                finally:
                    if second is not None:
                        second.cancel()
                    if staging is not None:
                        staging.remove(self, conn)
            for p in projections:
                st = self.states[p.name]
                rows = folded.get(p.name)
                if rows is None:  # folded by the second process: the rows kept in memory read from SQL
                    self._load(st)
                else:
                    rows.load = self._loader()
                    st.rows, st.position = rows, upto
        return {n: upto for n in names}

    def _fold_all(self, conn: sa.Connection, projections: list[Projection], upto: int,
                  slots: list[list] | None = None, after: int = 0, skip: Sequence[str] = (),
                  owned: dict[str, set[str]] | None = None) -> list[list]:
        """Fold the events after ``after`` up to ``upto`` into ``projections``' tables on ``conn`` (their
        ``slots``: [rows, position] each, fresh ones by default): each page of events is folded and its
        rows written before the next is read, so a rebuild holds no more rows in memory than the live
        hub does.  ``skip``: topics none of ``projections`` takes, not read at all; ``owned``: the topics folded
        here into each read model named (``framework.fold``)."""
        if slots is None:
            slots = [[self._backed(p.new_rows(), conn), 0] for p in projections]
        while projections and after < upto:
            with collector_paused():  # (see gcpause: a page's records are freed before it runs)
                raw = self.store.read_raw(after, min(REBUILD_PAGE, upto - after), skip, upto)
                if not raw:
                    break
                fold(projections, slots, raw, owned)
                after = raw[-1][0]
                del raw  # not held while the next page is read
                for rows, _ in slots:
                    self._write_rows(conn, rows, fresh=True)
                    rows.clear_changes()
        return slots

    def replay(self, upto: int | None = None, names: list[str] | None = None) -> dict[str, dict]:
        """Every read model as it was at position ``upto``, folded in memory only."""
        chosen = [self.states[n].projection for n in (names or list(self.states))]
        slots, _ = self._fold_from_zero(chosen, upto)
        return {p.name: rows.snapshot() for p, (rows, _) in zip(chosen, slots)}

    def live(self, names: list[str] | None = None) -> dict[str, dict]:
        """Every read model as the hub shows it now, read back from SQL."""
        out = {}
        with self.engine.connect() as conn:
            for n in names or list(self.states):
                rows = self.states[n].projection.new_rows()
                for tname, table in rows.tables.items():
                    for r in conn.execute(sa.select(table)):
                        row = dict(r._mapping)
                        rows.data[tname][Rows.key_of(table, row)] = row
                out[n] = rows.snapshot()
        return out

    def rows(self, table: sa.Table, *where: Any, order_by: Any = None, limit: int | None = None) -> list[dict]:
        q = sa.select(table).where(*where)
        if order_by is not None:
            q = q.order_by(order_by)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]
