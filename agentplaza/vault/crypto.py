"""The vault's cryptography, all of it from ``cryptography``: AES-256-GCM for
every value, data key and slot; scrypt to stretch a passphrase or recovery
code; HKDF to derive the index key from the master key; HMAC-SHA256 for the
index checksum and the audit chain.  Nothing here is a primitive of our own.
"""

from __future__ import annotations

import hmac as _hmac
import json
import os
from collections.abc import Callable
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as crypto_hmac
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

#: Master keys, data keys and key-file keys: 256 bits.
KEY_BYTES = 32
#: AES-GCM's 96-bit nonce, fresh and random for every encryption.
NONCE_BYTES = 12
SALT_BYTES = 16
#: scrypt for a passphrase: N=2^15, r=8, p=1 (32 MiB, about 0.1 s): guessing is slow.
PASSPHRASE_SCRYPT_N = 2**15
#: The recovery code already carries 260 random bits; it is stretched all the same.
RECOVERY_SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1


class CryptoError(Exception):
    """A ciphertext or MAC did not verify: wrong key, or the data was changed."""


def random_bytes(n: int) -> bytes:
    return os.urandom(n)


#: Where random bytes come from: ``n`` -> ``n`` bytes (``random_bytes`` unless a caller injects one).
RandomSource = Callable[[int], bytes]


def new_key(source: RandomSource | None = None) -> bytes:
    return (source or random_bytes)(KEY_BYTES)


def encrypt(key: bytes, plaintext: bytes, aad: bytes, source: RandomSource | None = None) -> tuple[bytes, bytes]:
    nonce = (source or random_bytes)(NONCE_BYTES)
    return nonce, AESGCM(bytes(key)).encrypt(nonce, plaintext, aad)


def decrypt(key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
    try:
        return AESGCM(bytes(key)).decrypt(nonce, ciphertext, aad)
    except (InvalidTag, ValueError) as e:
        raise CryptoError("does not decrypt") from e


def stretch(secret: str, salt: bytes, n: int, r: int = SCRYPT_R, p: int = SCRYPT_P) -> bytes:
    return Scrypt(salt=salt, length=KEY_BYTES, n=n, r=r, p=p).derive(secret.encode("utf-8"))


def subkey(master: bytes, purpose: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=purpose.encode()).derive(bytes(master))


def mac(key: bytes, data: bytes) -> bytes:
    h = crypto_hmac.HMAC(bytes(key), hashes.SHA256())
    h.update(data)
    return h.finalize()


def mac_ok(key: bytes, data: bytes, expected: bytes) -> bool:
    return _hmac.compare_digest(mac(key, data), expected)


def canonical(value: Any) -> bytes:
    """One byte string per JSON value: what a MAC or AAD covers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def wipe(buf: bytearray | None) -> None:
    """Overwrite a key held in a bytearray (best effort: Python may hold copies)."""
    if buf is not None:
        for i in range(len(buf)):
            buf[i] = 0
