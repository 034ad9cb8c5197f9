"""Timestamps along a machine's start, for the benches' timelines (off unless turned on).

``mark(who, what)`` records ``(time.monotonic(), who, what)`` when tracing is on (``APZ_TRACE=1`` in
the environment, or ``enable()``), and does nothing otherwise: no list grows in a daemon that nobody
reads. ``bench/agents.py --timeline`` turns it on and prints, per agent, each step of
``agents create`` -> idle (the hub's reconcile, the node's start, the restore's steps, the harness's
HELLO) against the moment the command was given. Standard library only; it never changes what it
times.
"""

from __future__ import annotations

import os
import threading
import time

_on = bool(os.environ.get("APZ_TRACE"))
_marks: list = []
_lock = threading.Lock()


def enable(on: bool = True) -> None:
    global _on
    _on = on


def enabled() -> bool:
    return _on


def mark(who, what: str) -> None:
    """Record that ``who`` (a machine's name, an agent's cid) reached ``what`` now."""
    if _on:
        with _lock:
            _marks.append((time.monotonic(), str(who), what))


def take() -> list:
    """Every mark so far, oldest first, and forget them."""
    with _lock:
        out = sorted(_marks)
        _marks.clear()
    return out
