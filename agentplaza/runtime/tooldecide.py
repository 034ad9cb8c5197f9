"""Where an agent's tool calls meet the laws.

``check_in`` builds the ``jhrl.Call`` from the plaza's own record of the agent (its role and tier;
never the guest's word), with the tool's risk class from ``runtime.tools``, and passes it through
``commands.conduct.check_in`` inside the caller's unit of work: nothing while the plaza is held,
suspensions, the agent's permission mode (its Conduct's), an approval of this exact call used once,
the laws in force (the decision recorded as an event), an ask decision held in approvals, violations
sanctioned. ``decide_tool`` is the bare decision (``commands.laws.decide_call``), used for egress
connections. ``offered`` is what the laws let the agent be offered, by the tools' risk classes.
"""

from __future__ import annotations

from typing import Any

import jhrl
from jhrl.catalog import LIBRARY_TOOL_PREFIX
from jhrl.catalog import TOOLS as CATALOGUE

from ..commands import conduct, laws
from ..commands.unit import Unit
from ..domain.base import Refusal
from . import toollib, tools


def lawset(hub: Any) -> jhrl.LawSet:
    return laws.book_in_force(hub.commands).lawset


def mode_of(hub: Any, agent: Any) -> str:
    """The agent's permission mode: its Conduct's, the one home of the mode."""
    return conduct.mode_of(hub.commands, str(agent.cid))


def _call(agent: Any, tool: str, args: dict, mode: str) -> jhrl.Call:
    return jhrl.Call(role=agent.role, action=tool, risk=tools.risk_of(tool), tier=agent.tier, mode=mode,
                     args={k: v for k, v in args.items() if isinstance(v, (str, int, bool, float))})


def known(tool: str) -> bool:
    """A tool the laws are written against (the catalogue; every declared tool is in it), or a library
    tool (``x_<name>``: the session offers and decides only those offered to the agent); any other is
    refused by default, before the laws."""
    return tool in CATALOGUE or tool.startswith(LIBRARY_TOOL_PREFIX)


def decide_tool(hub: Any, agent: Any, tool: str, args: dict) -> jhrl.Decision:
    if not known(tool):
        return jhrl.Decision("deny", "default_deny")
    call = _call(agent, tool, args, mode_of(hub, agent))
    return laws.decide_call(hub.commands, call, str(agent.cid)).value.decision


def check_in(unit: Unit, hub: Any, agent: Any, tool: str, args: dict) -> conduct.CallCheck:
    """Every tool call of an agent, before it runs, its records added to ``unit``. A refusal before the
    laws (the plaza held, a suspension in force) comes back as a deny decision with the refusal's code
    as the reason, and adds nothing."""
    mode = mode_of(hub, agent)
    call = _call(agent, tool, args, mode)
    if not known(tool):
        return conduct.CallCheck(jhrl.Decision("deny", "default_deny"), call.digest(), "", mode)
    ctx = hub.commands.context(f"agent:{agent.cid}")
    try:
        return conduct.check_in(unit, hub.commands, call, str(agent.cid), ctx)
    except Refusal as r:
        return conduct.CallCheck(jhrl.Decision("deny", r.code), call.digest(), "", mode, extra={"message": r.message})


def offered(hub: Any, agent: Any, names: tuple[str, ...] = tuple(tools.TOOLS)) -> list[str]:
    return jhrl.offered_tools(lawset(hub), agent.role, agent.tier, mode_of(hub, agent), tools.risks(names))


def offered_library(hub: Any, agent: Any) -> list[dict]:
    """The library tools (``x_<name>``) the agent is offered now: those the tool library offers it
    (``runtime.toollib``) that the laws let it be offered."""
    entries = toollib.offered(hub, agent.cid)
    allowed = set(offered(hub, agent, tuple(e["name"] for e in entries)))
    return [e for e in entries if e["name"] in allowed]
