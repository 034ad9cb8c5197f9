"""Crash recovery: what to do when a kept-alive machine's guest stops by itself.

A guest that shuts down, resets (``-no-reboot``: QEMU exits) or crashes
(``panic=-1``: a reset) ends its QEMU process. If nobody asked for that (no
stop, kill, sleep, wipe, restore or move was under way) and the machine is
kept alive, it is started again with the same name, workspace and spec: from
the youngest snapshot that holds memory (a checkpoint or its sleep snapshot)
when that is younger than a day, else cold. A disk-only checkpoint is never
used: it has no memory to resume. After three recoveries within ten minutes
the machine stays exited.

``plan`` is the pure decision; ``QemuMachine`` acts on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

MAX_RECOVERIES = 3                  # recoveries allowed within the window; one more crash: exited
RECOVERY_WINDOW_S = 600             # ten minutes
SNAPSHOT_MAX_AGE_S = 86400          # a snapshot older than a day is not resumed: boot cold


@dataclasses.dataclass(frozen=True)
class Plan:
    action: str                     # "exit" | "snapshot" | "cold"
    snapshot: str | None = None  # the snapshot to restore (action "snapshot")
    reason: str = ""


def recent(recoveries: Iterable[float], now: float) -> list:
    return [t for t in recoveries if now - RECOVERY_WINDOW_S < t <= now]


def plan(now: float, recoveries: Iterable[float], snapshots: Iterable, enabled: bool = True,
         deliberate: bool = False) -> Plan:
    """``snapshots``: objects with name, memory, created_at (``vmm.snapshot.Manifest``)."""
    if deliberate:
        return Plan("exit", reason="the machine was stopped on purpose")
    if not enabled:
        return Plan("exit", reason="recovery is off")
    n = len(recent(recoveries, now))
    if n >= MAX_RECOVERIES:
        return Plan("exit", reason=f"{n} recoveries within {RECOVERY_WINDOW_S // 60} minutes; "
                                   f"staying exited")
    usable = [s for s in snapshots
              if s.memory and s.kind in ("sleep", "checkpoint")
              and 0 <= now - s.created_at < SNAPSHOT_MAX_AGE_S]
    if usable:
        best = max(usable, key=lambda s: s.created_at)
        return Plan("snapshot", best.name, f"recovering from {best.kind} {best.name}")
    return Plan("cold", reason="no snapshot with memory younger than a day: booting cold")
