"""Where an agent's tool calls meet the laws, and its model calls meet the gateway.

``decide_tool`` builds the ``jhrl.Call`` from the plaza's own record of the agent (its role, tier and
permission mode; never the guest's word) and decides it with the laws in force (the built-ins and the
owner's rules) through ``events.laws.decide_call``, which records the decision as an event.

``model_turn`` is the seam to the model gateway (issue 7). Until the gateway is in the hub, a model
call answers ``no_gateway`` and the harness reports the work item as failed.
"""

from __future__ import annotations

from typing import Any

import jhrl
from jhrl.catalog import TOOLS

from ..events import laws


def lawset(hub: Any) -> jhrl.LawSet:
    return laws.book_in_force(hub.commands).lawset


def decide_tool(hub: Any, agent: Any, tool: str, args: dict) -> jhrl.Decision:
    risk = TOOLS.get(tool)
    if risk is None:
        return jhrl.Decision("deny", "default_deny")
    call = jhrl.Call(role=agent.role, action=tool, risk=risk, tier=agent.tier, mode=agent.permission_mode,
                     args={k: v for k, v in args.items() if isinstance(v, (str, int, bool, float))})
    return laws.decide_call(hub.commands, call, str(agent.cid)).decision


def offered(hub: Any, agent: Any, tools: tuple) -> list[str]:
    return jhrl.offered_tools(lawset(hub), agent.role, agent.tier, agent.permission_mode,
                              {t: TOOLS[t] for t in tools if t in TOOLS})


NO_GATEWAY = "the model gateway is not part of this hub yet; no model call was made"


def model_turn(hub: Any, agent: Any, messages: list, tools: list) -> dict:
    gateway = getattr(hub, "gateway", None)
    if gateway is None:
        return {"ok": False, "error": {"code": "no_gateway", "message": NO_GATEWAY}}
    return gateway.agent_turn(agent, messages, tools)
