"""The live bus: every stored event, in order, to every watching console.

Read-only.  At most ``MAX_PER_ADDRESS`` sockets from one address and
``MAX_TOTAL`` in all; a subscriber that falls more than ``MAX_BEHIND`` events
behind is cut off (it reconnects and reads the current state again).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from .records import EventRecord

MAX_PER_ADDRESS = 8
MAX_TOTAL = 64
MAX_BEHIND = 1024
SUBPROTOCOL = "apz.events.v1"


class BusFull(Exception):
    pass


class Subscriber:
    def __init__(self, address: str, families: frozenset[str] | None, wake: Callable[[], None]):
        self.address = address
        self.families = families
        self.queue: deque[EventRecord] = deque()
        self.dropped = False
        self.wake = wake

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
    def __init__(self) -> None:
        self.subscribers: list[Subscriber] = []

    def subscribe(self, address: str, families: Iterable[str] | None, wake: Callable[[], None]) -> Subscriber:
        if len(self.subscribers) >= MAX_TOTAL:
            raise BusFull(f"the hub accepts at most {MAX_TOTAL} sockets")
        if sum(1 for s in self.subscribers if s.address == address) >= MAX_PER_ADDRESS:
            raise BusFull(f"the hub accepts at most {MAX_PER_ADDRESS} sockets from one address")
        sub = Subscriber(address, frozenset(families) if families else None, wake)
        self.subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        if sub in self.subscribers:
            self.subscribers.remove(sub)

    def publish(self, records: list[EventRecord]) -> None:
        if records:
            for sub in list(self.subscribers):
                sub.offer(records)
