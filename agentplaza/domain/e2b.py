"""An E2B sandbox's record in the log: each sandbox event (created, paused, resumed, timeout, network,
ended) is an event of family ``e2b``, so the live bus carries it and replay keeps it. The sandboxes'
live state is the hub's (``runtime/e2b.py``); this is what happened to each, in order."""

from __future__ import annotations

import uuid

from .base import Context, PlazaAggregate

#: What a sandbox event may be.
SANDBOX_EVENTS = ("created", "paused", "resumed", "timeout", "network", "ended")


def sandbox_record_id(sandbox_id: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:e2b-sandbox:{sandbox_id}")


class SandboxRecord(PlazaAggregate):
    """One sandbox's events, under its CID."""

    family = "e2b"

    class Created(PlazaAggregate.Created):
        sandbox_id: str
        cid: int
        template: str

    class Happened(PlazaAggregate.Event):
        cid: int
        what: str
        detail: dict

        def apply(self, s: SandboxRecord) -> None:
            s.last = self.what

    def __init__(self, sandbox_id: str, cid: int, template: str):
        self.sandbox_id, self.cid, self.template = sandbox_id, cid, template
        self.last = "created"

    @classmethod
    def open(cls, ctx: Context, sandbox_id: str, cid: int, template: str) -> SandboxRecord:
        return cls.start(ctx, id=sandbox_record_id(sandbox_id), sandbox_id=sandbox_id, cid=cid, template=template)

    def happened(self, ctx: Context, what: str, detail: dict) -> None:
        self.record(SandboxRecord.Happened, ctx, cid=self.cid, what=what, detail=detail)
