"""Read models of the laws: the Rules screen's counts, the infractions list and the recent calls.

- ``rm_law_counts``: per law, how many calls it refused (as the forbidding law), how many acts it
  recorded (detective and judgment laws), and when it last did.
- ``rm_rule_totals``: one row of plaza-wide figures (decided, allowed, refused, held, default
  denials, violations); its ``calls`` is the sequence number the recent-calls ring turns on.
- ``rm_infractions``: one row per violation (a forbid matched), newest first by position.
- ``rm_recent_calls``: a ring of the last 500 decisions (slot = sequence mod 500), which
  ``rules check`` replays against a changed law set.

Every handler is O(1) per event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

#: Decisions the recent-calls ring keeps: the window ``rules check`` replays (jhrl.CHECK_WINDOW).
RECENT_CALLS = 500

law_counts = sa.Table(
    "rm_law_counts",
    metadata,
    sa.Column("law_id", sa.String(100), primary_key=True),
    sa.Column("refused", sa.BigInteger, nullable=False),
    sa.Column("recorded", sa.BigInteger, nullable=False),
    sa.Column("last_at", sa.String(40), nullable=False),
)

rule_totals = sa.Table(
    "rm_rule_totals",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("allowed", sa.BigInteger, nullable=False),
    sa.Column("refused", sa.BigInteger, nullable=False),
    sa.Column("held", sa.BigInteger, nullable=False),
    sa.Column("default_deny", sa.BigInteger, nullable=False),
    sa.Column("violations", sa.BigInteger, nullable=False),
)

infractions = append_only(sa.Table(
    "rm_infractions",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("role", sa.String(64), nullable=False),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("law_id", sa.String(100), nullable=False),
    sa.Column("severity", sa.String(16)),
    sa.Column("enforcement", sa.String(16)),
    sa.Column("decision", sa.String(8), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
))

recent_calls = sa.Table(
    "rm_recent_calls",
    metadata,
    sa.Column("slot", sa.Integer, primary_key=True),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("call_id", sa.String(32), nullable=False),
    sa.Column("agent", sa.String(128), nullable=False),
    sa.Column("role", sa.String(64), nullable=False),
    sa.Column("tier", sa.String(16), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("risk", sa.String(16), nullable=False),
    sa.Column("args", sa.JSON, nullable=False),
    sa.Column("approved", sa.Boolean, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("decision", sa.String(8), nullable=False),
    sa.Column("why", sa.String(32), nullable=False),
    sa.Column("forbidding", sa.String(100)),
    sa.Column("violation", sa.Boolean, nullable=False),
)

TOTALS_ID = "all"
_EMPTY_TOTALS = {"id": TOTALS_ID, "calls": 0, "allowed": 0, "refused": 0, "held": 0, "default_deny": 0, "violations": 0}


#: The count in ``rm_rule_totals`` each decision adds to.
_TOTAL_OF_DECISION = {"allow": "allowed", "deny": "refused", "ask": "held"}


class LawsProjection(Projection):
    name = "laws"
    version = 1
    tables = (law_counts, rule_totals, infractions, recent_calls)

    def _count(self, rows: Rows, law_id: str, at: str, field: str) -> None:
        row = dict(rows.get("rm_law_counts", law_id) or {"law_id": law_id, "refused": 0, "recorded": 0})
        row[field] += 1
        row["last_at"] = at
        rows.put("rm_law_counts", row)

    def on_ToolCall_CallDecided(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        totals = dict(rows.get("rm_rule_totals", TOTALS_ID) or _EMPTY_TOTALS)
        seq = totals["calls"]
        totals["calls"] = seq + 1
        totals[_TOTAL_OF_DECISION[d["decision"]]] += 1
        totals["default_deny"] += d["why"] == "default_deny"
        totals["violations"] += bool(d["violation"])
        rows.put("rm_rule_totals", totals)
        if d.get("forbidding"):
            self._count(rows, d["forbidding"], e.at, "refused")
        for law_id in d.get("recorded") or ():
            self._count(rows, law_id, e.at, "recorded")
        if d["violation"]:
            rows.put("rm_infractions", {
                "position": e.position, "at": e.at, "agent": d["agent"], "role": d["role"], "tool": d["tool"],
                "law_id": d.get("forbidding") or (d.get("recorded") or ["?"])[0], "severity": d.get("severity"),
                "enforcement": d.get("enforcement"), "decision": d["decision"], "digest": d["digest"],
            })
        rows.put("rm_recent_calls", {
            "slot": seq % RECENT_CALLS, "position": e.position, "at": e.at, "call_id": e.originator_id,
            "agent": d["agent"], "role": d["role"], "tier": d["tier"], "mode": d["mode"], "tool": d["tool"],
            "risk": d["risk"], "args": dict(d.get("args") or {}), "approved": bool(d.get("approved")),
            "digest": d["digest"], "decision": d["decision"], "why": d["why"], "forbidding": d.get("forbidding"),
            "violation": bool(d["violation"]),
        })


# -- the queries of the Rules screens ---------------------------------------------------------------------


def counts_by_law(read_models: ReadModels) -> dict[str, dict]:
    return {r["law_id"]: r for r in read_models.rows(law_counts)}


def totals(read_models: ReadModels) -> dict:
    """The plaza-wide figures: calls decided, allowed, refused, held, default denials, violations."""
    rows = read_models.rows(rule_totals)
    t = dict(rows[0]) if rows else {"calls": 0, "allowed": 0, "refused": 0, "held": 0, "default_deny": 0,
                                    "violations": 0}
    t.pop("id", None)
    return t


def infraction_rows(read_models: ReadModels, limit: int) -> list[dict]:
    """The latest violations, newest first."""
    return read_models.rows(infractions, order_by=sa.desc(infractions.c.position), limit=limit)


def recent(read_models: ReadModels) -> list[dict]:
    """The last 500 recorded decisions, oldest first."""
    return read_models.rows(recent_calls, order_by=recent_calls.c.position)
