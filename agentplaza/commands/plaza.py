"""The plaza's commands: found it once, STOP ALL, resume."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.plaza import PLAZA_ID, Plaza
from . import treasury
from .unit import Commands, Done, Unit


def load(cmds: Commands) -> Plaza | None:
    return cmds.store.get(PLAZA_ID)


def ensure_founded(cmds: Commands, name: str = "plaza") -> Done[None]:
    """The genesis of a new plaza, with its budget's genesis Mint in the same
    commit; a no-op on every later start (a plaza founded before the treasury
    existed gets its budget on its next start)."""

    def decide(unit: Unit) -> None:
        ctx = cmds.context("hub", "first start")
        if unit.get(PLAZA_ID) is None:
            unit.add(Plaza.found(ctx, name))
        treasury.genesis(unit, ctx)

    return cmds.run(decide, grouped=False)


def stop_all(cmds: Commands, ctx: Context) -> Done[None]:
    def decide(unit: Unit) -> None:
        plaza = unit.get(PLAZA_ID)
        plaza.stop_all(ctx)
        unit.add(plaza)

    return cmds.run(decide)


def resume(cmds: Commands, ctx: Context) -> Done[None]:
    def decide(unit: Unit) -> None:
        plaza = unit.get(PLAZA_ID)
        plaza.resume(ctx)
        unit.add(plaza)

    return cmds.run(decide)
