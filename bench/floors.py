"""Rebuild and ``audit verify`` against their floors: the parts of each that no trimming of the plaza's
own Python removes, measured in the same process over the same log (issue 25's goals: rebuild >= 150,000
events/s, verify >= 500,000 events/s).

  python bench/floors.py [--events N] [--backend sqlite|postgres]

The log is ``bench/scale.py``'s mix (its ``LogWriter``: the real store and its chain).  Every figure is
CPU time of this process an event (``time.process_time``, the best of three): on these shared 2-core
machines wall time says more about the neighbours than the code.  The floors:

- verify's: reading every row (``_chain_events``), simdjson's check of every state (``joined.check_objects``
  checks states so, without making their objects), and the SHA-256 of every link's bytes, each alone;
- the rebuild's: reading every row, decoding it (``catalogue.record``) and the rebuild with its SQL writes
  left out (so the handlers' and ``Rows``' share shows too).

The last line gives each pass's rate and its ratio to its floor (1.0x would be a walk that costs nothing
beyond those parts).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("POSTGRES_PASSWORD", "")

import scale  # noqa: E402
import simdjson  # noqa: E402

from agentplaza.events import catalogue  # noqa: E402
from agentplaza.events.store import EventStore  # noqa: E402
from agentplaza.projections.registry import all_projections  # noqa: E402
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url  # noqa: E402


def best_us(fn, n: int, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best * 1e6 / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="apz-floors."))
    pg = scale.TempPostgres().start() if args.backend == "postgres" else None
    try:
        folders = scale.folders_in(root)
        url = pg.new_database() if pg else None
        store = EventStore.open(state_dir=folders.state, database_url=url)
        n = scale.LogWriter(store).write(args.events)
        engine = make_engine(read_model_url(state_dir=folders.state, database_url=url))
        rm = ReadModels(engine, store, all_projections())
        rm.setup()
        rows = store.read_raw(0, n)

        def chain_rows() -> None:
            for _ in store._chain_events(0, n):
                pass

        def parse() -> None:
            check = simdjson.Parser().parse
            for r in rows:
                check(bytes(r[4]))

        def hashes() -> None:
            sha, prev = hashlib.sha256, bytes(32)
            for r in rows:
                sha(b"".join((prev, r[0].to_bytes(8, "big"), str(r[1]).encode(), r[2].to_bytes(8, "big"),
                              r[3].encode(), b"\x00", bytes(r[4])))).digest()

        def decode() -> None:
            record = catalogue.record
            for r in rows:
                try:
                    record(*r)
                except catalogue.UnreadableEvent:
                    pass

        def verify() -> None:
            assert store.verify().intact

        def pages() -> None:
            for after in range(0, n, 20_000):
                store.read_raw(after, 20_000)

        f_read, f_parse, f_hash = best_us(chain_rows, n), best_us(parse, n), best_us(hashes, n)
        v = best_us(verify, n)
        r_read, r_decode = best_us(pages, n), best_us(decode, n)
        r = best_us(rm.rebuild, n)
        write_rows, backed = ReadModels._write_rows, ReadModels._backed
        ReadModels._write_rows = staticmethod(lambda conn, rows, **kw: None)  # the fold alone, rows kept
        ReadModels._backed = lambda self, rows, conn=None: rows
        try:
            r_fold = best_us(rm.rebuild, n)
        finally:
            ReadModels._write_rows, ReadModels._backed = write_rows, backed
        v_floor, r_floor = f_read + f_parse + f_hash, r_read + r_decode
        print(f"{args.backend}, {n:,} events, CPU an event (best of 3):")
        print(f"  verify {v:.2f} us: floor {v_floor:.2f} us (reading {f_read:.2f}, simdjson {f_parse:.2f}, "
              f"SHA-256 {f_hash:.2f}); the walk's own {v - v_floor:.2f} us")
        print(f"  rebuild {r:.2f} us: reading {r_read:.2f}, decoding {r_decode:.2f}, handlers and Rows "
              f"{r_fold - r_floor:.2f}, SQL writes {r - r_fold:.2f} us")
        print(f"floors {args.backend} {n:,} events: verify {1e6 / v:,.0f} ev/CPU-s, {v / v_floor:.2f}x its floor "
              f"(floor {1e6 / v_floor:,.0f}/s; goal 500,000); rebuild {1e6 / r:,.0f} ev/CPU-s, {r / r_floor:.2f}x "
              f"reading and decoding (floor {1e6 / r_floor:,.0f}/s; goal 150,000)")
        store.close()
        engine.dispose()
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
