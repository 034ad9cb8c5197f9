"""Many stored states read in one ``orjson`` call, proving each state reads alone as it reads there.

Reading a thousand states in one call costs about half of reading them one by one (orjson's own
work for each call), and ``audit verify`` and a rebuild read every state of the log.  Joined with
plain commas, though, one state's text could close another's brackets (``{"a":[{}`` and ``{}]}``)
and a third hand back the element count (``{},{}``).  So the states are joined with a random string
that no stored state can know (``Separator``): when the read gives the count of objects with that
string between every two, each state is exactly one JSON value (the reasoning is in ``Separator``).
A read that does not prove it costs only time: the caller then reads each state alone.
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

from .storable import exact_read_spots

#: The random string's length between the states: 23 letters, about 131 bits.
SEPARATOR_LETTERS = 23


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
    spots = exact_read_spots(batch)
    if not spots:
        return values, set()
    # where each state starts in the batch: after "[", the states before it and a joint after each
    joint = len(sep.joint)
    starts = list(map(operator.add, itertools.accumulate(map(len, states), initial=0),
                      range(1, 1 + (n + 1) * joint, joint)))
    return values, {bisect.bisect_right(starts, at) - 1 for at in spots}
