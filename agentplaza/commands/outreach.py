"""Outreach: the hub sends an idle agent with nothing to do looking for people to work with
(``domain.outreach``), at most once every ``society.outreach_minutes``.

One commit: the agent's work item (``Agent.Told``), its transcript's entry and the ``Outreach.Sent``
that dates it. The rules are checked on the state as stored, so two hubs (or a restarted one) cannot
send an agent twice in one interval: the second sees the first's ``Outreach.Sent`` and is refused.
"""

from __future__ import annotations

from ..domain import hiring as h
from ..domain import outreach as o
from ..domain.base import Context
from ..domain.plaza import require_running
from .agents import agent_in, transcript_in
from .unit import Commands, Done, Unit


def reach_out(cmds: Commands, ctx: Context, cid: int, text: str) -> Done[str]:
    """Send agent ``cid`` looking for people to work with; the work item's id."""
    item = "w-" + cmds.new_id()[:12]

    def decide(unit: Unit) -> str:
        require_running(unit.get)  # STOP ALL holds outreach
        a = agent_in(unit, cid)
        minutes = h.outreach_minutes(unit.get)
        sent = unit.get(o.outreach_id(cid))
        o.check_outreach(a, sent.last_at if sent is not None else None, a.modified_on, ctx.at, minutes)
        a.tell(ctx, item, text)  # the agent is awake (checked above): this never wakes it
        tr = transcript_in(unit, a)
        tr.add(ctx, "told", text=text, detail={"item": item, "from": ctx.actor, "outreach": True})
        sent = sent or o.Outreach.open(ctx, cid)
        sent.sent(ctx, item, minutes)
        unit.add(a, tr, sent)
        return item

    return cmds.run(decide)
