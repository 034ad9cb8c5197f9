"""Memory's commands: an agent writes or deletes its own notes (``plaza_memory_write``/``_delete``)."""

from __future__ import annotations

from ..domain.base import Context
from ..domain.memory import Memory, memory_id
from .agents import agent_in
from .unit import Commands, Done, Unit


def _memory(unit: Unit, ctx: Context, cid: int) -> Memory:
    found = unit.get(memory_id(cid))
    if found is None:
        agent_in(unit, cid)._alive()
        found = Memory.open(ctx, cid)
    return found


def write(cmds: Commands, ctx: Context, cid: int, title: str, text: str) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        m = _memory(unit, ctx, cid)
        out = m.write(ctx, title, text)
        unit.add(m)
        return out

    return cmds.run(decide)


def delete(cmds: Commands, ctx: Context, cid: int, title: str) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        m = _memory(unit, ctx, cid)
        out = m.delete(ctx, title)
        unit.add(m)
        return out

    return cmds.run(decide)
