"""Discoveries' commands: an agent shares one (``plaza_toolbox_share``), the owner flags or removes one."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.toolbox import TOOLBOX_ID, Toolbox
from .unit import Commands, Done, Unit


def _toolbox(unit: Unit, ctx: Context) -> Toolbox:
    return unit.get(TOOLBOX_ID) or Toolbox.open(ctx)


def share(cmds: Commands, ctx: Context, by: int, name: str, how: str, verdict: str, link: str) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        tb = _toolbox(unit, ctx)
        out = tb.share(ctx, by, name, how, verdict, link)
        unit.add(tb)
        return out

    return cmds.run(decide)


def flag(cmds: Commands, ctx: Context, entry: str) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        tb = _toolbox(unit, ctx)
        out = {"id": tb.flag(ctx, entry), "flagged": True}
        unit.add(tb)
        return out

    return cmds.run(decide)


def remove(cmds: Commands, ctx: Context, entry: str) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        tb = _toolbox(unit, ctx)
        out = {"id": tb.remove(ctx, entry), "removed": True}
        unit.add(tb)
        return out

    return cmds.run(decide)
