"""Join codes, and the nodes that joined with one.

The guide, "Join codes":

- "A code is valid for 15 minutes by default, and for at most 60."  (``TTL_MIN_DEFAULT``, ``TTL_MIN_MAX``)
- "A code works once. After it is used, the list shows it as used."
- "The hub keeps only a SHA-256 hash of the code's secret."  The events carry that hash and never the
  secret: the secret is made by the command, shown once, and forgotten.
- "A code stops working after three failed redemptions."  (``FAILURES_MAX``)
- "A refused code always gets the same message, so a caller learns nothing about the code."
  (``INVALID_CODE_MESSAGE``: expired, used, revoked, ended, unknown and wrong secret read alike.)
- "An unused code can be revoked from the Nodes list."

"CID ranges": "each machine owns its own range of 100. The hub's machine keeps the range it already
had, and each joined node gets the next free one: the first node has 1000 to 1099, the second has
1100 to 1199, and so on. The owner never picks a range."  ``NodeRegistry`` hands out the next range
and the next name (n1, n2 ...) once per redemption, so two redemptions at once cannot share one (the
second commit conflicts and decides again on fresh state).

Rules, in the order ``JoinCode.redeem`` applies them: the code is open (not used, revoked or ended),
it has not expired, the secret's hash matches; a wrong secret is recorded as a failure (the third ends
the code) and the redemption is refused with the one message.

Pure: the time is the context's, the secret's hash is given.
"""

from __future__ import annotations

import datetime as dt
import hmac
import re
import uuid

from .agents import CID_RANGE_SIZE, JOINED_CID_FIRST, LOCAL_CID_FIRST, LOCAL_NODE
from .base import Context, PlazaAggregate, Refusal, fixed_id

#: The guide: valid "for 15 minutes by default, and for at most 60".
TTL_MIN_DEFAULT = 15
TTL_MIN_MIN = 1
TTL_MIN_MAX = 60
#: "A code stops working after three failed redemptions."
FAILURES_MAX = 3
#: The one answer to every refused code (the guide's troubleshooting quotes it).
INVALID_CODE_MESSAGE = "this join code is not valid"
#: A label: what the owner calls the machine (``--label atlas``). Matched whole.
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}")
#: A node's public key: Ed25519's 32 bytes, base64url without padding. Matched whole.
PUBLIC_KEY_RE = re.compile(r"[A-Za-z0-9_-]{43}")
#: A code's id: the hub's short public name for it (list, revoke). Matched whole.
CODE_ID_RE = re.compile(r"[0-9a-f]{12}")
#: A SHA-256 in hex. Matched whole.
SHA256_RE = re.compile(r"[0-9a-f]{64}")

#: A code's states, as the list shows them (``expired`` is an open code past its time, read at query time).
OPEN, USED, REVOKED, ENDED = "open", "used", "revoked", "ended"
STATES = (OPEN, USED, REVOKED, ENDED)

REGISTRY_ID = fixed_id("nodes:joined")


def join_code_id(code_id: str) -> uuid.UUID:
    return fixed_id(f"join-code:{code_id}")


def invalid_code() -> Refusal:
    return Refusal("join_code_invalid", INVALID_CODE_MESSAGE)


def check_ttl(ttl_min: int) -> int:
    if type(ttl_min) is not int or not TTL_MIN_MIN <= ttl_min <= TTL_MIN_MAX:
        raise Refusal("invalid_ttl", f"a join code is valid for {TTL_MIN_MIN} to {TTL_MIN_MAX} minutes "
                                     f"(default {TTL_MIN_DEFAULT})")
    return ttl_min


def check_label(label: str) -> str:
    label = label.strip() if isinstance(label, str) else ""
    if not LABEL_RE.fullmatch(label):
        raise Refusal("invalid_label", "a label is 1 to 40 letters, digits, spaces, '.', '-' or '_', "
                                       "starting with a letter or digit")
    return label


def check_public_key(key: str) -> str:
    if not isinstance(key, str) or not PUBLIC_KEY_RE.fullmatch(key):
        raise Refusal("invalid_public_key", "a node's public key is its Ed25519 key's 32 bytes in base64url, "
                                            "43 characters without padding")
    return key


class JoinCode(PlazaAggregate):
    """One join code: its label, the hash of its secret, its expiry, its failures, and what became of it."""

    family = "join_code"

    class Created(PlazaAggregate.Created):
        code_id: str
        label: str
        secret_sha256: str
        expires_at: str  # ISO 8601, UTC
        hub_url: str
        fingerprint: str | None

    class RedemptionFailed(PlazaAggregate.Event):
        address: str

        def apply(self, c: JoinCode) -> None:
            c.failures += 1

    class Ended(PlazaAggregate.Event):
        """The third failed redemption: the code works no more."""

        def apply(self, c: JoinCode) -> None:
            c.state = ENDED

    class Redeemed(PlazaAggregate.Event):
        node: str
        address: str

        def apply(self, c: JoinCode) -> None:
            c.state, c.node = USED, self.node

    class Revoked(PlazaAggregate.Event):
        def apply(self, c: JoinCode) -> None:
            c.state = REVOKED

    def __init__(self, code_id: str, label: str, secret_sha256: str, expires_at: str, hub_url: str,
                 fingerprint: str | None):
        self.code_id, self.label, self.secret_sha256 = code_id, label, secret_sha256
        self.expires_at, self.hub_url, self.fingerprint = expires_at, hub_url, fingerprint
        self.failures = 0
        self.state = OPEN
        self.node: str | None = None

    @classmethod
    def make(cls, ctx: Context, code_id: str, label: str, ttl_min: int, secret_sha256: str, hub_url: str,
             fingerprint: str | None) -> JoinCode:
        if not CODE_ID_RE.fullmatch(code_id) or not SHA256_RE.fullmatch(secret_sha256):
            raise ValueError("a join code is made with its id and the SHA-256 of its secret")
        expires = ctx.at + dt.timedelta(minutes=check_ttl(ttl_min))
        return cls.start(ctx, id=join_code_id(code_id), code_id=code_id, label=check_label(label),
                         secret_sha256=secret_sha256, expires_at=expires.isoformat(), hub_url=hub_url,
                         fingerprint=fingerprint)

    def expired(self, at: dt.datetime) -> bool:
        return at >= dt.datetime.fromisoformat(self.expires_at)

    def usable(self, at: dt.datetime) -> bool:
        return self.state == OPEN and not self.expired(at)

    def secret_matches(self, secret_sha256: str) -> bool:
        return hmac.compare_digest(self.secret_sha256, secret_sha256)

    def fail(self, ctx: Context, address: str) -> None:
        """A wrong secret for this open code: counted (the third ends it)."""
        if self.state == OPEN:
            self.record(self.RedemptionFailed, ctx, address=address[:100])
            if self.failures >= FAILURES_MAX:
                self.record(self.Ended, ctx)

    def redeemed(self, ctx: Context, node: str, address: str) -> None:
        if not self.usable(ctx.at):
            raise invalid_code()
        self.record(self.Redeemed, ctx, node=node, address=address[:100])

    def revoke(self, ctx: Context) -> None:
        """The guide: "An unused code can be revoked." A used one is history; a closed one is closed."""
        if self.state == USED:
            raise Refusal("join_code_used", f"join code {self.code_id} was used by node {self.node}; "
                                            "revoke the node instead")
        if self.state != OPEN:
            raise Refusal("join_code_closed", f"join code {self.code_id} is {self.state} already")
        self.record(self.Revoked, ctx)


class NodeRegistry(PlazaAggregate):
    """The joined nodes: their names and CID ranges in the order they joined, and their public keys."""

    family = "node_registry"

    class Created(PlazaAggregate.Created):
        pass

    class NodeJoined(PlazaAggregate.Event):
        name: str
        label: str
        cid_first: int
        cid_last: int
        public_key: str
        code_id: str
        address: str

        def apply(self, r: NodeRegistry) -> None:
            r.joined[self.name] = {"cid_first": self.cid_first, "cid_last": self.cid_last,
                                   "public_key": self.public_key, "label": self.label}

    def __init__(self) -> None:
        self.joined: dict[str, dict] = {}

    @classmethod
    def open(cls, ctx: Context) -> NodeRegistry:
        return cls.start(ctx, id=REGISTRY_ID)

    def next_node(self) -> tuple[str, int, int]:
        """The next joined node's name and CID range: n1 with 1000-1099, n2 with 1100-1199 ..."""
        k = len(self.joined)
        first = JOINED_CID_FIRST + k * CID_RANGE_SIZE
        return f"n{k + 1}", first, first + CID_RANGE_SIZE - 1

    def join(self, ctx: Context, label: str, public_key: str, code_id: str, address: str) -> tuple[str, int, int]:
        name, first, last = self.next_node()
        self.record(self.NodeJoined, ctx, name=name, label=label, cid_first=first, cid_last=last,
                    public_key=check_public_key(public_key), code_id=code_id, address=address[:100])
        return name, first, last


def range_node(cid: int) -> str:
    """The machine whose CID range holds ``cid`` (the guide, "CID ranges"): n0 for the hub's own range,
    n1 for 1000-1099, n2 for 1100-1199 ...  A CID in no range names no machine ("")."""
    if type(cid) is not int:
        return ""
    if LOCAL_CID_FIRST <= cid < LOCAL_CID_FIRST + CID_RANGE_SIZE:
        return LOCAL_NODE
    if cid >= JOINED_CID_FIRST:
        return f"n{(cid - JOINED_CID_FIRST) // CID_RANGE_SIZE + 1}"
    return ""
