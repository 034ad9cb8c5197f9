"""The society's commands: the interactions other areas record in their own commits, an agent's
rating of a contact, and the owner's "Trust more" / "Trust less".

``interacted_in`` and ``worked_in`` take the caller's unit: a message (``commands.conversations``)
and a review's verdict (``commands.tasks.review``) are one commit with the interaction they make.
"""

from __future__ import annotations

from ..domain.base import Context, Refusal
from ..domain.society import SOCIETY_ID, Bond, Society, bond_id
from .agents import agent_in
from .unit import Commands, Done, Unit


def _bond_in(unit: Unit, ctx: Context, a: int, b: int) -> Bond:
    return unit.get(bond_id(a, b)) or Bond.open(ctx, a, b)


def interacted_in(unit: Unit, ctx: Context, a: int, b: int, ref: str, kind: str = "message") -> None:
    if a == b:
        return
    bond = _bond_in(unit, ctx, a, b)
    bond.interacted(ctx, ref, kind)
    unit.add(bond)


def worked_in(unit: Unit, ctx: Context, number: str, worker: str | None, reviewer: str, passed: bool) -> None:
    """A review's verdict: the worker and the reviewer dealt with each other over task ``number``.
    A party that is not one of the plaza's agents (a CID that is no number) makes no bond."""
    if worker is None or not worker.isdigit() or not reviewer.isdigit() or worker == reviewer:
        return
    bond = _bond_in(unit, ctx, int(worker), int(reviewer))
    bond.interacted(ctx, number, "work", worker=int(worker), passed=passed)
    unit.add(bond)


def rate(cmds: Commands, ctx: Context, rater: int, ratee: int, score: str, ref: str | None = None) -> Done[dict]:
    """An agent rates a contact for one interaction of the last 30 days (``domain.society``)."""
    def decide(unit: Unit) -> dict:
        bond = unit.get(bond_id(rater, ratee))
        if bond is None:
            raise Refusal("nothing_to_rate", f"agent {rater} has not dealt with agent {ratee}; rate a contact "
                                             "after working or talking with it")
        out = bond.rate(ctx, rater, ratee, score, ref)
        unit.add(bond)
        return out

    return cmds.run(decide)


def owner_rates(cmds: Commands, ctx: Context, cid: int, up: bool) -> Done[dict]:
    """The owner's Trust more (``up``) or Trust less of an agent: no shared work needed."""
    def decide(unit: Unit) -> dict:
        agent_in(unit, cid)._alive()
        s = unit.get(SOCIETY_ID) or Society.open(ctx)
        s.owner_rates(ctx, cid, up)
        unit.add(s)
        return {"cid": cid, "trust": "more" if up else "less"}

    return cmds.run(decide)
