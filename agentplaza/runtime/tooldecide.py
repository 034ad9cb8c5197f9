"""Where an agent's tool calls meet the laws, and its model calls meet the gateway.

``check_tool`` builds the ``jhrl.Call`` from the plaza's own record of the agent (its role and tier;
never the guest's word) and passes it through ``commands.conduct.check_call``: nothing while the plaza is
held, suspensions, the agent's permission mode, an approval of this exact call used once, the laws in
force (the decision recorded as an event), an ask decision held in approvals, violations sanctioned.
``decide_tool`` is the bare decision (``commands.laws.decide_call``), used for egress connections.

Model turns go to the hub's own gateway through ``runtime.modelrelay``.
"""

from __future__ import annotations

from typing import Any

import jhrl
from jhrl.catalog import TOOLS

from ..commands import conduct, laws
from ..domain.base import Refusal


def lawset(hub: Any) -> jhrl.LawSet:
    return laws.book_in_force(hub.commands).lawset


def decide_tool(hub: Any, agent: Any, tool: str, args: dict) -> jhrl.Decision:
    risk = TOOLS.get(tool)
    if risk is None:
        return jhrl.Decision("deny", "default_deny")
    call = jhrl.Call(role=agent.role, action=tool, risk=risk, tier=agent.tier, mode=conduct.mode_of(hub.commands, str(agent.cid)),
                     args={k: v for k, v in args.items() if isinstance(v, (str, int, bool, float))})
    return laws.decide_call(hub.commands, call, str(agent.cid)).decision


def check_tool(hub: Any, agent: Any, tool: str, args: dict) -> conduct.CallCheck:
    """Every tool call of an agent, before it runs. A refusal before the laws (the plaza held, a
    suspension in force) comes back as a deny decision with the refusal's code as the reason."""
    risk = TOOLS.get(tool)
    mode = conduct.mode_of(hub.commands, str(agent.cid))
    call = jhrl.Call(role=agent.role, action=tool, risk=risk or "irreversible", tier=agent.tier,
                     mode=mode, args={k: v for k, v in args.items() if isinstance(v, (str, int, bool, float))})
    if risk is None:
        return conduct.CallCheck(jhrl.Decision("deny", "default_deny"), call.digest(), "", mode)
    try:
        return conduct.check_call(hub.commands, call, str(agent.cid))
    except Refusal as r:
        return conduct.CallCheck(jhrl.Decision("deny", r.code), call.digest(), "", mode,
                                 extra={"message": r.message})


def offered(hub: Any, agent: Any, tools: tuple) -> list[str]:
    return jhrl.offered_tools(lawset(hub), agent.role, agent.tier, conduct.mode_of(hub.commands, str(agent.cid)),
                              {t: TOOLS[t] for t in tools if t in TOOLS})
