"""Editors over ACP: the switches, and the editor sessions kept in the plaza state (see ``domain.acp``)."""

from __future__ import annotations

import uuid

from ..domain.acp import MAX_PROMPT_CHARS, AcpSession
from ..domain.base import Context, Refusal
from . import agents as agent_commands
from .hub_mcp import _settings
from .unit import Commands, Done, Unit


def set_switches(cmds: Commands, ctx: Context, acp_enabled: bool | None = None, acp_write_back: bool | None = None,
                 acp_v2: bool | None = None) -> Done[None]:
    def decide(unit: Unit) -> None:
        m = _settings(unit, ctx)
        m.set_acp(ctx, acp_enabled, acp_write_back, acp_v2)
        unit.add(m)

    return cmds.run(decide)


def new_session(cmds: Commands, ctx: Context, cid: int, caller: str, protocol: int, cwd: str) -> Done[str]:
    session_id = uuid.uuid4()

    def decide(unit: Unit) -> str:
        agent_commands.agent_in(unit, cid)  # an agent of this plaza
        unit.add(AcpSession.open_new(ctx, session_id, cid, caller, protocol, cwd))
        return session_id.hex

    return cmds.run(decide)


def session_in(unit: Unit, session_id: str) -> AcpSession:
    try:
        s = unit.get(uuid.UUID(hex=session_id))
    except ValueError:
        s = None
    if not isinstance(s, AcpSession):
        raise Refusal("no_session", f"no editor session {session_id[:40]!r} on this hub")
    return s


def reopen(cmds: Commands, ctx: Context, session_id: str, how: str, caller: str) -> Done[None]:
    def decide(unit: Unit) -> None:
        s = session_in(unit, session_id)
        s.reopen(ctx, how, caller)
        unit.add(s)

    return cmds.run(decide)


def prompt(cmds: Commands, ctx: Context, session_id: str, cid: int, text: str) -> Done[str]:
    """Tell the agent the prompt and keep it on the session: one commit; the work item's id."""

    def then(unit: Unit, item: str) -> None:
        s = session_in(unit, session_id)
        s.prompted(ctx, item, text)
        unit.add(s)

    return agent_commands.tell(cmds, ctx, cid, text, then=then, limit=MAX_PROMPT_CHARS)
