"""A join code as the owner copies it: what the hub and the joining machine must agree on.

The guide: "The code carries the hub's public address and the fingerprint of its certificate."  A
code is ``apzjoin1.`` and the base64url of a small JSON object: the hub's public address (``hub``),
its certificate's SHA-256 (``pin``, none for a hub without HTTPS), the code's id (``id``) and its
secret (``secret``).  Only the secret is a secret; the hub keeps its SHA-256 and nothing else of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass

PREFIX = "apzjoin1."
#: A code longer than this is no code (the hub reads no further).
CODE_CHARS_MAX = 1_000
#: The secret's random bytes (``secrets.token_urlsafe``).
SECRET_BYTES = 32


class NotACode(ValueError):
    """The text is no join code (the hub answers it as every refused code)."""


@dataclass(frozen=True)
class JoinCode:
    hub: str
    pin: str | None
    id: str
    secret: str

    def text(self) -> str:
        raw = json.dumps({"hub": self.hub, "pin": self.pin, "id": self.id, "secret": self.secret},
                         separators=(",", ":")).encode()
        return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def secret_sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse(text: str) -> JoinCode:
    t = (text or "").strip()
    if len(t) > CODE_CHARS_MAX or not t.startswith(PREFIX):
        raise NotACode("not a join code")
    body = t[len(PREFIX):]
    try:
        d = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError) as e:
        raise NotACode("not a join code") from e
    if not isinstance(d, dict) or set(d) != {"hub", "pin", "id", "secret"}:
        raise NotACode("not a join code")
    if not all(isinstance(d[k], str) for k in ("hub", "id", "secret")) or not isinstance(d["pin"], (str, type(None))):
        raise NotACode("not a join code")
    return JoinCode(d["hub"], d["pin"], d["id"], d["secret"])
