"""Signed checkpoints of the chain's head: the anchor outside the store.

The hash chain (``chain``) has no key: whoever can write the database can edit
an event and recompute every link after it, or cut the last transactions off,
and the chain alone still reads intact.  So the hub keeps checkpoints of the
head, each a line of ``ANCHOR_FILE`` in the state folder (append-only):

    {"n": 3, "position": 1234, "head": "<hex>", "at": "<UTC>", "mac": "<hex>"}

    mac = HMAC-SHA256(anchor key, "apz-chain-checkpoint/1" NUL n NUL position NUL head NUL at)

with the key in the config folder (``ANCHOR_KEY_FILE``, 0600, made on the
hub's first start), outside the store.  The hub writes one when it starts,
after commits at most every ``CHECKPOINT_EVERY_S``, and when it stops cleanly.
After a ``kill -9`` the latest checkpoint is behind the head, which is fine:
what ``check`` reports is a log that no longer passes through the latest valid
checkpoint (shorter than it, or another head at its position), a checkpoint
whose signature does not match, and a missing checkpoint file while its key
exists.

A new checkpoint is written only if the log still extends the previous one
(``EventStore.verify_after``): a tampered log is never signed over.  When it
does not, the hub stops anchoring and says so until the owner has looked.

For an anchor no one with the hub's files can touch, ``agentplaza audit anchor``
prints the head as ``HASH@POSITION`` for the owner to keep elsewhere, and
``agentplaza audit verify --anchor HASH@POSITION`` checks the log against it.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from .chain import Anchor, Verdict

log = logging.getLogger(__name__)

ANCHOR_FILE = "chain-anchors.jsonl"
ANCHOR_KEY_FILE = "chain-anchor.key"
KEY_FORMAT = "apz-chain-anchor-key/1"
CHECKPOINT_FORMAT = "apz-chain-checkpoint/1"
KEY_BYTES = 32
#: At most one checkpoint in this many seconds while commits come in (and one at start and clean stop).
CHECKPOINT_EVERY_S = 5.0
PRIVATE_FILE_MODE = 0o600
_ANCHOR_RE = re.compile(r"^([0-9a-fA-F]{64})@([0-9]{1,19})$")
#: The largest position an anchor may name (the store's positions are signed 64-bit).
POSITION_MAX = 2**63 - 1


class AnchorSyntax(ValueError):
    """An ``--anchor`` value that is not ``HASH@POSITION``."""


class ChainBroken(Exception):
    """The log no longer extends its latest signed checkpoint."""


def parse_anchor(text: str) -> Anchor:
    """``HASH@POSITION`` (64 hex digits, ``@``, a position of 1 or more) as an anchor."""
    m = _ANCHOR_RE.match(text.strip())
    if not m or not 1 <= int(m.group(2)) <= POSITION_MAX:
        raise AnchorSyntax(f"an anchor is HASH@POSITION (64 hex digits, '@', a position from 1), not {text[:80]!r}")
    return Anchor(int(m.group(2)), bytes.fromhex(m.group(1)), "given")


def format_anchor(position: int, head: bytes) -> str:
    return f"{head.hex()}@{position}"


@dataclass(frozen=True)
class Checkpoint:
    n: int
    position: int
    head: bytes
    at: str

    def anchor(self) -> Anchor:
        return Anchor(self.position, self.head, "checkpoint", self.at)


def _signed_bytes(n: int, position: int, head_hex: str, at: str) -> bytes:
    return "\x00".join((CHECKPOINT_FORMAT, str(n), str(position), head_hex, at)).encode()


def sign(key: bytes, n: int, position: int, head_hex: str, at: str) -> str:
    return hmac.new(key, _signed_bytes(n, position, head_hex, at), hashlib.sha256).hexdigest()


def read_key(path: Path) -> bytes | None:
    """The anchor key, or None when there is no key file."""
    try:
        doc = json.loads(path.read_bytes())
        key = base64.b64decode(doc["key"], validate=True)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"the anchor key file {path} is damaged (it is not {KEY_FORMAT})") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"the anchor key file {path} is damaged (the key is not {KEY_BYTES} bytes)")
    return key


def make_key(path: Path) -> bytes:
    """A new key in a new 0600 file (never over an existing one)."""
    key = secrets.token_bytes(KEY_BYTES)
    body = json.dumps({"format": KEY_FORMAT, "key": base64.b64encode(key).decode()}).encode() + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


@dataclass
class Checkpoints:
    """What ``ANCHOR_FILE`` holds: the checkpoints that verify, and a problem, if any."""

    valid: list[Checkpoint] = field(default_factory=list)
    problem: str | None = None

    @property
    def latest(self) -> Checkpoint | None:
        return self.valid[-1] if self.valid else None


def _lines(path: Path) -> list[bytes]:
    """The file's complete lines: a last line with no newline is a write torn by a crash."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [x for x in data[: data.rfind(b"\n") + 1].splitlines() if x.strip()]


def read_checkpoints(path: Path, key: bytes | None, key_path: Path) -> Checkpoints:
    """Every line of the checkpoint file, checked; the first bad line is the problem."""
    out = Checkpoints()
    lines = _lines(path)
    if key is None:
        if lines:
            out.problem = (f"the anchor key {key_path} is missing, so the {len(lines)} checkpoints in {path} "
                           "cannot be checked")
        return out
    if not lines:
        out.problem = f"the anchor key {key_path} exists but {path} holds no checkpoint (the file was removed or emptied)"
        return out
    for no, raw in enumerate(lines, 1):
        where = f"{path.name} line {no}"
        try:
            d = json.loads(raw)
            cp = Checkpoint(int(d["n"]), int(d["position"]), bytes.fromhex(d["head"]), str(d["at"]))
            ok = hmac.compare_digest(str(d["mac"]), sign(key, cp.n, cp.position, d["head"], cp.at))
        except (ValueError, KeyError, TypeError):
            out.problem = out.problem or f"{where} is not a checkpoint"
            continue
        if not ok:
            out.problem = out.problem or f"{where}: its signature does not match (the checkpoint was edited or forged)"
        elif cp.n != no:
            out.problem = out.problem or f"{where} says it is checkpoint {cp.n} (checkpoints were removed or moved)"
        else:
            out.valid.append(cp)
    return out


def check(store, state_dir: Path, config_dir: Path, given: Anchor | None = None) -> Verdict:
    """Verify the log against the latest valid checkpoint (and ``given``, an anchor kept
    elsewhere); a checkpoint file that does not verify is itself reported."""
    key_path = config_dir / ANCHOR_KEY_FILE
    try:
        cps = read_checkpoints(state_dir / ANCHOR_FILE, read_key(key_path), key_path)
    except ValueError as e:
        cps = Checkpoints(problem=str(e))
    anchors = [a for a in (cps.latest.anchor() if cps.latest else None, given) if a is not None]
    verdict = store.verify(anchors)
    if verdict.intact and cps.problem:
        return replace(verdict, intact=False, problem=cps.problem)
    return verdict


def extended_head(store, last: Checkpoint | None) -> tuple[int, bytes]:
    """The chain's head (position, hash); raises ``ChainBroken`` unless the log
    still extends the checkpoint ``last``."""
    position, head = store.chain_head()
    if last is not None:
        if position < last.position:
            raise ChainBroken(f"the log ends at position {position}, before position {last.position} "
                              f"of the signed checkpoint of {last.at} (events were removed)")
        v = store.verify_after(last.position, last.head, position)
        if not v.intact:
            raise ChainBroken(f"the log no longer extends the signed checkpoint of {last.at} "
                              f"at position {last.position}: {v.problem} at position {v.broken_at}")
    return position, head


def latest_checkpoint(state_dir: Path, config_dir: Path) -> Checkpoint | None:
    """The latest valid checkpoint (for a reader that writes none)."""
    key_path = config_dir / ANCHOR_KEY_FILE
    return read_checkpoints(state_dir / ANCHOR_FILE, read_key(key_path), key_path).latest


class Anchors:
    """The hub's checkpoint writer."""

    def __init__(self, store, state_dir: Path, config_dir: Path, *,
                 now: Callable[[], str] | None = None, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.path = state_dir / ANCHOR_FILE
        self.key_path = config_dir / ANCHOR_KEY_FILE
        self._now = now or (lambda: dt.datetime.now(dt.UTC).isoformat())
        self._clock = clock
        self._lock = threading.Lock()
        self._key: bytes = b""
        self.last: Checkpoint | None = None
        self._count = 0
        self._size = 0
        self._written_at = float("-inf")
        #: Why the hub stopped anchoring (the log no longer extends the last checkpoint), if it did.
        self.problem: str | None = None

    def open(self) -> Anchors:
        key = read_key(self.key_path)
        first = key is None
        self._key = make_key(self.key_path) if first else key
        self._drop_torn_line()
        cps = read_checkpoints(self.path, self._key, self.key_path)
        self.last = cps.latest
        self._count = len(_lines(self.path))
        self._size = self.path.stat().st_size if self.path.exists() else 0
        if cps.problem and not first:
            self.problem = cps.problem
        return self

    def _drop_torn_line(self) -> None:
        """Cut a last line a crash tore (no newline) so the next line starts clean."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            os.truncate(self.path, data.rfind(b"\n") + 1)

    def due(self, seen_position: int) -> bool:
        """A checkpoint is due: events past the last one, and the interval has passed."""
        if self.problem is not None:
            return False
        ahead = self.last is None or seen_position > self.last.position
        return ahead and self._clock() - self._written_at >= CHECKPOINT_EVERY_S

    def current(self) -> tuple[int, bytes]:
        """The chain's head, once the log is seen to extend the latest checkpoint."""
        return extended_head(self.store, self.last)

    def checkpoint(self) -> Checkpoint | None:
        """Sign the head, if it moved and the log still extends the last checkpoint."""
        with self._lock:
            if self.problem is not None:
                return None
            try:
                position, head = self.current()
            except ChainBroken as e:
                self.problem = str(e)
                log.error("chain anchor: %s; no more checkpoints (run agentplaza audit verify)", e)
                return None
            except Exception as e:  # noqa: BLE001 - the store is away for now: try at the next interval
                self._written_at = self._clock()
                log.warning("chain anchor: cannot read the chain's head now: %s", e)
                return None
            self._written_at = self._clock()
            if position == 0 or (self.last is not None and position == self.last.position):
                return None
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # another hub on this state folder appends too
                if os.fstat(fd).st_size != self._size:
                    self._count = len(_lines(self.path))
                cp = Checkpoint(self._count + 1, position, head, self._now())
                line = {"n": cp.n, "position": cp.position, "head": head.hex(), "at": cp.at,
                        "mac": sign(self._key, cp.n, cp.position, head.hex(), cp.at)}
                os.write(fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
                os.fsync(fd)
                self._size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            self._count, self.last = cp.n, cp
            return cp
