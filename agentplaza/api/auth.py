"""The owner token: made on the first start, printed once, kept as a hash.

The token itself goes to ``owner-token`` in the state folder (0600) so the
command line on this machine can read it; the hub keeps only its SHA-256 in
its record.  Loopback callers are trusted; anyone else presents the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
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
