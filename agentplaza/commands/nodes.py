"""Join codes and joining nodes (``domain.nodes``); the owner token's rotation (``domain.hosting``).

A code's secret and a new owner token are made here, returned once, and kept nowhere: the events
hold their SHA-256 only.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from ..domain.agents import Node, node_id
from ..domain.base import Context, Refusal
from ..domain.hosting import OWNER_TOKEN_ID, OwnerToken
from ..domain.nodes import REGISTRY_ID, JoinCode, NodeRegistry, invalid_code, join_code_id
from ..joincode import SECRET_BYTES, secret_sha256
from ..joincode import JoinCode as CodeText
from .unit import Commands, Done, Unit

#: A code's id: 6 random bytes in hex (the list's and revoke's name for it; no secret).
CODE_ID_BYTES = 6
OWNER_TOKEN_PREFIX = "apz_owner_"
OWNER_TOKEN_BYTES = 32


def make_code(cmds: Commands, ctx: Context, label: str, ttl_min: int, hub_url: str,
              fingerprint: str | None) -> Done[dict]:
    """A new join code: its id, label and expiry, and the code itself (returned here once)."""
    code_id = secrets.token_hex(CODE_ID_BYTES)
    secret = secrets.token_urlsafe(SECRET_BYTES)

    def decide(unit: Unit) -> dict:
        code = JoinCode.make(ctx, code_id, label, ttl_min, secret_sha256(secret), hub_url, fingerprint)
        unit.add(code)
        return {"id": code_id, "label": code.label, "expires_at": code.expires_at, "hub": hub_url,
                "fingerprint": fingerprint, "code": CodeText(hub_url, fingerprint, code_id, secret).text()}

    return cmds.run(decide)


def revoke_code(cmds: Commands, ctx: Context, code_id: str) -> Done[None]:
    def decide(unit: Unit) -> None:
        code = unit.get(join_code_id(code_id))
        if code is None:
            raise Refusal("unknown_join_code", f"no join code {code_id}")
        code.revoke(ctx)
        unit.add(code)

    return cmds.run(decide)


@dataclass(frozen=True)
class Joined:
    name: str
    cid_first: int
    cid_last: int


def redeem(cmds: Commands, ctx: Context, code_id: str, secret: str, public_key: str, address: str) -> Done[Joined | None]:
    """Redeem a code for a node: its name and CID range, its public key kept, the code used, in one
    commit.  A wrong secret for an open code is recorded as a failure and gives None (the caller refuses
    it as every other bad code); an unknown, closed or expired code is refused with nothing written."""
    given = secret_sha256(secret)

    def decide(unit: Unit) -> Joined | None:
        code = unit.get(join_code_id(code_id))
        if code is None or not code.usable(ctx.at):
            raise invalid_code()
        if not code.secret_matches(given):
            code.fail(ctx, address)
            unit.add(code)
            return None
        registry = unit.get(REGISTRY_ID) or NodeRegistry.open(ctx)
        name, first, last = registry.join(ctx, code.label, public_key, code_id, address)
        code.redeemed(ctx, name, address)
        node = Node.start(ctx, id=node_id(name), name=name, cid_first=first, cid_last=last)
        unit.add(registry, code, node)
        return Joined(name, first, last)

    return cmds.run(decide)


def rotate_owner_token(cmds: Commands, ctx: Context, from_this_machine: bool) -> Done[str]:
    """A new owner token (returned here once); the log keeps its SHA-256, which replaces the old one."""
    token = OWNER_TOKEN_PREFIX + secrets.token_urlsafe(OWNER_TOKEN_BYTES)

    def decide(unit: Unit) -> str:
        t = unit.get(OWNER_TOKEN_ID) or OwnerToken.open(ctx)
        t.rotate(ctx, secret_sha256(token), from_this_machine)
        unit.add(t)
        return token

    return cmds.run(decide)


def rotated_owner_token_sha256(cmds: Commands) -> str | None:
    """The hash of the last rotation in the log (None before any)."""
    t = cmds.store.get(OWNER_TOKEN_ID)
    return t.token_sha256 if t is not None else None


def _on_registry(cmds: Commands, act) -> Done[None]:
    def decide(unit: Unit) -> None:
        registry = unit.get(REGISTRY_ID)
        if registry is None:
            raise Refusal("unknown_node", "no node has joined this hub (n0 is the hub's own machine)")
        act(registry)
        unit.add(registry)

    return cmds.run(decide)


def drain(cmds: Commands, ctx: Context, name: str) -> Done[None]:
    """The guide: "A drained node takes no new agents."  (Moving its agents off is the moves loop's.)"""
    return _on_registry(cmds, lambda r: r.drain(ctx, name))


def undrain(cmds: Commands, ctx: Context, name: str) -> Done[None]:
    return _on_registry(cmds, lambda r: r.undrain(ctx, name))


def revoke(cmds: Commands, ctx: Context, name: str) -> Done[None]:
    """The guide: "A revoked node leaves the network for good."  The hub closes its connection, refuses its
    signatures and fails its CIDs closed as it follows this event (``runtime.fleet``)."""
    return _on_registry(cmds, lambda r: r.revoke(ctx, name))


def registry(cmds: Commands) -> NodeRegistry | None:
    """The joined nodes as the log has them now (their keys, ranges, drain and revocation)."""
    return cmds.store.get(REGISTRY_ID)


def node_revoked(cmds: Commands, name: str) -> bool:
    """Whether joined node ``name`` was revoked (as the store has it now, whichever hub wrote it)."""
    with cmds.store.fresh():
        r = cmds.store.get(REGISTRY_ID)
    return r is not None and r.revoked(name)
