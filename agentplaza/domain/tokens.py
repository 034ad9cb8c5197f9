"""Gateway tokens: their shape and the hash the store keeps of them (the token itself is never stored).

The model gateway (``api.gateway``) finds a caller by the hash of the token in its address; the
agents' runtime (``runtime.modelrelay``) and the owner's ``models`` routes issue tokens. Both sides
take these names from here.
"""

from __future__ import annotations

import hashlib

#: Gateway tokens: a prefix, then random bytes (``secrets.token_urlsafe``); the hub keeps only their SHA-256.
GATEWAY_TOKEN_PREFIX = "apz_gw_"
GATEWAY_TOKEN_BYTES = 24


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
