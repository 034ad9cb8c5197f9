"""The live bus: every stored event, in order, to every watching console.

Read-only.  The limits, each beside its rule below:

- At most ``MAX_TOTAL`` sockets in all; one more is refused (``BusFull``).
- At most ``MAX_PER_ADDRESS`` sockets from one address; one more does not lock that address out: the
  oldest socket from the address yields to it (``Subscriber.yielded``; the socket closes with
  ``CLOSE_YIELDED``), so idle sockets never keep the owner's own ``agentplaza events`` out.
- A subscriber that falls more than ``MAX_BEHIND`` events behind is cut off (it reconnects and reads
  the current state again).
- A socket over which nothing has passed for ``IDLE_S`` (no event sent to it, no message from its
  client) is idle; ``Bus.idle_for`` says how long it may still wait before it is closed with ``CLOSE_IDLE``.

The clock is injected (``Bus(clock=...)``) so the rules can be checked without waiting.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from ..wire import CLOSE_BEHIND, CLOSE_FULL, CLOSE_IDLE, CLOSE_YIELDED, WS_SUBPROTOCOL  # noqa: F401 - the bus's wire
from .records import EventRecord

MAX_PER_ADDRESS = 8
MAX_TOTAL = 64
MAX_BEHIND = 1024
#: A live stream is legitimately quiet while nothing happens: only a socket quiet for this long is closed
#: (the CLI reconnects at once on ``CLOSE_IDLE``).
IDLE_S = 15 * 60.0
SUBPROTOCOL = WS_SUBPROTOCOL


class BusFull(Exception):
    pass


class Subscriber:
    def __init__(self, address: str, families: frozenset[str] | None, wake: Callable[[], None], now: float):
        self.address = address
        self.families = families
        self.queue: deque[EventRecord] = deque()
        self.dropped = False
        self.yielded = False  # a newer socket from the same address took this one's place
        self.wake = wake
        self.active_at = now  # when something last passed over the socket, either way

    def offer(self, records: list[EventRecord]) -> None:
        wanted = [r for r in records if self.families is None or r.family in self.families]
        if not wanted:
            return
        if len(self.queue) + len(wanted) > MAX_BEHIND:
            self.dropped = True
            self.queue.clear()
        else:
            self.queue.extend(wanted)
        self.wake()


class Bus:
    def __init__(self, clock: Callable[[], float] = time.monotonic, idle_s: float = IDLE_S) -> None:
        self.subscribers: list[Subscriber] = []
        self.clock, self.idle_s = clock, idle_s

    def subscribe(self, address: str, families: Iterable[str] | None, wake: Callable[[], None]) -> Subscriber:
        if len(self.subscribers) >= MAX_TOTAL:
            raise BusFull(f"the hub accepts at most {MAX_TOTAL} sockets")
        same = [s for s in self.subscribers if s.address == address]
        if len(same) >= MAX_PER_ADDRESS:
            oldest = same[0]
            oldest.yielded = True
            self.unsubscribe(oldest)
            oldest.wake()
        sub = Subscriber(address, frozenset(families) if families else None, wake, self.clock())
        self.subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        if sub in self.subscribers:
            self.subscribers.remove(sub)

    def touch(self, sub: Subscriber) -> None:
        """Something passed over ``sub``'s socket (an event sent, a message from its client)."""
        sub.active_at = self.clock()

    def idle_for(self, sub: Subscriber) -> float:
        """How long ``sub`` may stay quiet from now before it is idle (0: it is idle now)."""
        return max(0.0, sub.active_at + self.idle_s - self.clock())

    def publish(self, records: list[EventRecord]) -> None:
        if records:
            for sub in list(self.subscribers):
                sub.offer(records)
