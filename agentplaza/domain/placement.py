"""Where a new agent goes: the guide's placement rule, as a pure function of what each node is now.

The guide, "Placement and moves": "A new agent goes to the node with the highest score. Only a node
with room for one more agent is eligible. A node that is draining, revoked or offline is never chosen.
If no node is eligible, the agent goes to n0, where noded says whether it fits."  And "Warm templates":
"The scheduler favours a node that already holds the template for an agent's role. It adds the
equivalent of 1024 MiB to that node's score, and subtracts 512 MiB for each agent the node already runs."

So a node's score is in MiB: the memory it has free, plus ``WARM_BONUS_MIB`` when it holds a warm
template of the agent's shape, minus ``PER_AGENT_MIB`` for each agent it runs.  "Room for one more
agent" is a free CID and the agent's memory free.  Ties go to the node named first (n0, then n1 ...),
so the same facts always give the same answer.

The rules, in the order ``place`` applies them: drop the revoked, draining and offline nodes; drop those
without room; the highest score wins; none left: n0.
"""

from __future__ import annotations

from dataclasses import dataclass

from .agents import LOCAL_NODE

#: "It adds the equivalent of 1024 MiB to that node's score ..."
WARM_BONUS_MIB = 1024
#: "... and subtracts 512 MiB for each agent the node already runs."
PER_AGENT_MIB = 512


@dataclass(frozen=True)
class Candidate:
    """One node as placement sees it: its live facts and its standing in the registry."""

    name: str
    free_mib: int          # memory the machine has free (its daemon's report)
    agents: int            # agents placed on it now
    free_cids: int         # CIDs of its range not given out
    online: bool = True
    draining: bool = False
    revoked: bool = False
    warm: bool = False     # it holds a warm template of the agent's shape


def has_room(c: Candidate, memory_mib: int) -> bool:
    """Room for one more agent: a free CID, and the agent's memory free."""
    return c.free_cids >= 1 and c.free_mib >= memory_mib


def eligible(c: Candidate, memory_mib: int) -> bool:
    return c.online and not c.draining and not c.revoked and has_room(c, memory_mib)


def score(c: Candidate) -> int:
    """The node's score in MiB (higher is better)."""
    return c.free_mib + (WARM_BONUS_MIB if c.warm else 0) - PER_AGENT_MIB * c.agents


def _order(name: str) -> int:
    return int(name[1:]) if name[1:].isdigit() else 1 << 30


def place(candidates: list[Candidate], memory_mib: int) -> str:
    """The node a new agent of ``memory_mib`` goes to (n0 when no node is eligible)."""
    best = [c for c in candidates if eligible(c, memory_mib)]
    if not best:
        return LOCAL_NODE
    return max(best, key=lambda c: (score(c), -_order(c.name))).name
