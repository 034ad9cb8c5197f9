"""A joined node's signing key, and the signed messages it sends the hub: what both sides must agree on.

The guide, "Owner access": "A node's requests are signed with its own key, with a timestamp and a
single-use nonce, so a copied request cannot be replayed."  A node makes an Ed25519 key when it joins
(``KEY_FILE`` in its state folder, 0600) and hands the hub the public half with the join code; the hub
keeps it in the log (``domain.nodes.NodeRegistry``).

A signed message is a small JSON object: ``kind`` (``hello`` opens the node's connection, ``beat`` is
its heartbeat, ``leave`` says it goes), ``node`` (its name), ``at`` (Unix seconds), ``nonce`` (16 random
bytes in hex) and ``sig``, the Ed25519 signature over ``SIGNED_PREFIX`` and those four fields joined by
newlines, together with the hub's address it is meant for (``aud``), so a message signed for one hub
is no message for another.  The hub (``Replay``) refuses one whose time is more than ``SKEW_S_MAX``
away from its own clock, or whose nonce it has seen within that window; a nonce is forgotten only once
its message could no longer be accepted by time alone.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .permissions import write_private_bytes

#: In the node's state folder: its private key (PEM, 0600), and what it received when it joined.
KEY_FILE = "node-key.pem"
JOINED_FILE = "node.json"
#: What every signature covers first (a signature made for anything else is no node message).
SIGNED_PREFIX = b"agentplaza node message v1"
KINDS = ("hello", "beat", "leave")
#: A message's time may be this far from the hub's clock, either way; its nonce is kept this long.
SKEW_S_MAX = 60
#: The nonces the hub remembers at most (older ones are past the window anyway at any sane rate).
NONCES_MAX = 100_000
NONCE_RE = re.compile(r"[0-9a-f]{32}")
NODE_NAME_RE = re.compile(r"n[1-9][0-9]{0,5}")
#: A signed message is no longer than this.
MESSAGE_CHARS_MAX = 2_000


class BadSignature(ValueError):
    """A node message that is refused: malformed, unsigned, wrongly signed, stale or replayed."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_key(state_dir: Path) -> Ed25519PrivateKey:
    """A new signing key in ``state_dir`` (0600); refused where one is there already (a node joins once)."""
    path = Path(state_dir) / KEY_FILE
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists: this machine joined a hub already (agentplaza node leave first)")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private_bytes(path, pem)
    return key


def load_key(state_dir: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key((Path(state_dir) / KEY_FILE).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("the node's key is not an Ed25519 key")
    return key


def public_key_text(key: Ed25519PrivateKey) -> str:
    """The public half as the hub keeps it: 32 bytes in base64url, 43 characters (``PUBLIC_KEY_RE``)."""
    return _b64(key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def _payload(kind: str, node: str, at: int, nonce: str, aud: str) -> bytes:
    return b"\n".join([SIGNED_PREFIX, kind.encode(), node.encode(), str(at).encode(), nonce.encode(), aud.encode()])


def sign(key: Ed25519PrivateKey, kind: str, node: str, aud: str, at: int | None = None,
         nonce: str | None = None) -> str:
    """A signed message of ``kind`` from ``node`` for the hub at ``aud``, as the text sent."""
    at = int(time.time()) if at is None else at
    nonce = nonce or secrets.token_hex(16)
    sig = key.sign(_payload(kind, node, at, nonce, aud))
    return json.dumps({"kind": kind, "node": node, "at": at, "nonce": nonce, "sig": _b64(sig)}, separators=(",", ":"))


@dataclass(frozen=True)
class Message:
    kind: str
    node: str
    at: int
    nonce: str
    sig: str


def parse(text: str) -> Message:
    """The message's fields, checked for shape only (``verify`` checks who signed it)."""
    if not isinstance(text, str) or len(text) > MESSAGE_CHARS_MAX:
        raise BadSignature("not a node message")
    try:
        d = json.loads(text)
    except ValueError:
        raise BadSignature("not a node message") from None
    if not isinstance(d, dict) or set(d) != {"kind", "node", "at", "nonce", "sig"}:
        raise BadSignature("not a node message")
    if d["kind"] not in KINDS or not isinstance(d["node"], str) or not NODE_NAME_RE.fullmatch(d["node"]):
        raise BadSignature("not a node message")
    if type(d["at"]) is not int or not isinstance(d["nonce"], str) or not NONCE_RE.fullmatch(d["nonce"]):
        raise BadSignature("not a node message")
    if not isinstance(d["sig"], str) or len(d["sig"]) != 86:
        raise BadSignature("not a node message")
    return Message(d["kind"], d["node"], d["at"], d["nonce"], d["sig"])


def verify(m: Message, public_key: str, aud: str) -> None:
    """Raises ``BadSignature`` unless ``m`` was signed by the holder of ``public_key`` for ``aud``."""
    try:
        pub = Ed25519PublicKey.from_public_bytes(_unb64(public_key))
        pub.verify(_unb64(m.sig), _payload(m.kind, m.node, m.at, m.nonce, aud))
    except (InvalidSignature, ValueError, binascii.Error):
        raise BadSignature("the signature is not the node's") from None


class Replay:
    """The hub's memory of the nonces it accepted, for ``SKEW_S_MAX`` either side of now."""

    def __init__(self, clock=time.time, skew_s: int = SKEW_S_MAX, kept_max: int = NONCES_MAX):
        self.clock, self.skew_s, self.kept_max = clock, skew_s, kept_max
        self.seen: OrderedDict[str, float] = OrderedDict()  # nonce -> the time its message stops counting

    def accept(self, m: Message) -> None:
        """Raises ``BadSignature`` for a message out of time or seen before; remembers it otherwise.
        Call it after ``verify``: an unsigned message's nonce is never kept."""
        now = self.clock()
        while self.seen and next(iter(self.seen.values())) < now:
            self.seen.popitem(last=False)
        if abs(now - m.at) > self.skew_s:
            raise BadSignature(f"the message's time is more than {self.skew_s} s from the hub's clock")
        key = f"{m.node}:{m.nonce}"
        if key in self.seen:
            raise BadSignature("this message was seen before (a replay)")
        if len(self.seen) >= self.kept_max:
            raise BadSignature("the hub holds too many recent messages; try again shortly")
        self.seen[key] = max(now, m.at) + self.skew_s
        self.seen.move_to_end(key)


def save_joined(state_dir: Path, joined: dict) -> None:
    write_private_bytes(Path(state_dir) / JOINED_FILE, json.dumps(joined, indent=2).encode())


def load_joined(state_dir: Path) -> dict | None:
    try:
        return json.loads((Path(state_dir) / JOINED_FILE).read_text())
    except (OSError, ValueError):
        return None


def forget(state_dir: Path) -> None:
    for name in (KEY_FILE, JOINED_FILE):
        try:
            os.unlink(Path(state_dir) / name)
        except FileNotFoundError:
            pass
