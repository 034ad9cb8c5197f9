"""``audit verify`` over a long log: ``chain.verify``'s walk, a segment of events at a time.

``chain.verify`` is the reference: it walks one event at a time and names the first position
that breaks.  Over a million events most of its time is Python's own work per event.  This walk
proves the same things a *segment* of events at a time (``SEGMENT_EVENTS``), with the per-event
work done inside C loops (``map``, ``zip``, ``joined.check_objects``):

- the events' positions are exactly the links' positions (no event without a link, no link
  without an event);
- each link is SHA-256 of the *stored* link before it and its event.  Checked against the stored
  link before, not the one just computed: when every link of a range matches, the stored links are
  the chain recomputed from the range's first link, by induction.  That is also what lets the
  log be split between two processes (``verify``, ``PARALLEL_FROM``);
- every state reads back (``storable.read_back``) and upcasts, where the walk reads.

A segment that proves all of it is passed over; the first that does not is walked again by
``chain.verify`` from its start, which finds the break and words the verdict.  So the verdict
is always the reference walk's own: this only makes the intact stretches fast.

A segment's states are checked to read without making their objects (``joined.check_objects``).
"""

from __future__ import annotations

import binascii
import hashlib
import itertools
import json
import logging
import struct
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..second_process import SecondProcess, cpus, exit_now
from . import catalogue, joined, storable
from .chain import GENESIS, LINK_SIZE, Anchor, Verdict
from .gcpause import collector_paused

#: Events checked at once: big enough that each segment's C loops pay for its Python (and, on PostgreSQL,
#: its query), small enough that its states joined (some 350 kB) stay in the CPU's cache while they are
#: hashed, parsed and scanned: 1M events on SQLite, 490-525k events/s in segments of 2,000, 560-570k in
#: segments of 1,000 (PostgreSQL, 400k events: 270-290k and 295-300k).
SEGMENT_EVENTS = 1_000
#: From this many events a second process walks the log's second half (starting one costs some 0.05 s;
#: below this many, the log is walked in well under a second by one process).
PARALLEL_FROM = 200_000
#: Twice what one process walks while the second one starts (some 0.1 s, at some 240,000 events/s a process
#: on PostgreSQL): the first takes half of it more.  With 10,000 the first process, 400k events on
#: PostgreSQL, waited 0.04-0.09 s for the second at the end; with 40,000, 0-0.01 s.
HELPER_START_EVENTS = 40_000

log = logging.getLogger(__name__)

_u64 = struct.Struct(">Q").pack
_sha256 = hashlib.sha256
_digest = type(_sha256()).digest  # (the method itself: ``methodcaller`` looks it up for every event)


@dataclass(frozen=True)
class Segment:
    """Consecutive stored links: ``positions`` and their ``links`` (32 bytes each), the events
    after position ``after`` up to the last of them.  ``whole`` is False where a chain row's
    bytes are not a whole number of links (the reference walk then says what is wrong)."""

    after: int
    positions: tuple[int, ...]
    links: bytes
    whole: bool = True

    @property
    def last(self) -> int:
        return self.positions[-1]

    @property
    def dense(self) -> bool:
        """Are its positions every one after ``after`` (no gap before or between them)?  Then its
        events are read without their positions: as many rows as links in (after, last] are exactly
        those positions (the store's positions are unique)."""
        return self.last - self.after == len(self.positions)


def segments(chain_rows: Iterable[tuple[int, bytes]], after: int, upto: int, size: int = SEGMENT_EVENTS) -> Iterator[Segment]:
    """The stored links after ``after`` up to ``upto``, cut into segments of ``size``."""
    ranges: list[range] = []
    parts: list[bytes] = []
    n, whole, start = 0, True, after
    for first, links in chain_rows:
        links = bytes(links)
        row_whole = len(links) % LINK_SIZE == 0
        lo = max(first, after + 1)
        hi = min(first + len(links) // LINK_SIZE, upto + 1)  # one past the last position kept
        while lo < hi:
            take = min(hi - lo, size - n)
            i = (lo - first) * LINK_SIZE
            ranges.append(range(lo, lo + take))
            parts.append(links[i : i + take * LINK_SIZE])
            whole = whole and row_whole
            n += take
            lo += take
            if n == size:
                seg = Segment(start, tuple(itertools.chain.from_iterable(ranges)), b"".join(parts), whole)
                yield seg
                ranges, parts, n, whole, start = [], [], 0, True, seg.last
    if n:
        yield Segment(start, tuple(itertools.chain.from_iterable(ranges)), b"".join(parts), whole)


class _Tails(dict):
    """topic -> its bytes and the NUL after them, as the link hashes them."""

    def __missing__(self, topic: str) -> bytes:
        tail = self[topic] = topic.encode() + b"\x00"
        return tail


class SegmentCheck:
    """Does a segment of rows (position, originator id, version, topic, state) prove intact?

    False, or any exception, means "not proven": the reference walk then looks at it.  The ids come as
    the UTF-8 bytes of their hex digits, as the link hashes them, or with ``raw_ids`` as their 16 bytes.
    With ``upcast`` False the states are read but not upcast, and ``topics`` collects the topics met (the
    second process: it leaves the upcasters, and the imports of the classes that hold them, to the first)."""

    def __init__(self, read: bool, upcast: bool = True, raw_ids: bool = False) -> None:
        self.read, self.upcast, self.raw_ids = read, upcast, raw_ids
        self.topics: set[str] = set()
        self._tails = _Tails()
        self._unpackers: dict[int, struct.Struct] = {}

    def __call__(self, prev: bytes, seg: Segment, rows: Sequence[tuple]) -> bool:
        """``rows``: (originator id, version, topic, state) for a dense segment, else with the position first."""
        if not seg.whole or len(rows) != len(seg.positions):
            return False
        if seg.dense:
            oids, versions, topics, states = zip(*rows)
            positions = seg.positions
        else:
            positions, oids, versions, topics, states = zip(*rows)
            if positions != seg.positions:
                return False
        n = len(positions)
        unpack = self._unpackers.get(n)
        if unpack is None:
            unpack = self._unpackers[n] = struct.Struct("32s" * n)  # the links before, in one call
        befores = unpack.unpack(prev + seg.links[: (n - 1) * LINK_SIZE])
        if self.raw_ids:
            oids = map(binascii.hexlify, oids)
        inputs = zip(befores, map(_u64, positions), oids, map(_u64, versions),
                     map(self._tails.__getitem__, topics), states)
        if b"".join(map(_digest, map(_sha256, map(b"".join, inputs)))) != seg.links:
            return False
        return not self.read or self._readable(topics, states)

    def _readable(self, topics: tuple[str, ...], states: tuple[bytes, ...]) -> bool:
        """Would ``catalogue.check_readable`` pass every state?  (See ``joined.check_objects``.)"""
        exact = joined.check_objects(states)
        if exact is None:
            return False
        for i in exact:  # ``read_back``'s second look, for the states named
            storable.read_back(states[i])  # raises StateProblem: not proven
        met = set(topics)
        self.topics |= met
        for topic in met if self.upcast else ():
            if catalogue.upcast_target(topic) > 1:  # its states read as objects, and upcast
                event_class = catalogue.describe(topic)[2]
                for i in (i for i, t in enumerate(topics) if t == topic):
                    catalogue.upcast(event_class, storable.read_back(states[i]))
        return True


@dataclass(frozen=True)
class Stretch:
    """How far the fast walk proved the log: ``count`` events, the last at ``last`` (0: none) with
    link ``head``; ``stopped`` is where a segment did not prove (its ``after``), None when the whole
    stretch did."""

    count: int
    last: int
    head: bytes
    stopped: int | None
    #: The topics of the states read without their upcasters (the second process's).
    topics: frozenset[str] = frozenset()

    def as_dict(self) -> dict:
        return {"count": self.count, "last": self.last, "head": self.head.hex(),
                "stopped": self.stopped, "topics": sorted(self.topics)}

    @classmethod
    def from_dict(cls, d: dict) -> Stretch:
        return cls(d["count"], d["last"], bytes.fromhex(d["head"]), d["stopped"], frozenset(d["topics"]))


def walk(store: Any, after: int, prev: bytes, upto: int, read: bool, size: int | None = None,
         upcast: bool = True) -> Stretch:
    """The fast walk over (``after``, ``upto``], from ``prev``, the link at ``after``."""
    check = SegmentCheck(read, upcast, raw_ids=store.segment_ids_raw)
    size = size or SEGMENT_EVENTS
    count, last, at = 0, 0, after  # ``last``: the last position walked, 0 for none (as ``chain.verify``)
    with store._held_select() as select:  # one transaction for the walk's reads
        for seg in segments(store._chain_rows(after, upto, select), after, upto, size):
            with collector_paused():
                try:
                    proven = check(prev, seg, store._segment_rows(at, seg.last, positions=not seg.dense, select=select))
                except Exception:  # noqa: BLE001 - anything the fast check cannot read, the reference walk words
                    proven = False
            if not proven:
                return Stretch(count, last, prev, at, topics(check))
            prev, count, last, at = seg.links[-LINK_SIZE:], count + len(seg.positions), seg.last, seg.last
        if store._segment_rows(at, upto, limit=1, select=select):
            return Stretch(count, last, prev, at, topics(check))  # events after the last link
    return Stretch(count, last, prev, None, topics(check))


def topics(check: SegmentCheck) -> frozenset[str]:
    return frozenset() if check.upcast else frozenset(check.topics)


def verify(store: Any, upto: int, anchors: Sequence[Anchor] = (), *, after: int = 0, prev: bytes = GENESIS,
           read: bool = True) -> Verdict:
    """``chain.verify``'s verdict over the stored events after ``after`` (whose link is ``prev``)
    up to ``upto``, the intact stretches walked fast, the log's second half by a second process
    when it is long."""
    anchors = tuple(sorted(anchors, key=lambda a: a.position))
    helper = _Helper.start(store, after, upto, read)
    split = helper.split if helper else upto
    try:
        mine = walk(store, after, prev, split, read)
    except BaseException:
        if helper is not None:
            helper.cancel()  # (not left reading a log nobody waits for)
        raise
    stretches = [mine]
    if helper is not None:
        theirs = helper.result() if mine.stopped is None else helper.cancel()
        if theirs is not None and any(catalogue.upcast_target(t) > 1 for t in theirs.topics):
            theirs = None  # states it read that have upcasters: their half is walked here, upcasters and all
        if theirs is None and mine.stopped is None:  # the helper failed to report: walk its half here
            theirs = walk(store, split, mine.head, upto, read)
        if theirs is not None:
            stretches.append(theirs)
    count, last, head, stopped = 0, 0, prev, None
    for s in stretches:
        count, last, head, stopped = count + s.count, s.last if s.count else last, s.head, s.stopped
        if stopped is not None:
            break
    # Up to ``last`` the stored links are the chain; an anchor there holds when its link is its head
    # (positions with events are positions with links: each segment proved it).
    for a in anchors:
        if a.position <= max(last, after) and (a.position <= after or store.link_at(a.position) != a.head):
            return store._walk_exact(after, prev, upto, anchors, read)  # the reference words it
    if stopped is None:
        if any(a.position > last for a in anchors):
            return store._walk_exact(after, prev, upto, anchors, read)
        return Verdict(True, count, head, position=last, anchors=anchors)
    rest = store._walk_exact(stopped, head, upto, [a for a in anchors if a.position > stopped], read)
    return replace(rest, count=count + rest.count, position=rest.position or last, anchors=anchors)


@dataclass
class _Helper:
    """The second process, ``python -m agentplaza.events.chainwalk``, walking from ``split`` on."""

    second: SecondProcess
    split: int

    @classmethod
    def start(cls, store: Any, after: int, upto: int, read: bool) -> _Helper | None:
        if upto - after < PARALLEL_FROM or cpus() < 2 or not store.shareable():
            return None
        split = store.link_position_near((after + upto + HELPER_START_EVENTS) // 2)
        if split is None or not after < split < upto:
            return None
        job = {"env": store.reader_env(), "after": split, "upto": upto, "read": read, "size": SEGMENT_EVENTS}
        second = SecondProcess.start("agentplaza.events.chainwalk", job, "audit verify")
        return None if second is None else cls(second, split)

    def result(self) -> Stretch | None:
        """Its stretch; None when it did not give one (the first process then walks its half)."""
        answer = self.second.result()
        try:
            return None if answer is None else Stretch.from_dict(answer)
        except (ValueError, KeyError, TypeError):
            log.warning("audit verify: the second process answered something else; walking its half here")
            return None

    def cancel(self) -> None:
        self.second.cancel()



def main() -> None:
    """The helper: walk (after, upto] of the store the settings on standard input name; print the stretch."""
    job = json.loads(sys.stdin.buffer.read())
    from .store import EventStore

    store = EventStore(job["env"])
    try:
        after, upto = job["after"], job["upto"]
        prev = store.link_at(after)
        stretch = (Stretch(0, 0, GENESIS, after) if prev is None
                   else walk(store, after, prev, upto, job["read"], job["size"], upcast=False))
        sys.stdout.write(json.dumps(stretch.as_dict()))
    finally:
        store.close()


if __name__ == "__main__":
    main()
    exit_now()
