"""The E2B sandboxes' events in the log (``domain/e2b.py``): one unit per sandbox event."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.e2b import SANDBOX_EVENTS, SandboxRecord, sandbox_record_id
from .unit import Commands, Done, Unit


def record(cmds: Commands, ctx: Context, sandbox_id: str, cid: int, template: str, what: str,
           detail: dict) -> Done[None]:
    if what not in SANDBOX_EVENTS:
        raise ValueError(f"no sandbox event {what!r}")

    def decide(unit: Unit) -> None:
        rec = unit.get(sandbox_record_id(sandbox_id))
        if rec is None:
            rec = SandboxRecord.open(ctx, sandbox_id, cid, template)
        rec.happened(ctx, what, detail)
        unit.add(rec)

    return cmds.run(decide)
