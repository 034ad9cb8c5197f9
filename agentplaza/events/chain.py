"""Tamper evidence: every stored event is hash-chained to the one before it.

The link of the event at notification position ``n`` is

    link(n) = SHA-256( link(prev) || n as 8 bytes || originator id || version as 8 bytes
                       || topic || 0x00 || state )

where ``prev`` is the event stored just before it in the global order and the
first link hangs off ``GENESIS``.  Editing, removing or reordering any stored
event breaks every link from there on; ``verify`` names the first position
whose link does not match.  The links live in their own table,
``CHAIN_TABLE``, written in the same transaction as the events.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Iterable

CHAIN_TABLE = "event_chain"
GENESIS = bytes(32)
_u64 = struct.Struct(">Q").pack


def link(prev: bytes, position: int, originator_id: str, version: int, topic: str, state: bytes) -> bytes:
    h = hashlib.sha256(prev)
    h.update(_u64(position))
    h.update(originator_id.encode())
    h.update(_u64(version))
    h.update(topic.encode())
    h.update(b"\x00")
    h.update(state)
    return h.digest()


@dataclass(frozen=True)
class Verdict:
    intact: bool
    count: int
    head: bytes
    broken_at: int | None = None
    problem: str | None = None

    def as_dict(self) -> dict:
        return {
            "intact": self.intact,
            "count": self.count,
            "head": self.head.hex(),
            "broken_at": self.broken_at,
            "problem": self.problem,
        }


def verify(rows: Iterable[tuple[int, str, int, str, bytes, bytes | None]]) -> Verdict:
    """Walk (position, originator id, version, topic, state, stored link) rows in order."""
    prev = GENESIS
    count = 0
    for position, originator_id, version, topic, state, stored in rows:
        if stored is None:
            return Verdict(False, count, prev, position, "event has no chain link")
        if originator_id is None:
            return Verdict(False, count, prev, position, "chain link has no event (an event was removed)")
        raw = state.encode() if isinstance(state, str) else bytes(state)
        expected = link(prev, position, originator_id, version, topic, raw)
        if expected != bytes(stored):
            return Verdict(False, count, prev, position, "event does not match its chain link")
        prev = expected
        count += 1
    return Verdict(True, count, prev)
