"""The plaza's commands: found it once, STOP ALL, resume."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.plaza import PLAZA_ID, Plaza
from . import treasury
from .unit import Commands


def load(cmds: Commands) -> Plaza | None:
    return cmds.store.get(PLAZA_ID)


def ensure_founded(cmds: Commands, name: str = "plaza") -> list[int]:
    """The genesis of a new plaza, with its budget's genesis Mint in the same
    commit; a no-op on every later start (a plaza founded before the treasury
    existed gets its budget on its next start)."""

    def decide():
        ctx = cmds.context("hub", "first start")
        found = [] if load(cmds) is not None else [Plaza.found(ctx, name)]
        return found + treasury.genesis_aggregates(cmds, ctx)

    return cmds.run_aggregates(decide, grouped=False)


def stop_all(cmds: Commands, ctx: Context) -> list[int]:
    def decide():
        plaza = load(cmds)
        plaza.stop_all(ctx)
        return [plaza]

    return cmds.run_aggregates(decide)


def resume(cmds: Commands, ctx: Context) -> list[int]:
    def decide():
        plaza = load(cmds)
        plaza.resume(ctx)
        return [plaza]

    return cmds.run_aggregates(decide)
