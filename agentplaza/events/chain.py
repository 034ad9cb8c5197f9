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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

CHAIN_TABLE = "event_chain"
GENESIS = bytes(32)
_u64 = struct.Struct(">Q").pack


_sha256 = hashlib.sha256


def link(prev: bytes, position: int, originator_id: str, version: int, topic: str, state: bytes) -> bytes:
    return _sha256(
        b"".join((prev, _u64(position), originator_id.encode(), _u64(version), topic.encode(), b"\x00", state))
    ).digest()


#: The longest reason quoted from a reader that could not read an event.
READ_ERROR_CHARS_MAX = 200


@dataclass(frozen=True)
class Anchor:
    """A position and the chain's head there, held outside the chain: a signed
    checkpoint of the hub's (``source`` "checkpoint") or one the owner kept ("given")."""

    position: int
    head: bytes
    source: str
    at: str | None = None

    def as_dict(self) -> dict:
        return {"position": self.position, "head": self.head.hex(), "source": self.source, "at": self.at,
                "anchor": f"{self.head.hex()}@{self.position}"}

    def name(self) -> str:
        return "the anchor given" if self.source == "given" else f"the signed checkpoint of {self.at}"


@dataclass(frozen=True)
class Verdict:
    intact: bool
    count: int
    head: bytes
    broken_at: int | None = None
    problem: str | None = None
    #: The position of the last event walked (0: none).
    position: int = 0
    #: The anchors the log was checked against.
    anchors: tuple[Anchor, ...] = ()

    def as_dict(self) -> dict:
        return {
            "intact": self.intact,
            "count": self.count,
            "head": self.head.hex(),
            "position": self.position,
            "broken_at": self.broken_at,
            "problem": self.problem,
            "anchors": [a.as_dict() for a in self.anchors],
        }


LINK_SIZE = 32
REMOVED = "a chain link has no event (an event was removed)"


def expand(chain_rows: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    """(position, link) for every link in the stored chain rows, in order."""
    for first, links in chain_rows:
        links = bytes(links)
        for i in range(0, len(links), LINK_SIZE):
            yield first + i // LINK_SIZE, links[i : i + LINK_SIZE]


def verify(
    events: Iterable[tuple[int, str, int, str, bytes]],
    links: Iterable[tuple[int, bytes]],
    *,
    prev: bytes = GENESIS,
    anchors: Sequence[Anchor] = (),
    read: Callable[[int, str, int, str, bytes], object] | None = None,
) -> Verdict:
    """Walk the events and the links side by side, both in position order.

    The walk starts from ``prev`` (the link just before the first event given).
    At each position, in this order: the event has its link; the link matches
    the event; ``read`` (the store's own reader) can read the event; and where an
    anchor holds this position, the link there is the anchor's head.  An anchor
    whose position the walk passes without an event there, or never reaches,
    names events removed.
    """
    count, last = 0, 0
    todo = sorted(anchors, key=lambda a: a.position)
    checked = tuple(todo)
    link_iter = iter(links)
    topic_tails: dict[str, bytes] = {}
    sha256, u64 = _sha256, _u64
    pending = next(link_iter, None)

    def broken(at: int, problem: str) -> Verdict:
        return Verdict(False, count, prev, at, problem, last, checked)

    for position, originator_id, version, topic, state in events:
        if pending is not None and pending[0] < position:
            return broken(pending[0], REMOVED)
        if pending is None or pending[0] > position:
            return broken(position, "event has no chain link")
        if todo and todo[0].position < position:
            a = todo[0]
            return broken(a.position, f"no event at position {a.position}, which {a.name()} holds (events were removed)")
        raw = state if type(state) is bytes else (state.encode() if isinstance(state, str) else bytes(state))
        tail = topic_tails.get(topic)
        if tail is None:
            tail = topic_tails[topic] = topic.encode() + b"\x00"
        # ``link`` inline (the same bytes hashed), with each topic's bytes encoded once: the walk's hot loop
        expected = sha256(b"".join((prev, u64(position), originator_id.encode(), u64(version), tail, raw))).digest()
        if expected != pending[1]:
            return broken(position, "event does not match its chain link")
        if read is not None:
            try:
                read(position, originator_id, version, topic, raw)
            except Exception as e:  # noqa: BLE001 - any reader failure is the finding
                reason = f"{type(e).__name__}: {e}"[:READ_ERROR_CHARS_MAX]
                return broken(position, f"the event's stored bytes cannot be read ({reason})")
        while todo and todo[0].position == position:
            a = todo.pop(0)
            if a.head != expected:
                return broken(position, f"the chain at position {position} differs from {a.name()} "
                                        "(an event at or before it was changed and the chain after it recomputed)")
        prev, count, last = expected, count + 1, position
        pending = next(link_iter, None)
    if pending is not None:
        return broken(pending[0], REMOVED)
    if todo:
        a = todo[0]
        return broken(last + 1, f"the log ends at position {last}, before position {a.position} "
                                f"that {a.name()} holds (events after {last} were removed)")
    return Verdict(True, count, prev, position=last, anchors=checked)
