"""apid, the hub's program: the ``apid`` command, or ``python -m agentplaza.apid``.

This module imports nothing of the hub's until its collector is held off: apid starts with Python's cyclic
collector off, and turns it on once it listens (``api.main``).  Importing the hub's code and opening the hub
make some 150,000 objects that live as long as the process, and the collector, which runs every 700 new
container objects, walked them again and again: about 350 collections before apid listened, 0.11-0.20 CPU s
of a 0.95 s import and 0.17 s more while a hub on PostgreSQL opened (issue 25: apid listens within 2 s,
whatever the log's length).  What the start makes that is garbage is freed by reference counting; a cycle
among it waits for the collector's first passes once the hub listens.
"""

from __future__ import annotations

import gc
import sys


def main(argv: list[str] | None = None) -> int:
    gc.disable()
    try:
        from .api.main import main as serve

        return serve(argv)
    finally:
        gc.enable()  # (``serve`` turned it on when the hub listened; here for a start that failed)


if __name__ == "__main__":
    sys.exit(main())
