"""The plaza's commands: found it once, STOP ALL, resume."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.plaza import PLAZA_ID, Plaza
from .commands import Commands


def load(cmds: Commands) -> Plaza | None:
    return cmds.store.get(PLAZA_ID)


def ensure_founded(cmds: Commands, name: str = "plaza") -> list[int]:
    """The genesis of a new plaza; a no-op on every later start."""

    def decide():
        return [] if load(cmds) is not None else [Plaza.found(cmds.context("hub", "first start"), name)]

    return cmds.run(decide, grouped=False)


def stop_all(cmds: Commands, ctx: Context) -> list[int]:
    def decide():
        plaza = load(cmds)
        plaza.stop_all(ctx)
        return [plaza]

    return cmds.run(decide)


def resume(cmds: Commands, ctx: Context) -> list[int]:
    def decide():
        plaza = load(cmds)
        plaza.resume(ctx)
        return [plaza]

    return cmds.run(decide)
