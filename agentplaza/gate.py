"""The gate: every value that can reach the log passes here first, and one set of limits says what passes.

The store writes events as JSON into SQLite or PostgreSQL and must read every one of them back; a
value it could not hold, or could not read back, is refused here, at the edge, with the path of the
field that holds it (``detail.x: a number must be finite``) and before a single event exists.
The rules, in the order the gate applies them:

1. Nesting, before anything is parsed: the raw bytes are scanned for their bracket depth, so a
   parser that recurses never meets 40,000 ``[``.  At most ``DEPTH_MAX`` levels.
2. Text: the bytes are UTF-8.
3. Numbers: integers within signed 64 bits (SQLite's INTEGER, PostgreSQL's bigint); floats finite
   (``NaN``, ``Infinity``, ``-Infinity`` and ``1e400``, which overflows to infinity, are refused).
4. Strings, keys as well as values: no NUL (PostgreSQL's text cannot hold it), no lone surrogate
   (``"\\ud800"``: no UTF-8 encodes it), at most ``Limits.string_chars_max`` characters.
5. Objects at most ``KEYS_MAX`` keys, arrays at most ``ITEMS_MAX`` items.

Query and path parameters pass the same string rule (``check_param``), and an integer parameter is
read by ``query_int``: digits only, within its own bounds and within signed 64 bits.

Pure: no I/O, no web framework; the HTTP edge, the guest channel and the CLI use it alike.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

#: What SQLite's INTEGER and PostgreSQL's bigint hold: signed 64 bits.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: The deepest a value nests (objects and arrays together).
DEPTH_MAX = 32
#: The most keys one object holds.
KEYS_MAX = 1024
#: The most items one array holds.
ITEMS_MAX = 10_000
#: The longest string in a request body (a body is at most 64 KiB anyway: ``errors.MAX_BODY_BYTES``).
BODY_STRING_CHARS_MAX = 64 * 1024
#: The longest string on the guest channel (a shared file travels as base64 of up to 1 MiB).
CHANNEL_STRING_CHARS_MAX = 2 * 1024 * 1024
#: The longest query or path parameter.
PARAM_CHARS_MAX = 1024
#: The most digits an integer may have before it is read at all (19 hold every signed 64-bit value).
_INT_DIGITS_MAX = 19


@dataclass(frozen=True)
class Limits:
    depth_max: int = DEPTH_MAX
    keys_max: int = KEYS_MAX
    items_max: int = ITEMS_MAX
    string_chars_max: int = BODY_STRING_CHARS_MAX


#: A request body over HTTP.
BODY = Limits()
#: One request of a harness on the guest channel.
CHANNEL = Limits(string_chars_max=CHANNEL_STRING_CHARS_MAX)

NOT_FINITE = "a number must be finite"
INT_RANGE = f"an integer must be within signed 64 bits ({INT64_MIN} to {INT64_MAX})"
NUL = "a string must not hold NUL (\\u0000)"
SURROGATE = "a string must not hold a lone surrogate (\\ud800 to \\udfff)"


class OutOfBounds(ValueError):
    """A value the gate refuses: ``path`` names the field, ``rule`` says what it broke."""

    code = "invalid_value"

    def __init__(self, path: str, rule: str):
        super().__init__(f"{path}: {rule}")
        self.path, self.rule = path, rule


class NotJson(ValueError):
    """Bytes that are not JSON (or not UTF-8) at all."""


class _Refused:
    """What the parser puts where a number the gate refuses stood; the walk reports it with its path."""

    __slots__ = ("rule",)

    def __init__(self, rule: str):
        self.rule = rule


def _constant(name: str) -> _Refused:
    return _Refused(f"{NOT_FINITE}, not {name}")


def _float(text: str) -> float | _Refused:
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"{NOT_FINITE} ({text} overflows)")


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > _INT_DIGITS_MAX:
        return _Refused(INT_RANGE)
    return int(text)


_BRACKETS = re.compile(rb'\\.|["\[\]{}]', re.DOTALL)


def bracket_depth(raw: bytes, stop_over: int = DEPTH_MAX) -> int:
    """How deep the brackets of ``raw`` nest, outside strings; stops counting once over ``stop_over``."""
    depth = deepest = 0
    in_string = False
    for m in _BRACKETS.finditer(raw):
        c = m.group()
        if c == b'"':
            in_string = not in_string
        elif in_string or len(c) > 1:
            continue
        elif c in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_over:
                    break
        else:
            depth -= 1
    return deepest


def loads(raw: bytes | str, limits: Limits = BODY, where: str = "body") -> Any:
    """Parse JSON and pass the whole value through the gate; raises ``NotJson`` or ``OutOfBounds``."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if bracket_depth(data, limits.depth_max) > limits.depth_max:
        raise OutOfBounds(where, f"a value nests at most {limits.depth_max} deep")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotJson("the bytes are not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except (json.JSONDecodeError, RecursionError) as e:
        raise NotJson(str(e)) from None
    return check(value, limits, where)


def check(value: Any, limits: Limits = BODY, where: str = "body") -> Any:
    """Walk ``value`` (already parsed); returns it unchanged when every part passes."""
    _walk(value, limits, where, 0)
    return value


def _walk(value: Any, limits: Limits, path: str, depth: int) -> None:
    if isinstance(value, str):
        check_text(value, path, limits.string_chars_max)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise OutOfBounds(path, INT_RANGE)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise OutOfBounds(path, NOT_FINITE)
    elif isinstance(value, _Refused):
        raise OutOfBounds(path, value.rule)
    elif isinstance(value, (dict, list, tuple)):
        if depth >= limits.depth_max:
            raise OutOfBounds(path, f"a value nests at most {limits.depth_max} deep")
        if isinstance(value, dict):
            if len(value) > limits.keys_max:
                raise OutOfBounds(path, f"an object holds at most {limits.keys_max} keys")
            for k, v in value.items():
                if not isinstance(k, str):
                    raise OutOfBounds(path, "an object's keys are strings")
                check_text(k, f"{path} (a key)", limits.string_chars_max)
                _walk(v, limits, _join(path, k, depth == 0), depth + 1)
        else:
            if len(value) > limits.items_max:
                raise OutOfBounds(path, f"an array holds at most {limits.items_max} items")
            for i, v in enumerate(value):
                _walk(v, limits, f"{path}[{i}]", depth + 1)
    else:
        raise OutOfBounds(path, f"not a JSON value ({type(value).__name__})")


def _join(path: str, key: str, top: bool) -> str:
    """A field's path as a person reads it: ``detail.x``, ``"a b".c``, ``items[3]`` (the top object unnamed)."""
    shown = key if key.isidentifier() else json.dumps(key)
    return shown if top else f"{path}.{shown}"


def check_text(s: str, path: str, chars_max: int = BODY_STRING_CHARS_MAX) -> str:
    if len(s) > chars_max:
        raise OutOfBounds(path, f"a string is at most {chars_max} characters")
    if "\x00" in s:
        raise OutOfBounds(path, NUL)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise OutOfBounds(path, SURROGATE) from None
    return s


def check_param(name: str, raw: str) -> str:
    """A query or path parameter: the string rule, at most ``PARAM_CHARS_MAX`` characters."""
    return check_text(raw, name, PARAM_CHARS_MAX)


def query_int(name: str, raw: str | None, default: int | None, lo: int = 0, hi: int | None = None) -> int | None:
    """An integer parameter: optional sign and digits only, within ``lo``..``hi`` and signed 64 bits."""
    if raw is None or raw == "":
        return default
    hi = INT64_MAX if hi is None else min(hi, INT64_MAX)
    lo = max(lo, INT64_MIN)
    text = raw.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit():
        raise OutOfBounds(name, "must be an integer")
    if len(digits.lstrip("0")) > _INT_DIGITS_MAX:
        raise OutOfBounds(name, f"must be between {lo} and {hi}")
    value = int(text)
    if not lo <= value <= hi:
        raise OutOfBounds(name, f"must be between {lo} and {hi}")
    return value
