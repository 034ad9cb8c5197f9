"""Read models: folds over the notification log, each with its tracked position.

A ``Projection`` names its tables (SQLAlchemy ``Table`` objects) and one
handler per event kind it cares about.  A handler reads an ``EventRecord`` and
changes ``Rows``, an in-memory view of the projection's tables; the runner
writes the changed rows and the new position in one SQL transaction, so a read
model and its position never disagree.  The same fold serves the live hub, a
rebuild from event 1 and a replay up to any position, so the three cannot
drift apart.

Two hub processes may run the same projection on one Postgres: the position is
advanced with a compare-and-set, and the loser reloads and carries on, so no
event is applied twice.  No event is skipped either: the store writes under a
table lock in notification order (see ``events.recorders``), so when position
N is visible every lower position is committed or gone for good.

A read model that only counts events folds a page at a time (``on_page``,
``Page``): a rebuild then makes no record of each event for it, and only checks
that each reads.

An event that cannot be read back (``events.storable``) is stepped over by
every read model, the same way live, in a rebuild and in a replay, so a read
model still equals its rebuild; a projection that wants to know of it defines
``on_unreadable(position, reason, rows)`` (the ``unreadable`` read model
keeps the list the owner sees).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import threading
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ..events.catalogue import describe, record, records
from ..events.joined import Separator
from ..events.records import EventRecord, UnreadableEvent

metadata = sa.MetaData()

positions = sa.Table(
    "rm_positions",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
)

#: Events folded between two writes of a read model during catch-up.
CATCH_UP_BATCH = 2_000
#: Events read per round trip during a rebuild or replay.
REBUILD_PAGE = 20_000
#: Events decoded at once, their states read in one call (``decoded``): some 90 kB of states, which stay in the
#: CPU's cache while they are read and their records made.  Alone, a page of the 1M log's mix decodes in 3.6 us an
#: event one by one and 2.6-2.9 at 128 to 1,000 at a time; within a fold, its handlers between, 64 to 1,000 at a
#: time fold alike, some 0.2 us an event under one by one.
DECODE_JOINED = 256

Handler = Callable[[EventRecord, "Rows"], None]
UnreadableHandler = Callable[[int, str, "Rows"], None]
PageHandler = Callable[["Page", "Rows"], None]


@dataclass(frozen=True)
class Page:
    """A page of the log as ``Projection.on_page`` sees it: each event's position and topic, in order; the
    positions of those that cannot be read, and why (``unreadable``: it may name positions before the page's
    first); and ``record(i)``, the record of the i-th event (a readable one), made when asked for."""

    positions: Sequence[int]
    topics: Sequence[str]
    unreadable: Mapping[int, str]
    record: Callable[[int], EventRecord]

    def since(self, position: int) -> Page:
        """The events after ``position`` (a read model that has folded up to it)."""
        start = bisect.bisect_right(self.positions, position)
        if start == 0:
            return self
        whole = self.record
        return Page(self.positions[start:], self.topics[start:], self.unreadable, lambda i: whole(start + i))

    def only(self, topics: Container[str]) -> Page:
        """The events of ``topics`` only."""
        kept = [i for i, topic in enumerate(self.topics) if topic in topics]
        whole = self.record
        return Page([self.positions[i] for i in kept], [self.topics[i] for i in kept], self.unreadable,
                    lambda i: whole(kept[i]))


def append_only(table: sa.Table) -> sa.Table:
    """Mark a table whose handlers only ever ``put`` rows under new keys (a journal,
    a history).  Its rows are written and then dropped from memory, so a hub's
    memory does not grow with the log; ``get`` sees only rows not yet written."""
    table.info["append_only"] = True
    return table


def evictable(table: sa.Table) -> sa.Table:
    """Mark a keyed table that grows with the log (every task, every hour's bucket, every
    payment): its rows are dropped from memory once written, and a handler's ``get`` of a row
    not in memory reads it back from SQL (``Rows.load``).  So a hub's memory does not grow with
    the tasks that ended or the hours that passed.  Queries read such a table from SQL, never
    from ``Rows``."""
    table.info["evictable"] = True
    return table


#: Rows of each evictable table kept after they were written, the most recently written (``Rows.recent``):
#: a handler that reads back a row written a page before (a board post dropped, a task claimed) finds it
#: here instead of in SQL, a query each (on PostgreSQL a round trip: a rebuild over a million events made
#: some twenty thousand of them).  A fixed number, so a hub's memory still does not grow with the log.
EVICTED_KEPT = 1_000

#: Reads one row back from SQL: (table, primary key) -> the row, or None.
Loader = Callable[[sa.Table, Any], "dict[str, Any] | None"]


class Rows:
    """The rows of a projection's tables, keyed by primary key, with changes tracked.

    ``load``, when set (the runner sets it while it folds), reads back a row of an evictable
    table that is not in memory; without it (a replay in memory) every row stays in memory."""

    def __init__(self, tables: Iterable[sa.Table]):
        self.tables = {t.name: t for t in tables}
        self.data: dict[str, dict[Any, dict[str, Any]]] = {n: {} for n in self.tables}
        self.dirty: dict[str, set[Any]] = {n: set() for n in self.tables}
        self.removed: dict[str, set[Any]] = {n: set() for n in self.tables}
        #: Keys ``add``ed since the last write: SQL holds no row under them, so none is deleted before their insert.
        self.added: dict[str, set[Any]] = {n: set() for n in self.tables}
        self.append_only = {n for n, t in self.tables.items() if t.info.get("append_only")}
        self.evictable = {n for n, t in self.tables.items() if t.info.get("evictable")}
        #: The rows of each evictable table last written and dropped from ``data``, oldest first: exactly
        #: what SQL holds for them (``EVICTED_KEPT`` at most a table).
        self.recent: dict[str, dict[Any, dict[str, Any]]] = {n: {} for n in self.evictable}
        self.load: Loader | None = None
        #: Each table's key of a row (``key_of``, as one C call) and its rows, changed and removed keys, in
        #: one look-up: a rebuild puts every row it folds.
        self._slots = {n: (operator.itemgetter(*(c.name for c in t.primary_key.columns)), self.data[n],
                           self.dirty[n], self.removed[n]) for n, t in self.tables.items()}

    @staticmethod
    def key_of(table: sa.Table, row: dict[str, Any]) -> Any:
        cols = table.info.get("pk_names")
        if cols is None:  # worked out once per table: a rebuild asks for every row it puts
            cols = table.info["pk_names"] = tuple(c.name for c in table.primary_key.columns)
        return row[cols[0]] if len(cols) == 1 else tuple(row[c] for c in cols)

    def get(self, table: str, key: Any) -> dict[str, Any] | None:
        _, data, _, removed = self._slots[table]
        row = data.get(key)
        if row is None and self.load is not None and table in self.evictable and key not in removed:
            row = self.recent[table].pop(key, None)
            if row is None:
                row = self.load(self.tables[table], key)
            if row is not None:
                data[key] = row
        return row

    def all(self, table: str) -> list[dict[str, Any]]:
        return list(self.data[table].values())

    def put(self, table: str, row: dict[str, Any]) -> None:
        key_of, data, dirty, removed = self._slots[table]
        key = key_of(row)
        data[key] = row
        dirty.add(key)
        removed.discard(key)

    def add(self, table: str, row: dict[str, Any]) -> None:
        """``put`` a row under a key no row has had before: the one event that makes it (an aggregate's
        ``Created``, once in the log).  Its write inserts it without first deleting a row under its key: a
        rebuild over a million events deleted some seventy thousand rows that were not there."""
        self.put(table, row)
        self.added[table].add(self._slots[table][0](row))

    def delete(self, table: str, key: Any) -> None:
        # A row of an evictable table may be in SQL only: its removal is written either way.
        held = self.data[table].pop(key, None) is not None
        if table in self.recent:
            self.recent[table].pop(key, None)
        if held or (self.load is not None and table in self.evictable):
            self.dirty[table].discard(key)
            self.removed[table].add(key)

    def clear_changes(self) -> None:
        """After a write: forget what changed, and the written rows of append-only and evictable tables
        (an evictable table's rows stay while nothing can read them back from SQL)."""
        for n in self.tables:
            self.dirty[n].clear()
            self.removed[n].clear()
            self.added[n].clear()
        for n in self.append_only:
            self.data[n].clear()
        if self.load is not None:
            for n in self.evictable:
                written, recent = self.data[n], self.recent[n]
                for key, row in written.items():
                    recent.pop(key, None)  # (to the newest place)
                    recent[key] = row
                for key in list(itertools.islice(recent, max(0, len(recent) - EVICTED_KEPT))):
                    del recent[key]
                written.clear()

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every table's rows, sorted by key: what a person would read."""
        return {
            n: [dict(rows[k]) for k in sorted(rows, key=repr)] for n, rows in self.data.items()
        }


class Projection:
    """Subclass with ``name``, ``version``, ``tables`` and ``on_<Kind_Name>`` handlers.

    A handler for the kind "Plaza.Held" is the method ``on_Plaza_Held``; a
    method ``on_any`` receives every kind that has no handler of its own.
    A method ``on_page(page, rows)`` receives each page of events at once, as a
    ``Page`` (their positions and topics, the ones that cannot be read, and a
    record when asked for one), after the page's events went to the handlers:
    a read model that only counts events needs no record of each (a rebuild
    would make a million of them for it).
    A read model each of whose rows comes from the events of one topic (a count
    by kind) or from one event (an unreadable one) may define ``merge(rows,
    theirs)``: a rebuild in two processes then folds it in both, each over the
    topics whose events it reads (``fold``'s ``owned``: its ``on_page`` and
    ``on_unreadable``; its handlers see their kinds in both), and merges the
    other's rows, ``theirs`` (table name -> rows), into this one's (``parallel``).
    Bumping ``version`` makes the hub rebuild the read model at its next start;
    ``retired_tables`` names the tables an earlier version had and this one has
    not, dropped then.
    """

    name: str = ""
    version: int = 1
    tables: tuple[sa.Table, ...] = ()
    retired_tables: tuple[str, ...] = ()
    merge: Callable[[Rows, dict[str, list[dict[str, Any]]]], None] | None = None

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}
        self.fallback: Handler | None = getattr(self, "on_any", None)
        self.unreadable: UnreadableHandler | None = getattr(self, "on_unreadable", None)
        self.paged: PageHandler | None = getattr(self, "on_page", None)
        for attr in dir(self):
            if attr.startswith("on_") and attr not in ("on_any", "on_unreadable", "on_page"):
                self.handlers[attr[3:].replace("_", ".", 1)] = getattr(self, attr)

    def new_rows(self) -> Rows:
        return Rows(self.tables)

    def handler(self, kind: str) -> Handler | None:
        return self.handlers.get(kind, self.fallback)


@dataclass
class _State:
    projection: Projection
    rows: Rows
    position: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def decoded(raw_rows: Sequence[tuple],
            wanted: Container[str] | None = None) -> Iterator[EventRecord | UnreadableEvent | None]:
    """The record of each stored row in order, or the reason it cannot be read, as a value: ``DECODE_JOINED``
    states read at a time in one call (``catalogue.records``).  With ``wanted``, a row of a topic it does not hold
    is only checked: None when it reads."""
    sep = Separator()  # (drawn after the rows were read, as it must be)
    for first in range(0, len(raw_rows), DECODE_JOINED):
        yield from records(raw_rows[first : first + DECODE_JOINED], sep, wanted)


def handler_for(p: Projection, kind: str | None) -> Callable | None:
    """Which of a projection's handlers takes events of ``kind``: its own ``on_<Kind>``, else its
    ``on_any``; for an event that cannot be read (``kind`` None), its ``on_unreadable``.  The one
    rule for live, rebuild and replay (each works it out once a kind)."""
    return p.unreadable if kind is None else p.handlers.get(kind, p.fallback)


def reads_all(p: Projection) -> bool:
    """Must ``p`` see every event: it hears of the events that cannot be read (every event is checked to know), or
    it folds whole pages (``on_page``)?"""
    return p.unreadable is not None or p.paged is not None


def takes(p: Projection, kind: str) -> bool:
    """Does ``p`` see events of ``kind`` (a handler for it, or ``reads_all``)?"""
    return handler_for(p, kind) is not None or reads_all(p)


def apply(p: Projection, rows: Rows, rec: EventRecord | UnreadableEvent) -> None:
    """Fold one decoded event into one projection's rows (not its ``on_page``)."""
    unreadable = isinstance(rec, UnreadableEvent)
    handler = handler_for(p, None if unreadable else rec.kind)
    if handler is not None:
        if unreadable:
            handler(rec.position, rec.reason, rows)
        else:
            handler(rec, rows)


def fold(projections: list[Projection], rows_list: list, raw_rows: Sequence[tuple],
         owned: Mapping[str, Container[str]] | None = None) -> int:
    """Apply raw stored rows to each projection's rows; returns the last position seen.

    ``rows_list[i]`` is projection i's ``Rows`` and its current position as a
    two-item list [rows, position]; events at or below that position are skipped.
    A record is made only of the events some projection has a handler for, and each
    goes only to those projections (worked out once per topic: a rebuild folds every
    event here); the other events are read only when some projection ``reads_all``,
    and then only checked.  Then each ``on_page`` gets the page.

    ``owned``: for a read model named in it (one that ``merge``s, a rebuild's other
    process folding the other half: ``parallel``), the only topics whose events its
    ``on_page`` and ``on_unreadable`` see here.
    """
    pairs = list(zip(projections, rows_list, strict=True))
    plans: dict[str, list[tuple[list, Handler]]] = {}
    for topic in {raw[3] for raw in raw_rows}:
        kind = describe(topic)[0]
        plans[topic] = [(slot, h) for p, slot in pairs if (h := handler_for(p, kind)) is not None]
    scopes = owned or {}
    hearing = [(p.unreadable, slot, scopes.get(p.name)) for p, slot in pairs if p.unreadable is not None]
    paged = [(p.paged, slot, scopes.get(p.name)) for p, slot in pairs if p.paged is not None]
    wanted = {topic for topic, plan in plans.items() if plan}
    looked_at = raw_rows if hearing or paged else [raw for raw in raw_rows if raw[3] in wanted]
    unreadable: dict[int, str] = {}
    for raw, rec in zip(looked_at, decoded(looked_at, wanted)):
        if rec is None:  # it reads; no handler here wants its record
            continue
        position = raw[0]
        if type(rec) is EventRecord:  # the hot path
            for slot, handler in plans[raw[3]]:
                if position > slot[1]:
                    handler(rec, slot[0])
        else:
            unreadable[position] = rec.reason
            for handler, slot, scope in hearing:
                if position > slot[1] and (scope is None or raw[3] in scope):
                    handler(position, rec.reason, slot[0])
    if paged and raw_rows:
        page = Page([raw[0] for raw in raw_rows], [raw[3] for raw in raw_rows], unreadable,
                    lambda i: record(*raw_rows[i]))
        for handler, slot, scope in paged:
            handler((page if scope is None else page.only(scope)).since(slot[1]), slot[0])
    return raw_rows[-1][0] if raw_rows else 0
