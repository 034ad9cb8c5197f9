"""Waits with a deadline on a real signal: never a bare sleep that stands in for ordering."""
import time

POLL_S = 0.01


def until(what: str, check, timeout: float = 10.0, every: float = POLL_S):
    """check()'s first truthy value, asked every ``every`` s; AssertionError naming
    ``what`` at the deadline."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(every)
