"""Many stored states read in one ``orjson`` call, proving each state reads alone as it reads there.

Reading a thousand states in one call costs about half of reading them one by one (orjson's own
work for each call), and ``audit verify`` and a rebuild read every state of the log.  Joined with
plain commas, though, one state's text could close another's brackets (``{"a":[{}`` and ``{}]}``)
and a third hand back the element count (``{},{}``).  So the states are joined with a random string
that no stored state can know (``Separator``): when the read gives the count of objects with that
string between every two, each state is exactly one JSON value (the reasoning is in ``Separator``).
A read that does not prove it costs only time: the caller then reads each state alone.

``audit verify`` needs less: only that each state *would* read as an object, not the objects.  For it,
``check_objects`` validates each state with simdjson (``pysimdjson``), which checks a JSON text whole (its
grammar, its UTF-8, its escapes) without making a Python value of it: some 0.3 us a state where ``orjson``
makes the objects in 1.3 us.  A state it proves is one ``orjson`` reads too (``check_objects`` says why).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import secrets
import string
from collections.abc import Sequence
from typing import Any

import orjson
import simdjson

from .storable import exact_read_spots

#: The random string's length between the states: 23 letters, about 131 bits.
SEPARATOR_LETTERS = 23
#: Nesting ``check_objects`` proves without looking further.  orjson reads 1024 deep; simdjson's limit is a
#: setting of its parser (1024 today, and it refuses some texts that deep that orjson reads), so a state near
#: either is left to ``read_back``.  A state shorter than twice this is nested less deep (each level opens
#: and closes), and so is one with fewer opening brackets (those in its strings counted too).
SHALLOW_BRACKETS = 1_000
#: What simdjson steps over at the start of a text and orjson refuses: the UTF-8 byte order mark.
_BOM = b"\xef\xbb\xbf"
_OBJECT = type(simdjson.Parser().parse(b"{}"))


class Separator:
    """What joins states into one JSON array: ``,"Z<letters>",``.

    Claim: when ``[s1 SEP s2 SEP ... sn]`` reads as 2n-1 values with the string at every odd
    place, each ``si`` alone is one JSON value, the one read at place 2(i-1).  The stored states
    cannot hold the letters (they are drawn here, after the states were written), so a string value
    equal to them must contain one of the inserted copies.  A copy holds no quote or backslash, so
    such a string token holds a whole copy, and decodes to exactly the letters only when it is the
    copy between its own two inserted quotes.  There are n-1 copies and n-1 such values, so every
    inserted ``"letters"`` is an element of the outer array, and the commas beside it separate
    the outer array's elements.  The text between two copies then holds whole elements only, at
    least one each (``,,`` does not read), and n in all: one each.  A JSON value read inside an
    array reads the same alone.  Were a read to be refused for anything less (a state nested one
    level too deep for the array, a digit run across a join), it only costs time.

    Draw one after the states it joins were read: they were written before it existed.
    """

    def __init__(self) -> None:
        # A capital first: a letter that starts no bare JSON word (true, false, null).
        self.text = "Z" + "".join(secrets.choice(string.ascii_letters) for _ in range(SEPARATOR_LETTERS))
        self.joint = b',"' + self.text.encode() + b'",'


def check_objects(states: Sequence[bytes]) -> set[int] | None:
    """Would ``storable.read_back`` read each state as a JSON object?  The indexes of the states it reads
    value by value (as ``read_objects``); None when this does not prove it (then read each alone).

    Proven when simdjson reads each state as an object, none starts with a byte order mark, and none
    nests near either reader's depth limit.  Those states ``orjson`` reads too: both refuse what JSON's
    grammar does not allow, UTF-8 that is not valid (lone surrogates included, escaped or not), NaN and
    Infinity, numbers past a double's range; simdjson also refuses integers past 64 bits, which orjson reads
    (as floats: ``read_back``'s value-by-value look, ``needs_exact_read``, is what refuses them).  The
    byte order mark is where simdjson reads more than orjson, and the depth where it could; both are
    checked here.
    (``tests/test_decode_joined.py`` holds both readers to it on tricky and mutated states.)"""
    if not states:
        return set()
    if set(map(type, states)) != {bytes} or any(map(bytes.startswith, states, itertools.repeat(_BOM))):
        return None
    for s in states:
        if len(s) >= 2 * SHALLOW_BRACKETS and s.count(b"[") + s.count(b"{") >= SHALLOW_BRACKETS:
            return None
    parse = simdjson.Parser().parse  # (one a call: a parser is not to be shared between threads)
    try:
        kinds = set(map(type, map(parse, states)))  # each proxy let go before the next parse
    except Exception:  # noqa: BLE001 - anything simdjson refuses is only "not proven"
        return None
    if kinds != {_OBJECT}:
        return None
    return _exact_indexes(states, b"[" + b",".join(states) + b"]", 1)


def read_objects(states: Sequence[bytes], sep: Separator) -> tuple[list[dict[str, Any]], set[int]] | None:
    """Each state's JSON object, read in one call, and the indexes of the states ``storable.read_back`` looks at
    value by value (a NUL escape, a run of 19 digits: ``storable.needs_exact_read``); None when the read does
    not prove every state one JSON object on its own (then read each alone)."""
    n = len(states)
    if n == 0:
        return [], set()
    batch = b"[" + sep.joint.join(states) + b"]"
    try:
        values = orjson.loads(batch)
    except orjson.JSONDecodeError:
        return None
    if len(values) != 2 * n - 1 or values[1::2].count(sep.text) != n - 1:
        return None
    values = values[0::2]
    if set(map(type, values)) != {dict}:
        return None
    return values, _exact_indexes(states, batch, len(sep.joint))


def _exact_indexes(states: Sequence[bytes], batch: bytes, joint: int) -> set[int]:
    """The indexes of the states in which ``storable.exact_read_spots`` finds something, ``batch`` being
    "[", the states joined by ``joint`` bytes that hold no digit or backslash, "]"."""
    spots = exact_read_spots(batch)
    if not spots:
        return set()
    # where each state starts in the batch: after "[", the states before it and a joint after each
    starts = list(map(operator.add, itertools.accumulate(map(len, states), initial=0),
                      range(1, 1 + (len(states) + 1) * joint, joint)))
    return {bisect.bisect_right(starts, at) - 1 for at in spots}
