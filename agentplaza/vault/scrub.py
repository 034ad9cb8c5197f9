"""The one scrubber: every text the hub passes on from outside loses every vault value it holds.

A provider's error body, a ``models test`` answer, an exception from httpx, a
refusal's message, a line of the hub's own output: before any of them leaves
the hub or is recorded, ``Scrubber.scrub`` replaces each value it holds with
``REDACTED``, in each form a server may quote it back:

* raw (which covers ``Bearer <key>``, ``x-api-key: <key>`` and ``repr``);
* JSON-escaped (``ensure_ascii`` on and off, and with ``\\/`` for ``/``), and every form
  JSON-escaped once more (an escaped text inside a provider's own JSON string);
* URL-encoded (``quote`` and ``quote_plus``, upper and lower case hex);
* hex (upper and lower case);
* base64 and base64url, with and without padding, and at each of the three
  alignments the value can have inside a longer base64 text (so
  ``Basic base64(user:key)`` loses the key's part too).

The vault feeds it: ``hold`` replaces the whole set with the values the vault
holds now (every kept version of every entry), and a sealed vault holds none.
The values live in this object's memory only; it never logs, prints or
records them.  Values shorter than ``MIN_SECRET_CHARS`` are not scrubbed: a
value that short would rewrite ordinary words, and no key is that short.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

#: What a value is replaced with.
REDACTED = "[redacted]"
#: Values shorter than this are not scrubbed (see the module docstring).
MIN_SECRET_CHARS = 8
#: Scrub patterns kept (one per set of extra keys a caller adds; the vault's own set is one of them).
PATTERN_CACHE_MAX = 64
#: Up to this many forms a text is searched for each in turn; above it, with one regex pass (measured on
#: a 3.6 KB answer: 1 key 8 us against 39 us, 6 keys about even, 20 keys 265 us against 62 us).
SEARCH_EACH_FORMS_MAX = 32
#: A stream is scrubbed up to its last newline; a line longer than this is cut and scrubbed anyway.
STREAM_HOLD_BYTES_MAX = 64 * 1024

_PERCENT = re.compile(rb"%[0-9A-F]{2}")
#: A URL's user:password@ part and its query values, which httpx quotes in its errors.
_URL_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")
_URL_QUERY_VALUE = re.compile(r"(?<=[?&])([A-Za-z0-9_.-]+)=[^&\s'\"]*")


def redact_urls(text: str) -> str:
    """``text`` with every URL's user:password@ and query values replaced (httpx quotes the URL it failed on)."""
    return _URL_QUERY_VALUE.sub(r"\1=" + REDACTED, _URL_USERINFO.sub(REDACTED + "@", text))


def _b64_cores(raw: bytes) -> list[bytes]:
    """The part of a value's base64 that does not depend on what stands around it, at each alignment."""
    out = []
    for shift in range(3):
        std = base64.b64encode(b"\0" * shift + raw)
        start = -(-8 * shift // 6)  # the first character holding bits of the value only
        end = 8 * (shift + len(raw)) // 6  # past the last one
        core = std[start:end]
        if len(core) >= MIN_SECRET_CHARS:
            out += [core, core.replace(b"+", b"-").replace(b"/", b"_")]
    return out


def forms(value: str) -> set[bytes]:
    """Every form of ``value`` the scrubber looks for (UTF-8 bytes)."""
    raw = value.encode("utf-8", "surrogatepass")
    found = {raw, raw.hex().encode(), raw.hex().upper().encode()}
    for ascii_only in (True, False):
        escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1].encode("utf-8", "surrogatepass")
        found |= {escaped, escaped.replace(b"/", b"\\/")}
    for encoded in (quote(value, safe=""), quote(value), quote_plus(value)):
        b = encoded.encode()
        found |= {b, _PERCENT.sub(lambda m: m.group(0).lower(), b)}
    for enc in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        found |= {enc, enc.rstrip(b"=")}
    found.update(_b64_cores(raw))
    # each form once more JSON-escaped: a provider that puts an escaped text inside its own JSON string
    found |= {json.dumps(f.decode("utf-8", "surrogatepass"))[1:-1].encode() for f in list(found)}
    return {f for f in found if len(f) >= MIN_SECRET_CHARS}


class Scrubber:
    def __init__(self, values: Iterable[str] = ()):
        self._lock = threading.Lock()
        self._needles: tuple[bytes, ...] = ()
        self._multiline: tuple[bytes, ...] = ()
        self._patterns: dict[frozenset[str], tuple[tuple[bytes, ...], re.Pattern[bytes] | None]] = {}
        self.hold(values)

    @staticmethod
    def _compile(values: Iterable[str]) -> tuple[bytes, ...]:
        found: set[bytes] = set()
        for v in values:
            if v and len(v) >= MIN_SECRET_CHARS:
                found |= forms(v)
        return tuple(sorted(found, key=len, reverse=True))  # longest first: a form inside another goes too

    def hold(self, values: Iterable[str]) -> None:
        """From now on scrub exactly these values (the vault's, all of them)."""
        needles = self._compile(values)
        with self._lock:
            self._needles = needles
            self._multiline = tuple(n for n in needles if b"\n" in n)
            self._patterns = {}

    def forget_all(self) -> None:
        self.hold(())

    @property
    def holding(self) -> int:
        """How many forms are held (a count, never a value)."""
        return len(self._needles)

    def _needles_with(self, extra: frozenset[str]) -> tuple[bytes, ...]:
        if not extra:
            return self._needles
        return tuple(sorted(set(self._needles) | set(self._compile(extra)), key=len, reverse=True))

    def _scan(self, extra: Iterable[str | None]) -> tuple[tuple[bytes, ...], re.Pattern[bytes] | None]:
        """The forms to look for, and one alternation of them all (longest first) to replace them in one pass."""
        more = frozenset(e for e in extra if e)
        with self._lock:
            if more in self._patterns:
                return self._patterns[more]
        needles = self._needles_with(more)
        found = needles, (re.compile(b"|".join(re.escape(n) for n in needles)) if needles else None)
        with self._lock:
            if len(self._patterns) >= PATTERN_CACHE_MAX:
                self._patterns.clear()
            self._patterns[more] = found
        return found

    def scrub_bytes(self, data: bytes, extra: Iterable[str | None] = ()) -> bytes:
        """``data`` without any form of a held value (or of ``extra``: a key the caller used just now)."""
        needles, pattern = self._scan(extra)
        if pattern is None:
            return data
        # A few forms: a substring search each is fastest; many: one pass of the alternation.
        if len(needles) <= SEARCH_EACH_FORMS_MAX:
            if not any(n in data for n in needles):
                return data
        elif pattern.search(data) is None:
            return data
        return pattern.sub(REDACTED.encode(), data)

    def scrub(self, text: str, extra: Iterable[str | None] = ()) -> str:
        data = text.encode("utf-8", "surrogatepass")
        clean = self.scrub_bytes(data, extra)
        return text if clean is data else clean.decode("utf-8", "replace")

    def scrub_json(self, value, extra: Iterable[str | None] = ()):
        """Every string in a JSON value (keys too), scrubbed."""
        if isinstance(value, str):
            return self.scrub(value, extra)
        if isinstance(value, dict):
            return {self.scrub(str(k), extra): self.scrub_json(v, extra) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_json(v, extra) for v in value]
        return value

    def error_text(self, e: BaseException, extra: Iterable[str | None] = ()) -> str:
        """An exception as one line for a person: its kind and its message, with no value held, no
        user:password@ of a URL and no query value (httpx quotes the URL it failed on)."""
        message = " ".join(redact_urls(str(e)).split())
        return self.scrub(f"{type(e).__name__}: {message}" if message else type(e).__name__, extra)

    def stream(self, extra: Iterable[str | None] = ()) -> StreamScrub:
        return StreamScrub(self, extra)


class StreamScrub:
    """Scrubs a stream whose chunks may cut a value in two: each chunk goes out up to its last newline
    (server-sent events end every event with one, so nothing waits), the rest with the next chunk."""

    def __init__(self, scrubber: Scrubber, extra: Iterable[str | None] = ()):
        self.scrubber, self.extra = scrubber, [e for e in extra if e]
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.held + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) > STREAM_HOLD_BYTES_MAX:
            longest = max((len(n) for n in self.scrubber._needles_with(frozenset(self.extra))), default=1)
            cut = len(data) - longest + 1
        cut = max(0, cut - self._partial(data[:cut]))
        out, self.held = data[:cut], data[cut:]
        return self.scrubber.scrub_bytes(out, self.extra) if out else b""

    def _partial(self, data: bytes) -> int:
        """How many of the last bytes may begin a multi-line value (held back with the rest)."""
        longest = 0
        for needle in self.scrubber._multiline:
            for k in range(min(len(needle) - 1, len(data)), longest, -1):
                if data.endswith(needle[:k]):
                    longest = k
                    break
        return longest

    def end(self) -> bytes:
        out, self.held = self.held, b""
        return self.scrubber.scrub_bytes(out, self.extra) if out else b""


#: The scrubber of a hub without a vault: it holds nothing (keys used by a call still go, as ``extra``).
NOTHING_HELD = Scrubber()


def scrubber_of(hub: Any) -> Scrubber:
    """The scrubber the hub's vault feeds (one that holds nothing when the hub has no vault)."""
    vault = getattr(hub, "vault", None)
    return vault.scrubber if vault is not None else NOTHING_HELD
