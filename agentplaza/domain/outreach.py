"""Outreach: "An idle agent with nothing to do goes looking for people to work with. By default it does
this at most once every 20 minutes. The setting is outreach_minutes, and 0 turns outreach off."

- ``Outreach`` (one per agent, id from its CID): when the hub last sent the agent looking for people,
  and how many times. The work item itself is an ordinary ``Agent.Told`` in the same commit.

Rules of an outreach, in the order ``check_outreach`` applies them (the command checks first that the
plaza is not held: "STOP ALL ... Scheduled loops, outreach and task assignment stop"):

1. Outreach is on: ``outreach_minutes`` is not 0 (``outreach_off``).
2. The agent is running, awake and idle (``agent_not_idle``). Outreach "never wakes a sleeping agent
   on its own": an asleep agent is skipped, not woken, unlike a task or a message.
3. It has nothing to do: no work item queued or running (``agent_busy``); the runtime also skips an
   agent that holds a task or waits on an approval (``AgentRuntime.awake_because``).
4. It has been idle at least ``IDLE_BEFORE_OUTREACH_S``: an agent whose task just ended is given the
   scheduler's next pass first (``not_idle_long_enough``).
5. At most once every ``outreach_minutes``: the last outreach was that long ago or more
   (``outreach_not_due``).
6. The orchestrator plans from the owner's goals and does not go looking (``OUTREACH_TIERS``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from jhrl.catalog import tier_of

from .base import Context, PlazaAggregate, Refusal, fixed_id

#: "By default it does this at most once every 20 minutes."
DEFAULT_OUTREACH_MINUTES = 20
#: The most ``outreach_minutes`` may be set to: a week.
MAX_OUTREACH_MINUTES = 7 * 24 * 60
#: An agent is sent looking only after it has been idle this long: the scheduler's passes
#: (``commands.scheduler.INTERVAL_S``) and the agents it works with get their turn first, and it is
#: half the default ``idle_sleep_min`` (10), so an idle agent goes looking before it falls asleep.
IDLE_BEFORE_OUTREACH_S = 5 * 60
#: The tiers that go looking: workers. The orchestrator works from the owner's own chat.
OUTREACH_TIERS = ("worker",)
#: How many of its contacts, and of the agents it has not met, the item names.
CONTACTS_NAMED_MAX = 5
STRANGERS_NAMED_MAX = 5


def goes_looking(role: str) -> bool:
    """Rule 6: only a worker's tier goes looking."""
    return tier_of(role) in OUTREACH_TIERS


def outreach_id(cid: int) -> uuid.UUID:
    return fixed_id(f"outreach:{cid}")


def check_minutes(value: Any) -> int:
    if type(value) is not int or not 0 <= value <= MAX_OUTREACH_MINUTES:
        raise Refusal("invalid_value", f"society.outreach_minutes is whole minutes from 0 to {MAX_OUTREACH_MINUTES:,} "
                                       "(0 turns outreach off)")
    return value


def due(last_at: dt.datetime | None, now: dt.datetime, minutes: int) -> bool:
    """Outreach is on and the last one (if any) was ``minutes`` ago or more."""
    return minutes > 0 and (last_at is None or now - last_at >= dt.timedelta(minutes=minutes))


def idle_long_enough(idle_since: dt.datetime, now: dt.datetime) -> bool:
    return now - idle_since >= dt.timedelta(seconds=IDLE_BEFORE_OUTREACH_S)


def check_outreach(agent: Any, last_at: dt.datetime | None, idle_since: dt.datetime, now: dt.datetime,
                   minutes: int) -> None:
    """Rules 1 to 6 above on the agent as stored (``domain.agents.Agent``)."""
    if minutes == 0:
        raise Refusal("outreach_off", "outreach is off (society.outreach_minutes is 0)")
    if agent.run != "running" or agent.status != "idle":
        raise Refusal("agent_not_idle", f"agent {agent.cid} is {agent.status}: only an idle agent goes looking "
                                        "(a sleeping one is never woken for it)")
    if agent.working is not None or agent.queue:
        raise Refusal("agent_busy", f"agent {agent.cid} has work to do")
    if not goes_looking(agent.role):
        raise Refusal("agent_not_idle", f"agent {agent.cid} is the {agent.role}: it works from the owner's goals")
    if not idle_long_enough(idle_since, now):
        raise Refusal("not_idle_long_enough", f"agent {agent.cid} has been idle less than {IDLE_BEFORE_OUTREACH_S} s")
    if not due(last_at, now, minutes):
        raise Refusal("outreach_not_due", f"agent {agent.cid} went looking less than {minutes} minutes ago")


class Outreach(PlazaAggregate):
    family = "society"

    class Created(PlazaAggregate.Created):
        cid: int

    class Sent(PlazaAggregate.Event):
        """The hub sent the agent looking for people to work with: the work item ``item``."""
        item: str
        minutes: int

        def apply(self, o: Outreach) -> None:
            o.last_at = self.timestamp
            o.count += 1

    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.last_at: dt.datetime | None = None
        self.count = 0

    @classmethod
    def open(cls, ctx: Context, cid: int) -> Outreach:
        return cls.start(ctx, id=outreach_id(cid), cid=cid)

    def sent(self, ctx: Context, item: str, minutes: int) -> None:
        self.record(self.Sent, ctx, item=item, minutes=minutes)


def outreach_text(contacts: list[dict], strangers: list[dict], new_posts: int | None) -> str:
    """The work item: what the agent is asked to do, with who it knows and who it has not met yet.
    ``contacts``: {cid, name, role, strength}; ``strangers``: {cid, name, role}."""
    lines = ["You have nothing to do right now. Go looking for people to work with."]
    if contacts:
        lines.append("Your contacts, strongest first: " + "; ".join(
            f"{c['name']} (agent {c['cid']}, {c['role']}, strength {c['strength']:.2f})" for c in contacts) + ".")
    else:
        lines.append("You have no contacts yet.")
    if strangers:
        lines.append("Agents you have not worked or talked with: " + "; ".join(
            f"{s['name']} (agent {s['cid']}, {s['role']})" for s in strangers) + ".")
    if new_posts:
        lines.append(f"The board has {new_posts} post{'s' if new_posts != 1 else ''} you have not read.")
    lines.append("Read the board (plaza_board_read) and the open tasks (plaza_task_list); bid on a call that fits "
                 "(plaza_bid), message an agent you could help or who could help you (plaza_message), or hire a "
                 "contact for work you do not want to do yourself (plaza_hire). If nothing fits, answer briefly "
                 "and stop: you will be asked again later.")
    return "\n".join(lines)
