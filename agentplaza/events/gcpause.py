"""Python's cyclic collector held off while a batch of the log is read and folded.

Reading a page of events makes tens of thousands of container objects (rows, parsed states,
records) that live until the page is done.  The collector, which runs every 700 new containers,
would walk them again and again, and every older object of the process with them: over a million
events that was a fifth of ``audit verify`` and a tenth of a rebuild.  Held off for the page, and
the page's objects freed before it runs again, it finds nothing of theirs to walk.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for this block (left off if it already was); a block that makes cycles
    must not be long, as nothing collects them until it ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
