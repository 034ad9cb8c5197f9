"""The owner token: made on the first start, printed once, kept as a hash.

The token itself goes to ``owner-token`` in the state folder (0600) so the
command line on this machine can read it; the hub keeps only its SHA-256 in
its record.  Loopback callers are trusted (unless apid --loopback-trust off);
anyone else presents the token, or the session cookie of a sign-in.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import threading
import time
from pathlib import Path

from ..config import HUB_RECORD_FILE, OWNER_TOKEN_FILE

TOKEN_PREFIX = "apz_owner_"
TOKEN_BYTES = 32
STATE_FILE_MODE = 0o600


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, STATE_FILE_MODE)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, STATE_FILE_MODE)


def record_owner_token(state_dir: Path, token: str) -> str:
    """Write a new owner token to its file and its hash to the hub's record; the hash."""
    record_path = state_dir / HUB_RECORD_FILE
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    write_private(state_dir / OWNER_TOKEN_FILE, token + "\n")
    record["owner_token_sha256"] = token_hash(token)
    write_private(record_path, json.dumps(record, indent=2) + "\n")
    return record["owner_token_sha256"]


def ensure_owner_token(state_dir: Path) -> tuple[str, str | None]:
    """Returns (the token's hash, the new token if it was made just now)."""
    record_path = state_dir / HUB_RECORD_FILE
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    if record.get("owner_token_sha256"):
        return record["owner_token_sha256"], None
    token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    write_private(state_dir / OWNER_TOKEN_FILE, token + "\n")
    record["owner_token_sha256"] = token_hash(token)
    write_private(record_path, json.dumps(record, indent=2) + "\n")
    return record["owner_token_sha256"], token


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def bearer_ok(authorization: str | None, expected_hash: str) -> bool:
    if not authorization or not authorization.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(token_hash(authorization[7:].strip()), expected_hash)


# -- Who the caller is ---------------------------------------------------------------------------------------

#: Where OwnerOnly leaves how the caller proved to be the owner: one of the AUTH_* values.
AUTH_SCOPE_KEY = "apz.auth"
AUTH_LOOPBACK = "loopback"  # trusted for calling from this machine (apid --loopback-trust on)
AUTH_TOKEN = "token"  # presented the owner token as a bearer token, explicitly
AUTH_SESSION = "session"  # a sign-in's session cookie

#: apid --loopback-trust on|off; the environment's default when the flag is not given.
LOOPBACK_TRUST_ENV = "APZ_LOOPBACK_TRUST"
LOOPBACK_TRUST_VALUES = {"on": True, "off": False}


def loopback_trust_from(flag: str | None, environ: dict[str, str]) -> bool:
    raw = flag if flag is not None else (environ.get(LOOPBACK_TRUST_ENV) or "on")
    if raw.strip().lower() not in LOOPBACK_TRUST_VALUES:
        raise ValueError(f"--loopback-trust is on or off, not {raw!r} ({LOOPBACK_TRUST_ENV})")
    return LOOPBACK_TRUST_VALUES[raw.strip().lower()]


# -- Sign-in: a session cookie from the owner token, or from a one-time link -------------------------------

#: The guide: "The cookie is HttpOnly, Secure and SameSite=Strict, and it lasts 12 hours."
SESSION_COOKIE = "apz_session"
SESSION_TTL_S = 12 * 3600
#: A sign-in link apid prints at start works once, within this time.
SIGN_IN_LINK_TTL_S = 15 * 60
SESSION_BYTES = 32


class Sessions:
    """Sign-ins held by this hub process, kept as hashes (a restart signs everyone out)."""

    def __init__(self, clock=time.time):
        self.clock = clock
        self._sessions: dict[str, float] = {}  # sha256 of the cookie -> expiry
        self._links: dict[str, float] = {}  # sha256 of a one-time code -> expiry
        self._lock = threading.Lock()

    def open(self) -> tuple[str, float]:
        """A new session: (the cookie value, its expiry as a unix time)."""
        value = secrets.token_urlsafe(SESSION_BYTES)
        expires = self.clock() + SESSION_TTL_S
        with self._lock:
            self._drop_expired()
            self._sessions[token_hash(value)] = expires
        return value, expires

    def valid(self, value: str | None) -> bool:
        if not value:
            return False
        with self._lock:
            expires = self._sessions.get(token_hash(value))
        return expires is not None and expires > self.clock()

    def close(self, value: str | None) -> None:
        if value:
            with self._lock:
                self._sessions.pop(token_hash(value), None)

    def close_all(self, keep: str | None = None) -> None:
        """Every sign-in ends (the owner token was rotated: a thief's session goes with the old token), but
        ``keep``'s: the sign-in that rotated it, whose owner was just given the new token anyway."""
        kept = token_hash(keep) if keep else None
        with self._lock:
            self._sessions = {kept: self._sessions[kept]} if kept in self._sessions else {}

    def new_link_code(self) -> str:
        code = secrets.token_urlsafe(SESSION_BYTES)
        with self._lock:
            self._links[token_hash(code)] = self.clock() + SIGN_IN_LINK_TTL_S
        return code

    def use_link_code(self, code: str | None) -> bool:
        """True once for a code made here and not expired; it is gone after."""
        if not code:
            return False
        with self._lock:
            expires = self._links.pop(token_hash(code), None)
        return expires is not None and expires > self.clock()

    def _drop_expired(self) -> None:
        now = self.clock()
        self._sessions = {k: v for k, v in self._sessions.items() if v > now}
        self._links = {k: v for k, v in self._links.items() if v > now}


def session_cookie(value: str, max_age: int = SESSION_TTL_S) -> str:
    return f"{SESSION_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; Secure; SameSite=Strict"


def cookie_value(cookie_header: str | None, name: str = SESSION_COOKIE) -> str | None:
    for part in (cookie_header or "").split(";"):
        k, sep, v = part.strip().partition("=")
        if sep and k == name:
            return v.strip() or None
    return None


def session_of(scope) -> str | None:
    """The sign-in's cookie value of a caller that came in on one (``AUTH_SESSION``); None for any other way in."""
    if scope.get(AUTH_SCOPE_KEY) != AUTH_SESSION:
        return None
    headers = dict(scope.get("headers") or [])
    return cookie_value(headers.get(b"cookie", b"").decode("latin-1"))


def presented_token(scope) -> bool:
    """The caller showed the owner token itself: not loopback trust, not an ambient cookie."""
    return scope.get(AUTH_SCOPE_KEY) == AUTH_TOKEN
