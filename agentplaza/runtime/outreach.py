"""Outreach in the runtime: each reconcile pass sends the idle agents with nothing to do looking for
people to work with (``domain.outreach``), at most once every ``society.outreach_minutes``.

The pass plans on the read models (the agents' rows, the last outreach of each, the settings) and
each outreach re-checks on the stored state in its own commit (``commands.outreach``), so a hub
restarted a moment later, or a second hub on the same store, sends nobody twice in one interval.
Nothing is sent while the plaza is held (STOP ALL). An asleep or offline agent is skipped: outreach
never wakes an agent on its own.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..commands import outreach as outreach_commands
from ..domain import outreach as o
from ..projections import board as board_rm
from ..projections import hiring as hiring_rm
from ..projections import society as society_rm
from ..projections.agents import agents_table
from ..projections.outreach import last_outreach


def _when(at: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(at) if at else None


def candidates(rows: list[dict], last: dict[int, str], now: dt.datetime, minutes: int) -> list[dict]:
    """The agents the read models show idle long enough, awake, of a tier that goes looking, and due."""
    out = []
    for r in rows:
        if r["run"] != "running" or r["status"] != "idle" or r["queue"]:
            continue
        if not o.goes_looking(r["role"]):
            continue
        if not o.idle_long_enough(dt.datetime.fromisoformat(r["changed_at"]), now):
            continue
        if o.due(_when(last.get(r["cid"])), now, minutes):
            out.append(r)
    return out


def item_for(rt: Any, r: dict, bonds: list[dict], roster: list[dict]) -> str:
    """The outreach's words for agent ``r``: its strongest contacts, agents it has not met, unread posts."""
    cid = r["cid"]
    by_cid = {a["cid"]: a for a in roster}
    contacts = []
    for b in bonds:  # strongest first
        other = b["b"] if b["a"] == cid else b["a"] if b["b"] == cid else None
        if other is None or other not in by_cid or len(contacts) >= o.CONTACTS_NAMED_MAX:
            continue
        a = by_cid[other]
        contacts.append({"cid": other, "name": a["name"] or f"agent {other}", "role": a["role"],
                         "strength": b["strength"]})
    known = {c["cid"] for c in contacts} | {b["a"] for b in bonds if b["b"] == cid} | {b["b"] for b in bonds
                                                                                       if b["a"] == cid}
    strangers = [{"cid": a["cid"], "name": a["name"] or f"agent {a['cid']}", "role": a["role"]}
                 for a in roster if a["cid"] != cid and a["cid"] not in known and a["run"] == "running"
                 and o.goes_looking(a["role"])][:o.STRANGERS_NAMED_MAX]
    unread = len(board_rm.post_rows(rt.hub.read_models, after=board_rm.marker_of(rt.hub.read_models, cid),
                                    limit=100))
    return o.outreach_text(contacts, strangers, unread)


def reach_out(rt: Any) -> list[int]:
    """One pass: the CIDs sent looking now."""
    if rt.held():
        return []
    rm = rt.hub.read_models
    minutes = hiring_rm.settings_view(rm)["society"]["outreach_minutes"]
    if not minutes:
        return []
    now = rt.cmds.context("hub").at
    roster = sorted(rm.rows(agents_table), key=lambda a: a["cid"])
    due = [r for r in candidates(roster, last_outreach(rm), now, minutes) if rt.awake_because(r) is None]
    if not due:
        return []
    bonds = society_rm.bond_rows(rm, now)  # one fold of the society for the whole pass
    sent = []
    for r in due:
        ctx = rt.cmds.context("hub", f"idle with nothing to do (outreach every {minutes} minutes)")
        if rt._safely(outreach_commands.reach_out, ctx, r["cid"], item_for(rt, r, bonds, roster)) is not None:
            sent.append(r["cid"])
            rt.work_for(r["cid"])
    return sent
