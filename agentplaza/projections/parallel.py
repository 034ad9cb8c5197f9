"""A long rebuild in two processes: the read models split between this process and a second one.

A rebuild folds the whole log into every read model, and most of its time is Python's own work
for each event: decoding it, the handlers, the rows written.  Read models do not read each other,
so from ``PARALLEL_FROM`` events they are split in two (``split``): this process folds its share
and ``python -m agentplaza.projections.parallel`` folds the other, up to the same position, into
tables of its own (``Staging``: on SQLite a file beside the read models, attached to this
process's connection; on PostgreSQL a schema of its own in the same database).  This process then
brings those tables in inside the rebuild's one transaction (``Staging.bring_in``: on PostgreSQL they
take the read models' tables' place, on SQLite their rows are copied), so a rebuild is still all or
nothing, and a read model rebuilt by the second process is row for row the one this process would
have made (the same ``ReadModels._fold_all``).  If the second process cannot start or fails, this
process folds its share too.

A read model that ``merge``s (``halves``: ``event_counts``, ``unreadable``, which see every event) is
folded by both: the second process folds into it the events it reads, after the first page, and
this one the rest (``framework.fold``'s ``owned``), then merges the second's rows in.  Else the
process holding it would read and check every event of the log.

The split (``first_page``): the second process starts at once and imports the plaza's code while
this one folds the rebuild's first page, weighing each read model topic by topic (its handlers, and
its writes shared out over the events it took) and each event's decoding (``fold_weighed``).  The
log's mix of topics comes from ``SAMPLE_EVENTS`` events at random positions (``mix_of``: a log's
first page may not look like the rest).  Read models are then handed out, the costliest first, to
whichever process then ends sooner (``split``; a process reads and decodes once each event that any
of its read models takes, and reads no other: ``unread``).  The split keeps a clock: this process has
spent the first page's time already, the second begins to fold only once it has imported the code
and made its tables (``IMPORT_S``, ``SETUP_S``), and folds at ``SECOND_PACE``.  Only read models the
second process builds the same way (``registry.all_projections``, the same class) can go to it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import random
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..events.catalogue import describe, record, records
from ..events.gcpause import collector_paused
from ..events.joined import Separator
from ..events.records import EventRecord
from ..permissions import make_private_file
from ..second_process import SecondProcess, cpus, exit_now
from .framework import DECODE_JOINED, Page, Projection, Rows, apply, handler_for, takes

if TYPE_CHECKING:
    from .runner import ReadModels

log = logging.getLogger(__name__)

#: From this many events in the log a rebuild uses a second process (starting it, and copying its
#: tables back, cost some 0.7 s: below this many a rebuild takes under about two seconds).
PARALLEL_FROM = 100_000
#: About how long the second process takes to import the plaza's code: it starts with the rebuild and imports
#: while this process folds the first page.
IMPORT_S = 0.4
#: About how long it then takes, given its job, to open the store and make its tables before it folds, by
#: database (on PostgreSQL: a schema's tables made over a connection of its own).
SETUP_S = {"sqlite": 0.02, "postgresql": 0.15}
#: The second process folds its share in about this part of the time this process's first page weighed it at:
#: measured 0.86 to 0.93 on both databases by swapping the same read models between the two processes (it
#: writes into new tables of its own, on SQLite without a journal; the whole of why is not known).  At 1.0 the
#: second process ended 0.3 to 0.4 s before this one on PostgreSQL; at 0.9 the rebuild was some 12% faster.
SECOND_PACE = 0.9
#: Events at random positions whose topics give the log's mix (a query for each 500, `EventStore.topics_at`).
SAMPLE_EVENTS = 2_000
#: Pieces of ``DECODE_JOINED`` events from all along the first page checked alone to weigh a check (``fold_weighed``).
CHECKS_WEIGHED = 4
#: The second process's tables: the attached database's name on SQLite, the schema's prefix on PostgreSQL.
STAGING = "rm_rebuild"


# -- the split ------------------------------------------------------------------------------------------------


@dataclass
class Weights:
    """What a rebuild's first page cost, by topic: reading an event, checking that it reads, making its record,
    and each read model's handlers (with its writes shared out over the events it took), in seconds and events
    (``fold_weighed``)."""

    decode: dict[str, list] = field(default_factory=dict)  # topic -> [seconds, events]: checked and its record made
    spent: dict[str, dict[str, list]] = field(default_factory=dict)  # read model -> topic -> [seconds, events]
    read: float = 0.0  # seconds to read one event's row
    scan: float = 0.0  # of which seconds to step over one, not read (a topic ``skip``ped: the database still looks)
    check: float = 0.0  # seconds to check that one event reads, no record made (``catalogue.records``' ``wanted``)

    def per_event(self, name: str, topic: str) -> float:
        """A read model's seconds for one event of ``topic``."""
        return _mean(self.spent.get(name, {}), topic)

    def decode_one(self, topic: str) -> float:
        return _mean(self.decode, topic)


def _mean(costs: dict[str, list], topic: str) -> float:
    """Seconds an event of ``topic`` from [seconds, events] by topic; for a topic the page did not hold, the
    mean over all of them."""
    s, n = costs.get(topic) or [sum(v[0] for v in costs.values()), sum(v[1] for v in costs.values())]
    return s / n if n else 0.0


def _takes(p: Projection, topic: str) -> bool:
    """Does ``p`` see events of ``topic`` (read, and at least checked)?"""
    return takes(p, describe(topic)[0])


def _decodes(p: Projection, topic: str) -> bool:
    """Does ``p`` want the records of ``topic``'s events (a handler for them)?"""
    return handler_for(p, describe(topic)[0]) is not None


def fold_weighed(projections: list[Projection], rows_list: list, raw_rows: list[tuple]) -> Weights:
    """``framework.fold`` of one page, timing each read model's handlers and the events' decoding: records made
    ``DECODE_JOINED`` at a time, their time shared out over the events by their states' lengths after what
    checking each costs (``Weights.check``: ``CHECKS_WEIGHED`` pieces of the page checked alone, the fastest);
    an ``on_page``'s time shared out over every event of the page."""
    w = Weights(spent={p.name: {} for p in projections})
    pairs = list(zip(projections, rows_list, strict=True))
    plans: dict[str, list] = {}
    for topic in {raw[3] for raw in raw_rows}:
        kind = describe(topic)[0]
        plans[topic] = [(p, slot, w.spent[p.name].setdefault(topic, [0.0, 0]))
                        for p, slot in pairs if handler_for(p, kind) is not None]
    hearing = [(p, slot) for p, slot in pairs if p.unreadable is not None]
    paged = [(p, slot) for p, slot in pairs if p.paged is not None]
    wanted = {topic for topic, plan in plans.items() if plan}
    looked_at = raw_rows if hearing or paged else [raw for raw in raw_rows if raw[3] in wanted]
    sep = Separator()
    for at in range(1, CHECKS_WEIGHED + 1):  # (the fastest of a few: the second process, starting, shares the CPU)
        part = looked_at[len(looked_at) * at // (CHECKS_WEIGHED + 1) :][:DECODE_JOINED]
        if part:
            t0 = time.perf_counter()
            records(part, sep, ())
            w.check = min(w.check or 1.0, (time.perf_counter() - t0) / len(part))
    unreadable: dict[int, str] = {}
    for start in range(0, len(looked_at), DECODE_JOINED):
        part = looked_at[start : start + DECODE_JOINED]
        t0 = time.perf_counter()
        recs = records(part, sep, wanted)
        made = time.perf_counter() - t0 - w.check * len(part)
        per_byte = max(0.0, made) / max(1, sum(len(raw[4]) for raw in part if raw[3] in wanted))
        for raw, rec in zip(part, recs, strict=True):
            if raw[3] in wanted:
                cost = w.decode.setdefault(raw[3], [0.0, 0])
                cost[0] += w.check + per_byte * len(raw[4])
                cost[1] += 1
            if type(rec) is EventRecord:
                for p, slot, spent in plans[raw[3]]:
                    t0 = time.perf_counter()
                    apply(p, slot[0], rec)
                    spent[0] += time.perf_counter() - t0
                    spent[1] += 1
            elif rec is not None:  # it cannot be read
                unreadable[rec.position] = rec.reason
                for p, slot in hearing:
                    apply(p, slot[0], rec)
    if paged and raw_rows:
        page = Page([raw[0] for raw in raw_rows], [raw[3] for raw in raw_rows], unreadable,
                    lambda i: record(*raw_rows[i]))
        events = collections.Counter(page.topics)
        for p, slot in paged:
            t0 = time.perf_counter()
            p.paged(page.since(slot[1]), slot[0])
            took = time.perf_counter() - t0
            for topic, n in events.items():
                spent = w.spent[p.name].setdefault(topic, [0.0, 0])
                spent[0] += took * n / len(raw_rows)
                spent[1] += n
    return w


def add_writes(w: Weights, name: str, seconds: float) -> None:
    """Share a read model's writes of the page out over the events it took."""
    mine = w.spent.get(name, {})
    events = sum(v[1] for v in mine.values())
    for v in mine.values():
        v[0] += seconds * v[1] / events if events else 0.0


def halves(projections: list[Projection], movable: set[str]) -> list[Projection]:
    """The read models both processes fold, each over the topics whose events it reads, the halves merged at the end
    (``Projection.merge``; only ones the second process builds the same way)."""
    return [p for p in projections if p.merge is not None and p.name in movable]


def split(w: Weights, mix: dict[str, float], projections: list[Projection], movable: set[str], events: int,
          done: int = 0, elapsed: float = 0.0, begins: float = 0.0) -> set[str]:
    """The names of the read models the second process folds (only ones in ``movable``; not the ``halves``, which
    both fold): the split that ends both processes' work over ``events`` events the soonest, with each read model's
    cost for an event of each topic as the first page weighed it (``w``) and the log's ``mix`` of topics (each one's
    share of a sample from all along it: a log's first page may not look like the rest).  Read models go out the
    costliest first, each to the process it then ends the sooner; a process reads and checks each event once,
    whichever of its read models see it, makes its record once, whichever want it, and reads no event none of them
    takes (``unread``), though the database still steps over every event for it (``Weights.scan``).  The halves
    fold, in the second process, the topics it reads, and in the first the rest (``owned``).

    The clock: this process has spent ``elapsed`` seconds and folded ``done`` events of every read model (the
    first page: the second process's share of it is thrown away), and the second process folds its first
    event ``begins`` seconds after the rebuild began (it folds from event 1)."""
    both = {p.name for p in halves(projections, movable)}
    cost = {p.name: {t: events * share * w.per_event(p.name, t) for t, share in mix.items() if _takes(p, t)}
            for p in projections}
    reading = {t: events * share * (w.read - w.scan + w.check) for t, share in mix.items()}  # read, and checked
    scanning = events * w.scan  # a process that reads any event steps over them all
    left = (events - done) / events if events else 0.0  # the share of the log this process has still to fold
    making = {t: events * share * max(0.0, w.decode_one(t) - w.check) for t, share in mix.items()}  # its record
    # What a read model reads (a half: the events of its handlers' kinds, the rest of what it sees goes with the
    # topics of the process), and the topics whose records it wants.
    sees = {p.name: {t for t in mix if (_decodes if p.name in both else _takes)(p, t)} for p in projections}
    wants = {p.name: {t for t in mix if _decodes(p, t)} for p in projections}
    halves_see = set().union(*(sees[n] for n in both))
    halves_want = set().union(*(wants[n] for n in both))

    def ends(groups: list[list[Any]]) -> tuple[float, float]:
        """When each process ends, given [handlers' and writes' seconds, topics seen, topics made, names] each."""
        (spent0, seen0, made0, _), (spent1, seen1, made1, names1) = groups
        if both:
            seen1 = seen1 | halves_see if names1 else set()
            rest = set(mix) - seen1  # the halves' topics in the first process
            seen0, made0 = seen0 | halves_see | rest, made0 | halves_want
            made1 = made1 | (halves_want if names1 else set())
            spent0 += sum(cost[n].get(t, 0.0) for n in both for t in rest)
            spent1 += sum(cost[n].get(t, 0.0) for n in both for t in seen1)
        first = elapsed + left * (spent0 + scanning * bool(seen0) + sum(map(reading.__getitem__, seen0))
                                  + sum(map(making.__getitem__, made0)))
        second = begins + SECOND_PACE * (spent1 + scanning * bool(seen1) + sum(map(reading.__getitem__, seen1))
                                  + sum(map(making.__getitem__, made1)))
        return first, second if names1 else 0.0

    def with_(groups: list[list[Any]], g: int, name: str) -> list[list[Any]]:
        spent, seen, made, names = groups[g]
        changed = [spent + sum(cost[name].values()), seen | sees[name], made | wants[name], names | {name}]
        return [changed if h == g else groups[h] for h in (0, 1)]

    groups: list[list[Any]] = [[0.0, set(), set(), set()], [0.0, set(), set(), set()]]
    # The read models only this process can fold first, then the rest, the costliest first.
    for name in sorted(set(cost) - both, key=lambda n: (n in movable, -sum(cost[n].values()))):
        choices = [with_(groups, g, name) for g in ((0, 1) if name in movable else (0,))]
        groups = min(choices, key=lambda gs: max(ends(gs)))
    log.info("rebuild: the split's estimate: %.2f s here, %.2f s in the second process", *ends(groups))
    return groups[1][3] if groups[0][3] else set()


def mix_of(store: Any, upto: int) -> dict[str, float]:
    """Each topic's share of ``SAMPLE_EVENTS`` events at random positions all along the log."""
    rnd = random.Random(upto)
    topics = store.topics_at(sorted({rnd.randint(1, upto) for _ in range(SAMPLE_EVENTS)}))
    return {t: n / len(topics) for t, n in collections.Counter(topics).items()} if topics else {}


def unread(mix: dict[str, float], projections: list[Projection],
           both: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The topics of the mix that none of ``projections`` takes (a half, named in ``both``: that none of its handlers
    takes): a process folding only those does not read their events at all (a topic the sample missed is read, and
    its events stepped over as ever)."""
    return sorted(t for t in mix if not any((_decodes if p.name in both else _takes)(p, t) for p in projections))


def movable_names(projections: list[Projection]) -> set[str]:
    """The read models the second process can build: the registry's, of the very same class."""
    from .registry import all_projections

    theirs = {p.name: type(p) for p in all_projections()}
    return {p.name for p in projections if theirs.get(p.name) is type(p)}


# -- the second process's tables --------------------------------------------------------------------------------


@dataclass
class Staging:
    """Where the second process writes: an SQLite file attached to this process's connection as
    ``STAGING``, or a PostgreSQL schema of its own."""

    qualifier: str
    url: str
    schema: str | None = None
    path: Path | None = None
    attached: bool = False

    @classmethod
    def make(cls, rm: ReadModels, conn: sa.Connection) -> Staging | None:
        url = rm.engine.url
        if url.get_backend_name() == "sqlite":
            if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
                return None
            main = Path(url.database)
            _remove_left_behind(main)
            path = main.with_name(f"{main.name}.rebuild-{os.getpid()}-{secrets.token_hex(4)}")
            make_private_file(path)
            staging = cls(STAGING, f"sqlite:///{path}", path=path)
            try:  # attached before the rebuild's transaction begins (SQLite attaches outside a transaction only)
                conn.exec_driver_sql(f"ATTACH DATABASE ? AS {STAGING}", (str(path),))
                conn.commit()
            except sa.exc.DBAPIError as e:
                conn.rollback()
                staging.remove(rm, conn)
                log.info("rebuild: one process (cannot attach %s: %s)", path.name, e.orig)
                return None
            staging.attached = True
            return staging
        if url.get_backend_name() == "postgresql":
            schema = f"{STAGING}_{secrets.token_hex(4)}"
            try:
                with rm.engine.begin() as c:
                    c.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            except sa.exc.DBAPIError as e:  # a role that may not create a schema: one process does it all
                log.info("rebuild: one process (cannot create a schema: %s)", e.orig)
                return None
            return cls(f'"{schema}"', url.render_as_string(hide_password=False), schema=schema)
        return None

    def bring_in(self, conn: sa.Connection, projections: list[Projection]) -> None:
        """Every table of ``projections`` from the second process's into the read models' own place, inside the
        rebuild's transaction (``bring_table``)."""
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar() if self.schema is not None else None
        for p in projections:
            for table in p.tables:
                self.bring_table(conn, table, schema)

    def bring_table(self, conn: sa.Connection, table: sa.Table, schema: str | None) -> None:
        """On PostgreSQL the second process's table takes the read model's place: the read model's is dropped and
        the second process's moved into its ``schema`` with its indexes (both are the same ``Table``, made alike;
        DDL is part of the transaction there, so a rebuild that fails leaves the old one).  Nothing is copied:
        copying the rows of a million events' read models was over a second of the server's time.  On SQLite
        (a table cannot move between files) its rows are copied in, one statement a table: both tables' columns are
        in the same order."""
        quote = conn.dialect.identifier_preparer.quote
        if schema is not None:
            conn.exec_driver_sql(f"DROP TABLE {quote(schema)}.{quote(table.name)}")
            conn.exec_driver_sql(f"ALTER TABLE {self.qualifier}.{quote(table.name)} SET SCHEMA {quote(schema)}")
        else:
            conn.exec_driver_sql(f"INSERT INTO {quote(table.name)} SELECT * FROM {self.qualifier}.{quote(table.name)}")

    def rows_of(self, conn: sa.Connection, table: sa.Table) -> list[dict[str, Any]]:
        """Every row of the second process's ``table``, as the read model's own would read back."""
        theirs = table.to_metadata(sa.MetaData(), schema=self.schema or STAGING)
        return [dict(r._mapping) for r in conn.execute(sa.select(theirs))]

    def remove(self, rm: ReadModels, conn: sa.Connection) -> None:
        if self.attached:
            with contextlib.suppress(sa.exc.DBAPIError):
                conn.exec_driver_sql(f"DETACH DATABASE {STAGING}")
                conn.commit()
        if self.path is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{self.path}{suffix}").unlink()
        if self.schema is not None:
            with contextlib.suppress(sa.exc.DBAPIError), rm.engine.begin() as c:
                c.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def _remove_left_behind(main: Path) -> None:
    """Remove the files of rebuilds whose process is gone (killed in the middle): ``<main>.rebuild-<pid>-*``."""
    for left in main.parent.glob(f"{main.name}.rebuild-*"):
        pid = left.name[len(main.name) + len(".rebuild-"):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(FileNotFoundError):
                left.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


# -- this process's side --------------------------------------------------------------------------------------


def worth_it(rm: ReadModels, projections: list[Projection], upto: int) -> bool:
    """Is a second process worth starting for this rebuild (a long log, two CPUs, a store and read models
    another process can open, more than one read model)?"""
    return (upto >= PARALLEL_FROM and cpus() >= 2 and rm.store.shareable() and len(projections) > 1
            and bool(movable_names(projections)))


def first_page(rm: ReadModels, conn: sa.Connection, projections: list[Projection], slots: list[list], upto: int,
               page: int, second: Second) -> tuple[int, list[str], dict[str, set[str]] | None]:
    """Fold and write a rebuild's first page, weighing each read model, and give the second process (started
    meanwhile) the read models ``split`` gives it, and the ``halves`` after the first page; its read models' first
    page, written here, is emptied again (the second process folds them from event 1).  Returns the last position
    folded, the topics this process does not read (``unread``), and for each half the topics whose events this
    process folds into it (those the second process does not read: ``framework.fold``'s ``owned``), None when
    the halves are folded here whole; ``second.names`` is empty when it was given nothing (then stopped)."""
    with collector_paused():  # (a collection in the middle would weigh on whichever read model it fell)
        t0 = time.perf_counter()
        raw = rm.store.read_raw(0, min(page, upto))
        read = (time.perf_counter() - t0) / max(1, len(raw))
        after = raw[-1][0] if raw else 0
        t0 = time.perf_counter()  # the same rows stepped over: none of their topics read
        rm.store.read_raw(0, len(raw), sorted({r[3] for r in raw}), after)
        scan = min(read, (time.perf_counter() - t0) / max(1, len(raw)))
        w = fold_weighed(projections, slots, raw)
        w.read, w.scan = read, scan
        del raw
        for p, (rows, _) in zip(projections, slots, strict=True):
            t0 = time.perf_counter()
            rm._write_rows(conn, rows, fresh=True)
            rows.clear_changes()
            add_writes(w, p.name, time.perf_counter() - t0)
    mix = mix_of(rm.store, upto)
    movable = movable_names(projections)
    both = {p.name for p in halves(projections, movable)}
    elapsed = time.perf_counter() - second.started
    begins = max(IMPORT_S, elapsed) + SETUP_S.get(rm.engine.url.get_backend_name(), max(SETUP_S.values()))
    names = split(w, mix, projections, movable, upto, after, elapsed, begins) - both if after < upto else set()
    both = both if names else set()
    their_skip = unread(mix, [p for p in projections if p.name in names | both], both)
    if not (names and second.give(rm, names, both, after, upto, page, their_skip)):
        second.cancel()
        return after, unread(mix, projections), None
    for p in projections:
        if p.name in names:
            for table in p.tables:
                conn.execute(table.delete())
    rest = set(their_skip)  # what the second process does not read, this one folds into the halves
    return (after, [t for t in unread(mix, [p for p in projections if p.name not in names], both) if t not in rest],
            dict.fromkeys(both, rest))


@dataclass
class Second:
    """The second process of one rebuild, the read models it folds, and the halves it folds with this one."""

    staging: Staging
    process: SecondProcess | None
    names: set[str] = field(default_factory=set)
    halves: set[str] = field(default_factory=set)
    started: float = field(default_factory=time.perf_counter)  # (the rebuild's beginning)

    @classmethod
    def start(cls, staging: Staging) -> Second | None:
        """The second process, importing the plaza's code while the first page is weighed; None when it
        cannot be started."""
        process = SecondProcess.start("agentplaza.projections.parallel", None, "rebuild")
        return None if process is None else cls(staging, process)

    def give(self, rm: ReadModels, names: set[str], halves: set[str], after: int, upto: int, page: int,
             skip: list[str]) -> bool:
        """Its job: the read models ``names`` from event 1 and the ``halves`` from ``after`` (the first page, folded
        here), up to ``upto``, not reading the events of the topics in ``skip``; False when it is gone."""
        job = {"env": rm.store.reader_env(), "url": self.staging.url, "schema": self.staging.schema,
               "names": sorted(names | halves), "halves": sorted(halves), "after": after, "upto": upto,
               "page": page, "skip": skip}
        if self.process is None or not self.process.send(job):
            self.process = None
            return False
        self.names, self.halves = set(names), set(halves)
        return True

    def finish(self, conn: sa.Connection, projections: list[Projection], upto: int) -> bool:
        """Wait for it; bring its tables in when it folded up to ``upto`` (True), else False (this process
        then folds those read models, and the halves, itself)."""
        if self.process is None:
            return False
        answer, self.process = self.process.result(), None
        if answer is None or answer.get("upto") != upto or set(answer.get("names", ())) != self.names | self.halves:
            return False
        log.info("rebuild: the second process folded %s in %s s", ", ".join(sorted(self.names | self.halves)),
                 answer.get("seconds"))
        self.staging.bring_in(conn, [p for p in projections if p.name in self.names])
        return True

    def merge_into(self, conn: sa.Connection, p: Projection, rows: Rows) -> None:
        """Merge the second process's half of ``p`` into this one's ``rows`` (``Projection.merge``)."""
        assert p.merge is not None
        p.merge(rows, {table.name: self.staging.rows_of(conn, table) for table in p.tables})

    def cancel(self) -> None:
        """Stop it if it still runs (the rebuild failed)."""
        if self.process is not None:
            self.process.cancel()
            self.process = None


# -- the second process -----------------------------------------------------------------------------------------


def _unjournalled(dbapi_conn: Any, _: Any) -> None:
    """The staging file's connection: no rollback journal or write-ahead log, no syncs. The file is new and only
    read once this process has ended, and a rebuild that fails removes it: each page is written once, not
    to the log first and copied at the checkpoint after."""
    dbapi_conn.execute("PRAGMA journal_mode=OFF")
    dbapi_conn.execute("PRAGMA synchronous=OFF")


def main() -> None:
    """Fold the named read models, from event 1 up to ``upto``, into the tables the job names."""
    from ..events.store import EventStore  # (imported before the job comes: the first process is weighing)
    from . import runner
    from .registry import all_projections

    job = json.loads(sys.stdin.buffer.read() or b"null")
    if job is None:  # stopped before it was given a job
        return
    runner.REBUILD_PAGE = job["page"]  # the first process's page (a test makes it small)
    store = EventStore(job["env"])
    engine = runner.make_engine(job["url"], search_path=job["schema"])
    if engine.dialect.name == "sqlite":  # a file of its own, thrown away if anything fails: no journal to keep
        sa.event.listen(engine, "connect", _unjournalled)
    try:
        chosen = [p for p in all_projections() if p.name in set(job["names"])]
        runner.create_tables(engine, [t for p in chosen for t in p.tables])
        rm = runner.ReadModels(engine, store, chosen)
        t0 = time.perf_counter()
        with engine.begin() as conn:
            halves_from = {name: job["after"] for name in job["halves"]}  # the first process folded them that far
            slots = [[rm._backed(p.new_rows(), conn), halves_from.get(p.name, 0)] for p in chosen]
            rm._fold_all(conn, chosen, job["upto"], slots, skip=job["skip"])
        sys.stdout.write(json.dumps({"upto": job["upto"], "names": sorted(p.name for p in chosen),
                                     "seconds": round(time.perf_counter() - t0, 3)}))
    finally:
        engine.dispose()
        store.close()


if __name__ == "__main__":
    main()
    exit_now()  # (its answer written, its transaction committed)
