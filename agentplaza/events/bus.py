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

Besides the stored events, the bus carries what the VMs write to their serial consoles
(``ConsoleLine``, family ``console``), to a subscriber that asks for it only (``agentplaza events
--all``). A line is not an event: it is never stored, and it has no position. The runtime hands
lines in from its own thread (``Bus.console``); the follower publishes them on the hub's loop with
the events it reads (``Bus.take_console``).

The stored events come the same way: whichever catch-up folds them (the follower's, a route's that
must read its own write, the runtime's) hands them in (``Bus.folded``, from any thread), and the
follower publishes them in the log's order on its next turn (``Bus.take_folded``). Nothing is kept
while no one watches; past ``MAX_BEHIND`` waiting, every subscriber is cut off as if it had fallen behind.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..wire import (  # noqa: F401 - the bus's wire
    CLOSE_BEHIND,
    CLOSE_FULL,
    CLOSE_IDLE,
    CLOSE_YIELDED,
    CONSOLE_FAMILY,
    CONSOLE_LINE_MAX_CHARS,
    WS_SUBPROTOCOL,
)
from .records import EventRecord

MAX_PER_ADDRESS = 8
MAX_TOTAL = 64
MAX_BEHIND = 1024
#: A live stream is legitimately quiet while nothing happens: only a socket quiet for this long is closed
#: (the CLI reconnects at once on ``CLOSE_IDLE``).
IDLE_S = 15 * 60.0
SUBPROTOCOL = WS_SUBPROTOCOL
#: Console lines waiting for the follower's next turn; past this many the oldest are let go.
CONSOLE_PENDING_MAX = 4096


@dataclass(frozen=True)
class ConsoleLine:
    """One line a VM wrote to its serial console, as the bus carries it (never stored)."""

    cid: int
    text: str
    at: str
    actor: str
    family: str = CONSOLE_FAMILY

    def as_message(self) -> dict[str, Any]:
        return {"event": CONSOLE_FAMILY, "data": {"kind": "console", "position": None, "at": self.at,
                                                  "actor": self.actor, "reason": None, "cid": self.cid,
                                                  "text": self.text}}


class BusFull(Exception):
    pass


class Subscriber:
    def __init__(self, address: str, families: frozenset[str] | None, wake: Callable[[], None], now: float,
                 console: bool = False):
        self.address = address
        self.families = families
        #: Whether the VMs' console lines reach it: asked for (``all``), or ``console`` among its families.
        self.console = console or (families is not None and CONSOLE_FAMILY in families)
        self.queue: deque[EventRecord] = deque()
        self.dropped = False
        self.yielded = False  # a newer socket from the same address took this one's place
        self.wake = wake
        self.active_at = now  # when something last passed over the socket, either way

    def offer(self, records: list[EventRecord]) -> None:
        wanted = [r for r in records if (self.console if r.family == CONSOLE_FAMILY
                                         else self.families is None or r.family in self.families)]
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
        self.console_pending: deque[ConsoleLine] = deque(maxlen=CONSOLE_PENDING_MAX)
        self._folded: list[EventRecord] = []  # folded, not yet published (``folded``)
        self._folded_lost = False  # more were folded than any subscriber may fall behind
        self._folded_lock = threading.Lock()

    def subscribe(self, address: str, families: Iterable[str] | None, wake: Callable[[], None],
                  console: bool = False) -> Subscriber:
        if len(self.subscribers) >= MAX_TOTAL:
            raise BusFull(f"the hub accepts at most {MAX_TOTAL} sockets")
        same = [s for s in self.subscribers if s.address == address]
        if len(same) >= MAX_PER_ADDRESS:
            oldest = same[0]
            oldest.yielded = True
            self.unsubscribe(oldest)
            oldest.wake()
        sub = Subscriber(address, frozenset(families) if families else None, wake, self.clock(), console)
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

    def folded(self, records: list[EventRecord]) -> None:
        """Events just folded into the read models, from any thread, in the log's order: they go out with
        the follower's next publish. Nothing is kept while no one subscribes."""
        if not self.subscribers:
            return
        with self._folded_lock:
            if self._folded_lost:
                return
            self._folded.extend(records)
            if len(self._folded) > MAX_BEHIND:  # every subscriber would be cut off by them anyway
                self._folded.clear()
                self._folded_lost = True

    def take_folded(self) -> list[EventRecord]:
        """What was folded since the last take, to publish; when more were folded than ``MAX_BEHIND``,
        every subscriber is cut off instead (it reconnects and reads the current state again)."""
        with self._folded_lock:
            out, lost = self._folded, self._folded_lost
            self._folded, self._folded_lost = [], False
        if lost:
            for sub in list(self.subscribers):
                sub.dropped = True
                sub.queue.clear()
                sub.wake()
        return out

    def console(self, cid: int, text: str, actor: str) -> None:
        """A VM's console line, from any thread; it goes out with the follower's next publish. Nothing is
        kept while no subscriber wants console lines."""
        if any(s.console for s in list(self.subscribers)):
            at = dt.datetime.now(dt.UTC).isoformat()
            self.console_pending.append(ConsoleLine(cid, text[:CONSOLE_LINE_MAX_CHARS], at, actor))

    def take_console(self) -> list[ConsoleLine]:
        out = []
        while self.console_pending:
            out.append(self.console_pending.popleft())
        return out
