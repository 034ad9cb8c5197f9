"""What the store may hold: exactly what its own reader and its databases read back.

The library writes an event's state with Python's ``json`` (which writes
``NaN``, ``Infinity`` and integers of any size); the read side decodes it with
``orjson`` (which refuses the first two and turns an integer over 64 bits into
a float), and the read models put strings and integers into SQL columns
(PostgreSQL's text refuses NUL, SQLite's and PostgreSQL's integers hold 64
bits).  One value outside those rules, once stored, would stop every reader of
the log for good.  So the store checks every event before it is written
(``stored_form``) and refuses the whole command (``UnstorableEvent``) when one
would not read back; and the read side uses the very same rules
(``stored_problem``) to name, and step over, an event already stored that
cannot be read (a damaged disk, or an older hub that wrote one).

The rules, in the order they are checked:

1. The library's transcoder can write the state at all (a lone surrogate
   cannot be written as UTF-8, a value of an unknown type cannot be written).
2. ``orjson`` reads the written bytes back: no ``NaN`` or ``Infinity``, no
   nesting deeper than it reads.
3. It reads back the same value: every integer within signed 64 bits (the
   widest integer column either database holds), so none turns into a float.
4. No string, and no key, holds NUL (``\\u0000``): PostgreSQL text cannot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import orjson

from ..domain.base import Refusal

#: The widest integer either database holds in a column (SQLite INTEGER, PostgreSQL bigint): signed 64 bits.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
#: Deepest nesting of lists and objects in one event; orjson reads no deeper than 1024.
DEPTH_MAX = 512
#: Every digit as "0", everything else as " ": a run of 19 "0"s after it may be an integer over 64 bits,
#: and only states holding such a run are checked value by value (faster than a regular expression).
_DIGITS_AS_ZERO = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_RUN = b"0" * 19
#: How JSON writes NUL; only states holding it are checked value by value.
_NUL_ESCAPE = b"\\u0000"


class UnstorableEvent(Refusal):
    """A command's event could not be read back once stored; nothing of the command was written."""

    def __init__(self, kind: str, problem: str):
        super().__init__("unstorable_event", f"{kind} cannot be stored: {problem}; nothing was written")
        self.event_kind, self.problem = kind, problem


def value_problem(value: Any, where: str = "") -> str | None:
    """The first value that breaks a rule, as "PATH: WHY" (never the value itself), or None."""
    todo: list[tuple[Any, str, int]] = [(value, where, 0)]
    while todo:
        v, path, depth = todo.pop()
        if depth > DEPTH_MAX:
            return f"{path or 'the event'}: nested deeper than {DEPTH_MAX} levels"
        if isinstance(v, str):
            why = _text_problem(v)
            if why:
                return f"{path or 'a field'}: {why}"
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int):
            if not INT_MIN <= v <= INT_MAX:
                return f"{path or 'a field'}: an integer outside signed 64 bits"
        elif isinstance(v, float):
            if not math.isfinite(v):
                return f"{path or 'a field'}: a number that is not finite"
        elif isinstance(v, dict):
            for k, item in v.items():
                name = f"{path}.{k}" if path else str(k)
                if isinstance(k, str) and _text_problem(k):
                    return f"{path or 'the event'}: a key {_text_problem(k)}"
                todo.append((item, name, depth + 1))
        elif isinstance(v, (list, tuple)):
            todo.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(v))
    return None


def _text_problem(s: str) -> str | None:
    if "\x00" in s:
        return "a string holds NUL (\\u0000)"
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            return "a string holds a lone surrogate (not valid UTF-8)"
    return None


class StateProblem(ValueError):
    """Stored bytes that the store's reader cannot read back as they were meant."""


def read_back(state: bytes | str) -> Any:
    """The stored state as the store's reader reads it; raises ``StateProblem`` saying why it cannot."""
    raw = state if type(state) is bytes else (
        state.encode("utf-8", "surrogatepass") if isinstance(state, str) else bytes(state))
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise StateProblem(f"the store's reader cannot read it ({e})") from None
    if needs_exact_read(raw):
        exact = json.loads(raw)  # Python's reader keeps every integer exact
        why = value_problem(exact) or (None if exact == data else "it reads back as a different value")
        if why:
            raise StateProblem(why)
    if not isinstance(data, dict):
        raise StateProblem("its state is not a JSON object")
    return data


def needs_exact_read(raw: bytes) -> bool:
    """Do these bytes hold what ``read_back`` checks value by value (a NUL escape, a run of 19 digits)?"""
    return _NUL_ESCAPE in raw or _LONG_RUN in raw.translate(_DIGITS_AS_ZERO)


def exact_read_spots(raw: bytes) -> list[int]:
    """Where in ``raw`` (many states joined, ``joined``) those are: every NUL escape, and each run of
    19 digits or more at least once.  The NUL escape is looked for only when ``raw`` holds a backslash
    at all (one ``memchr``)."""
    spots: list[int] = []
    scans = [(raw.translate(_DIGITS_AS_ZERO), _LONG_RUN)]
    if raw.find(b"\\") >= 0:
        scans.append((raw, _NUL_ESCAPE))
    for text, pattern in scans:
        at = text.find(pattern)
        while at >= 0:
            spots.append(at)
            at = text.find(pattern, at + len(pattern))
    return spots


def stored_problem(state: bytes | str) -> str | None:
    """Why these stored bytes could not be read back by the store's reader, or None."""
    try:
        read_back(state)
    except StateProblem as e:
        return str(e)
    return None


def stored_form(mapper: Any, events: Sequence[Any]) -> list[Any]:
    """The events as the store writes them, each checked to read back; raises ``UnstorableEvent``."""
    out = []
    for e in events:
        kind = type(e).__qualname__
        try:
            stored = mapper.to_stored_event(e)
        except (ValueError, TypeError, UnicodeError, RecursionError) as err:
            raise UnstorableEvent(kind, value_problem(vars(e)) or f"it cannot be written ({type(err).__name__})") from None
        problem = stored_problem(stored.state)
        if problem is not None:
            raise UnstorableEvent(kind, value_problem(vars(e)) or problem)
        out.append(stored)
    return out
