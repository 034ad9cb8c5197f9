"""Attempts per caller's address in a sliding minute: sign-ins and join code redemptions.

The guide, "Join codes": "The hub allows five redemption attempts a minute from one address."  Sign-in
attempts are limited the same way (``SIGN_IN_ATTEMPTS_PER_MIN``), so the owner token cannot be guessed
at speed.  Every attempt counts, good or bad, and a refused one too is not counted twice.  The window
is held by this hub process (a restart forgets it); at most ``ADDRESSES_MAX`` addresses are held, the
least recently seen forgotten first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque

WINDOW_S = 60.0
#: The guide's five redemption attempts a minute from one address.
REDEEM_ATTEMPTS_PER_MIN = 5
#: Sign-in attempts a minute from one address.
SIGN_IN_ATTEMPTS_PER_MIN = 10
ADDRESSES_MAX = 10_000


class PerAddress:
    def __init__(self, per_window: int, window_s: float = WINDOW_S, clock=time.monotonic):
        self.per_window, self.window_s, self.clock = per_window, window_s, clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def attempt(self, address: str) -> float | None:
        """Count an attempt from ``address``: None when it may go on, else the seconds until it may."""
        now = self.clock()
        with self._lock:
            times = self._seen.pop(address, None) or deque()
            while times and times[0] <= now - self.window_s:
                times.popleft()
            self._seen[address] = times
            while len(self._seen) > ADDRESSES_MAX:
                self._seen.popitem(last=False)
            if len(times) >= self.per_window:
                return max(0.0, times[0] + self.window_s - now)
            times.append(now)
            return None
