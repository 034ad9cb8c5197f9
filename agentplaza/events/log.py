"""The log's commands: void an event that cannot be read back (see ``domain.log``)."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.log import LOG_ID, Log
from .commands import Commands


def void(cmds: Commands, ctx: Context, position: int) -> list[int]:
    def decide():
        log = cmds.store.get(LOG_ID) or Log.open(ctx)
        log.void(ctx, position, cmds.store.unreadable_at(position))
        return [log]

    return cmds.run(decide)
