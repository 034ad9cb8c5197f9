"""Tamper evidence: every stored event is hash-chained to the one before it.

The link of the event at notification position ``n`` is

    link(n) = SHA-256( link(prev) || n as 8 bytes || originator id || version as 8 bytes
                       || topic || 0x00 || state )

where ``prev`` is the event stored just before it in the global order and the
first link hangs off ``GENESIS``.  Editing, removing or reordering any stored
event breaks every link from there on; ``verify`` names the first position
whose link does not match.

The links live in their own table, ``CHAIN_TABLE``, written in the same
transaction as the events: one row per transaction, holding the first
position and the 32-byte links of its events one after another (positions in
one transaction are consecutive, as the store writes under a lock).  One row
per transaction instead of one per event keeps the chain's cost low.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

CHAIN_TABLE = "event_chain"
GENESIS = bytes(32)
_u64 = struct.Struct(">Q").pack


_sha256 = hashlib.sha256


def link(prev: bytes, position: int, originator_id: str, version: int, topic: str, state: bytes) -> bytes:
    return _sha256(
        b"".join((prev, _u64(position), originator_id.encode(), _u64(version), topic.encode(), b"\x00", state))
    ).digest()


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


LINK_SIZE = 32
REMOVED = "a chain link has no event (an event was removed)"


def expand(chain_rows: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    """(position, link) for every link in the stored chain rows, in order."""
    for first, links in chain_rows:
        links = bytes(links)
        for i in range(0, len(links), LINK_SIZE):
            yield first + i // LINK_SIZE, links[i : i + LINK_SIZE]


def verify(events: Iterable[tuple[int, str, int, str, bytes]], links: Iterable[tuple[int, bytes]]) -> Verdict:
    """Walk the events and the links side by side, both in position order."""
    prev, count = GENESIS, 0
    link_iter = iter(links)
    pending = next(link_iter, None)
    for position, originator_id, version, topic, state in events:
        if pending is not None and pending[0] < position:
            return Verdict(False, count, prev, pending[0], REMOVED)
        if pending is None or pending[0] > position:
            return Verdict(False, count, prev, position, "event has no chain link")
        raw = state.encode() if isinstance(state, str) else bytes(state)
        expected = link(prev, position, originator_id, version, topic, raw)
        if expected != pending[1]:
            return Verdict(False, count, prev, position, "event does not match its chain link")
        prev, count = expected, count + 1
        pending = next(link_iter, None)
    if pending is not None:
        return Verdict(False, count, prev, pending[0], REMOVED)
    return Verdict(True, count, prev)
