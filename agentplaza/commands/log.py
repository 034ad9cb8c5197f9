"""The log's commands: void an event that cannot be read back (see ``domain.log``)."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.log import LOG_ID, Log
from .unit import Commands, Done, Unit


def void(cmds: Commands, ctx: Context, position: int) -> Done[None]:
    def decide(unit: Unit) -> None:
        log = unit.get(LOG_ID) or Log.open(ctx)
        log.void(ctx, position, cmds.store.unreadable_at(position))
        unit.add(log)

    return cmds.run(decide)
