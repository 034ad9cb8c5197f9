"""The owner token's rotations.

The guide, "Owner access": "The hub keeps only the token's SHA-256 hash ... The token can be rotated
from the Nodes screen with Rotate owner token. Rotating replaces the token."  "I lost the owner
token": "rotate it on the Nodes screen, from the hub's own machine."

A rotation is one event holding the new token's SHA-256 (never the token), so every hub process on
the one store takes the new hash, and the old token stops working at once.  Whether the caller is on
the hub's own machine is the edge's to say; the rule that it must be is here.
"""

from __future__ import annotations

from .base import Context, PlazaAggregate, Refusal, fixed_id
from .nodes import SHA256_RE

OWNER_TOKEN_ID = fixed_id("owner-token")


class OwnerToken(PlazaAggregate):
    family = "owner_token"

    class Created(PlazaAggregate.Created):
        pass

    class Rotated(PlazaAggregate.Event):
        token_sha256: str

        def apply(self, t: OwnerToken) -> None:
            t.token_sha256 = self.token_sha256
            t.rotations += 1

    def __init__(self) -> None:
        self.token_sha256: str | None = None
        self.rotations = 0

    @classmethod
    def open(cls, ctx: Context) -> OwnerToken:
        return cls.start(ctx, id=OWNER_TOKEN_ID)

    def rotate(self, ctx: Context, token_sha256: str, from_this_machine: bool) -> None:
        if not from_this_machine:
            raise Refusal("not_from_this_machine", "the owner token is rotated from the hub's own machine "
                                                   "(agentplaza hub rotate-token there)")
        if not SHA256_RE.fullmatch(token_sha256):
            raise ValueError("a rotation keeps the new token's SHA-256")
        self.record(self.Rotated, ctx, token_sha256=token_sha256)
