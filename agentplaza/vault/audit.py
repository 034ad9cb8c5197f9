"""vault-audit.jsonl: one line per vault event, each MAC-chained to the line before.

A line is the vault event's public fields (identifiers, names, bindings,
counts; never a value, never a hint) plus ``n`` (its line number), ``pos``
(the event's position in the store) and ``mac``:

    mac(n) = HMAC-SHA256(audit key, mac(n-1) || "\\n" || canonical(line n without mac))

with ``mac(0)`` the empty string.  Editing, deleting or reordering a line
breaks the chain at that line, and ``verify`` names it.  The lines are written
from the store's events after each commit, and caught up from the store when
the hub starts, so a crash between the two loses no line.

The audit key lives in the config folder (``vault-audit.key``, 0600), not in
the vault: failed unseal attempts are logged while the vault is sealed.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from ..events.records import EventRecord
from . import crypto
from .files import PRIVATE_MODE, read_json, write_json

AUDIT_FILE = "vault-audit.jsonl"
AUDIT_KEY_FILE = "vault-audit.key"
#: The event fields a line may carry.  Nothing else of an event goes in (no hint).
LINE_FIELDS = (
    "secret_id", "name", "kind", "scope", "nodes", "bindings", "v", "previous", "destroyed",
    "consumer", "node", "count", "minute", "why", "method", "slot_id", "slot_kind", "replaced",
    "until", "generation", "slots", "problem", "imported", "skipped",
)


def action_of(kind: str) -> str:
    """"Vault.SecretAdded" -> "secret_added"; "Vault.Created" -> "vault_created"."""
    outer, _, name = kind.partition(".")
    if name == "Created":
        name = outer + "Created"
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def line_of(rec: EventRecord) -> dict:
    line = {"pos": rec.position, "at": rec.at, "action": action_of(rec.kind), "actor": rec.actor}
    if rec.reason:
        line["reason"] = rec.reason
    for k in LINE_FIELDS:
        if k in rec.data and rec.data[k] is not None:
            line[k] = rec.data[k]
    return line


log = logging.getLogger(__name__)


class AuditLog:
    def __init__(self, path: Path, key_path: Path, random_source: crypto.RandomSource | None = None):
        self.path = path
        self.random = random_source
        self.key_path = key_path
        self._lock = threading.Lock()
        self._key: bytes | None = None
        self._last_mac = ""
        self._count = 0
        self.last_pos = 0

    def open(self) -> AuditLog:
        self._key = self._load_key()
        self._count, self._last_mac, self.last_pos = 0, "", 0
        self._drop_torn_tail()
        if self.path.exists():
            for raw in self.path.read_bytes().splitlines():
                try:
                    line = json.loads(raw)
                    self._count = int(line["n"])
                    self._last_mac = str(line["mac"])
                    self.last_pos = max(self.last_pos, int(line["pos"]))
                except (ValueError, KeyError, TypeError):
                    continue
        return self

    def _drop_torn_tail(self) -> None:
        """A last line with no newline was being appended when the hub died: it was never written
        whole (nor its MAC), and its event is still in the store, so the next append writes it again.
        Left there, the next append would join it and the chain would break at that line for good."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with open(self.path, "r+b") as f:
            f.seek(max(size - 1, 0))
            if f.read(1) == b"\n":
                return
            f.seek(0)
            whole = f.read().rfind(b"\n") + 1
            f.truncate(whole)
            f.flush()
            os.fsync(f.fileno())
        log.warning("the vault audit log ended in a torn line (a crash mid-append); it was cut back to %s bytes", whole)

    def _load_key(self, create: bool = True) -> bytes:
        found = read_json(self.key_path)
        if found:
            return base64.b64decode(found["key"])
        if not create:
            raise ValueError(f"the vault audit key {self.key_path} is missing, so {self.path} cannot be checked")
        key = crypto.new_key(self.random)
        write_json(self.key_path, {"format": "apz-vault-audit-key/1", "key": base64.b64encode(key).decode()})
        return key

    def _mac(self, prev: str, body: dict) -> str:
        return crypto.mac(self._key, prev.encode() + b"\n" + crypto.canonical(body)).hex()

    def append(self, records: Iterable[EventRecord]) -> int:
        """Lines for the vault events not yet in the file; returns how many were written."""
        with self._lock:
            out = []
            for rec in records:
                if rec.family != "vault" or rec.position <= self.last_pos:
                    continue
                body = line_of(rec)
                body["n"] = self._count + 1
                body["mac"] = self._mac(self._last_mac, body)
                self._count, self._last_mac, self.last_pos = body["n"], body["mac"], rec.position
                out.append(json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n")
            if out:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_MODE)
                try:
                    os.write(fd, "".join(out).encode())
                    os.fsync(fd)
                finally:
                    os.close(fd)
            return len(out)

    def read(self, after: int = 0, limit: int = 100) -> list[dict]:
        """Lines after line number ``after`` (at most ``limit``), as written (mac included)."""
        out = []
        if not self.path.exists():
            return out
        with open(self.path, "rb") as f:
            for no, raw in enumerate(f, 1):
                if no <= after:
                    continue
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    out.append({"n": no, "unreadable": True})
                if len(out) >= limit:
                    break
        return out

    def verify(self) -> dict:
        """Walk the chain; name the first line that does not verify."""
        prev, count, last_pos = "", 0, 0
        if not self.path.exists():
            return {"intact": True, "lines": 0, "broken_at": None, "problem": None}
        with open(self.path, "rb") as f:
            for no, raw in enumerate(f, 1):
                problem = None
                try:
                    line = json.loads(raw)
                    if not isinstance(line, dict):
                        raise ValueError
                except ValueError:
                    problem = "the line is not a JSON object"
                else:
                    mac = line.pop("mac", None)
                    if line.get("n") != no:
                        problem = f"the line says it is line {line.get('n')} (a line before it was deleted, added or moved)"
                    elif not isinstance(mac, str) or mac != self._mac(prev, line):
                        problem = "its MAC does not match (the line, or the one before it, was edited)"
                    elif not isinstance(line.get("pos"), int) or line["pos"] <= last_pos:
                        problem = "its event position goes backwards"
                if problem:
                    return {"intact": False, "lines": no - 1, "broken_at": no, "problem": f"line {no}: {problem}"}
                prev, count, last_pos = mac, no, line["pos"]
        return {"intact": True, "lines": count, "broken_at": None, "problem": None}


def verify_file(path: Path, key_path: Path) -> dict:
    """``AuditLog.verify`` for a reader without the hub: reads the key, makes none.
    Raises ``ValueError`` when the file has lines but the key is missing."""
    audit = AuditLog(path, key_path)
    if not path.exists():
        return audit.verify()
    audit._key = audit._load_key(create=False)
    return audit.verify()
