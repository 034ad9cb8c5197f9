"""The treasury's speed, each figure a ratio against a baseline run in the same process.

  python bench/treasury.py [--quick]

1. postings per second: treasury transfers (two wallets and one journal entry saved
   together, optimistic concurrency on each wallet, the daily limit checked) against the raw
   eventsourcing library appending the same number of events in the same shape
   (three aggregates, one event each, one transaction per command), on SQLite in a file.
2. the time to read a balance with 10,000 and with 1,000,000 journal entries behind it
   (the read model keeps one row per account, so the ratio should stay near 1.0x);
   the same for a page of ``treasury explain``.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))  # the packages before bench/ itself: bench/jhrl.py must not shadow jhrl
sys.path.append(str(ROOT / "bench"))  # the bench helpers (baseline.py)

import sqlalchemy as sa  # noqa: E402
from baseline import Counter  # noqa: E402
from eventsourcing.application import Application  # noqa: E402
from eventsourcing.domain import Aggregate  # noqa: E402
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import treasury as tc  # noqa: E402
from agentplaza.domain import treasury as t  # noqa: E402
from agentplaza.events.records import EventRecord  # noqa: E402
from agentplaza.events.store import store_env  # noqa: E402
from agentplaza.projections import treasury as rm  # noqa: E402
from agentplaza.projections.framework import metadata, positions  # noqa: E402
from agentplaza.projections.runner import ReadModels, make_engine  # noqa: E402

T0 = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)


#: Every store and read model this run makes, under one folder that is removed when it ends.
SCRATCH = Path(tempfile.mkdtemp(prefix="apz-bench-treasury-"))
atexit.register(shutil.rmtree, SCRATCH, True)


class Note(Aggregate):
    def __init__(self, memo: str, postings: dict):
        self.memo, self.postings = memo, postings


def library_rate(commands: int) -> float:
    """Events/s: per command, two aggregates counted and one created, saved in one transaction."""
    env = {k: v for k, v in store_env(state_dir=Path(tempfile.mkdtemp(dir=SCRATCH))).items()
           if k != "APPLICATION_RECORDER_TOPIC"}
    app = Application(env=env)
    a, b = Counter("a"), Counter("b")
    app.save(a, b)
    t0 = time.perf_counter()
    for _i in range(commands):
        a.count(-1)
        b.count(1)
        app.save(a, b, Note("x", {"a": -1, "b": 1}))
    seconds = time.perf_counter() - t0
    app.close()
    return 3 * commands / seconds


def treasury_rate(commands: int) -> tuple[float, float]:
    """(events/s, postings/s) for transfers of one credit between two wallets."""
    d = Path(tempfile.mkdtemp(dir=SCRATCH))
    clock = Clock(T0)
    p = Plaza(d, None, clock)
    p.wallet("1"), p.wallet("2")
    p.earn("1", commands + 10)
    before = p.store.max_position()
    t0 = time.perf_counter()
    for i in range(commands):
        if i and i % t.DAILY_SEND_LIMIT == 0:
            clock.advance(days=1)  # the daily limit resets at midnight UTC
        tc.transfer(p.cmds, p.ctx("agent:1"), "1", "2", 1, "bench")
    seconds = time.perf_counter() - t0
    events = p.store.max_position() - before
    p.close()
    return events / seconds, 2 * commands / seconds


INSERT_ONLY = ("rm_treasury_journal", "rm_treasury_postings", "rm_treasury_entry_mentions")


def new_engine() -> sa.Engine:
    engine = make_engine(f"sqlite:///{Path(tempfile.mkdtemp(dir=SCRATCH)) / 'rm.sqlite'}")
    metadata.create_all(engine, tables=[positions, *rm.TreasuryProjection.tables])
    return engine


def settle(engine: sa.Engine) -> None:
    """Fold the write-ahead log into the database, so reads see one file."""
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.exec_driver_sql("ANALYZE")


def fill_read_models(engine: sa.Engine, entries: int, already: int, wallets: int = 1000) -> None:
    """Fold ``entries`` more synthetic transfers into the treasury read model, in chunks."""
    proj = rm.TreasuryProjection()
    rows = proj.new_rows()
    with engine.connect() as conn:
        for name, table in rows.tables.items():
            if name in ("rm_treasury_accounts", "rm_treasury_totals", "rm_treasury_hours"):
                for r in conn.execute(sa.select(table)):
                    row = dict(r._mapping)
                    rows.data[name][rows.key_of(table, row)] = row
    chunk = 50_000
    for start in range(already, already + entries, chunk):
        for i in range(start, min(start + chunk, already + entries)):
            a, b = t.wallet_key(i % wallets), t.wallet_key((i * 7 + 1) % wallets)
            if a == b or i % 20 == 0:
                b = t.BUDGET  # the budget gets a posting in every 20 entries: full explain pages
            at = (T0 + dt.timedelta(seconds=i)).isoformat()
            rec = EventRecord(i + 1, f"{i:032x}", 1, "Entry.Posted", "treasury", at, "agent:1", None, "c", {
                "kind": t.TRANSFER, "memo": "bench", "task": None, "agents": [], "postings": {a: -1, b: 1},
                "shortfall": 0, "uncollected": 0, "ref": None,
            })
            proj.on_Entry_Posted(rec, rows)
        with engine.begin() as conn:
            for name in INSERT_ONLY:  # new rows only: plain inserts
                if rows.data[name]:
                    conn.execute(rows.tables[name].insert(), list(rows.data[name].values()))
                rows.data[name].clear()  # written; only the running balances stay in memory
                rows.dirty[name].clear()
            ReadModels._write_rows(conn, rows)
        rows.clear_changes()


def read_times(engine: sa.Engine, reads: int) -> tuple[float, float]:
    """Median seconds for one balance read, and for one page of the budget's explain (100 postings)."""
    acc, p, j = rm.accounts, rm.postings, rm.journal
    bal, page = [], []
    with engine.connect() as conn:
        for i in range(reads):
            key = t.wallet_key(i % 1000)
            t0 = time.perf_counter()
            conn.execute(sa.select(acc.c.balance).where(acc.c.account == key)).scalar()
            bal.append(time.perf_counter() - t0)
        for _ in range(reads):
            key = t.BUDGET
            t0 = time.perf_counter()
            conn.execute(sa.select(p.c.position, p.c.amount, j.c.memo).join(j, j.c.position == p.c.position)
                         .where(p.c.account == key).order_by(sa.desc(p.c.position)).limit(100)).all()
            page.append(time.perf_counter() - t0)
    return statistics.median(bal), statistics.median(page)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller runs (for a smoke test)")
    args = ap.parse_args()
    commands = 500 if args.quick else 3_000
    small, big = (10_000, 100_000) if args.quick else (10_000, 1_000_000)

    lib = statistics.median(library_rate(commands) for _ in range(3))
    ours = [treasury_rate(commands) for _ in range(3)]
    ev = statistics.median(o[0] for o in ours)
    post = statistics.median(o[1] for o in ours)
    print(f"treasury transfers: {post:8.0f} postings/s ({ev:.0f} events/s); "
          f"library appending the same events: {lib:8.0f} events/s; ratio {ev / lib:.2f}x")

    engines = {}
    for n in (small, big):
        engines[n] = new_engine()
        t0 = time.perf_counter()
        fill_read_models(engines[n], n, 0)
        settle(engines[n])
        print(f"(folded {n:,} entries into the read model in {time.perf_counter() - t0:.0f} s)")
    times: dict[int, list] = {small: [], big: []}
    for _ in range(5):  # alternate, so both sizes see the same machine
        for n in (small, big):
            times[n].append(read_times(engines[n], 1_000))
    b_small, b_big = (statistics.median(x[0] for x in times[n]) for n in (small, big))
    p_small, p_big = (statistics.median(x[1] for x in times[n]) for n in (small, big))
    print(f"explain page (100 postings): {p_small * 1e6:.0f} us at {small:,} entries, "
          f"{p_big * 1e6:.0f} us at {big:,}; ratio {p_big / p_small:.2f}x")
    print(f"balance read: {b_small * 1e6:.0f} us at {small:,} entries, {b_big * 1e6:.0f} us at {big:,}; "
          f"ratio {b_big / b_small:.2f}x (must not grow with the journal)")
    print(f"treasury: transfers {ev / lib:.2f}x the library's bare appends; a balance read "
          f"{b_big / b_small:.2f}x with {big // small}x the journal")



if __name__ == "__main__":
    main()
