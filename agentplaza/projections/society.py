"""The society's read model: every fact contacts, opinions and reputation are computed from, and the
queries the Society screen and ``agentplaza society`` read.

- ``rm_society_facts`` (append-only): each interaction (a message, a reviewed task), each rating
  (with whether it counts: ring damping keeps a rating that does not), each of the owner's ratings.
- ``rm_society_bonds``: which bond is which pair of agents (an interaction names only its bond).

The facts are folded as they are; the weights that fade with time are applied when a query asks,
at the time it gives (``domain.reputation``): the hub's clock live, the replay's time in a replay.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from ..domain import reputation as rep
from ..domain.society import SCORES
from ..events.records import EventRecord
from .agents import agents_table
from .framework import Projection, Rows, append_only, metadata

facts = append_only(sa.Table(
    "rm_society_facts", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # message, work, rating, owner
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("a", sa.BigInteger, index=True),  # message: one party; work: the worker; rating: the rater
    sa.Column("b", sa.BigInteger, nullable=False, index=True),  # the other; the reviewer; the rated; the owner's
    sa.Column("ref", sa.String(120)),
    sa.Column("score", sa.String(8)),
    sa.Column("passed", sa.Boolean),  # work: passed; owner: Trust more
    sa.Column("counts", sa.Boolean, nullable=False),
))

bonds = sa.Table(
    "rm_society_bonds", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("a", sa.BigInteger, nullable=False),
    sa.Column("b", sa.BigInteger, nullable=False),
)


class SocietyProjection(Projection):
    name = "society"
    version = 1
    tables = (facts, bonds)

    def _fact(self, e: EventRecord, rows: Rows, **row) -> None:
        rows.put("rm_society_facts", {"position": e.position, "at": e.at, "ref": None, "score": None,
                                      "passed": None, "counts": True, **row})

    def on_Bond_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_society_bonds", {"id": e.originator_id, "a": e.data["a"], "b": e.data["b"]})

    def on_Bond_Interacted(self, e: EventRecord, rows: Rows) -> None:
        d, bond = e.data, rows.get("rm_society_bonds", e.originator_id)
        if bond is None:
            return
        if d["via"] == "work":
            worker = d["worker"]
            reviewer = bond["b"] if worker == bond["a"] else bond["a"]
            self._fact(e, rows, kind="work", a=worker, b=reviewer, ref=d["ref"], passed=d["passed"])
        else:
            self._fact(e, rows, kind="message", a=bond["a"], b=bond["b"], ref=d["ref"])

    def on_Bond_Rated(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._fact(e, rows, kind="rating", a=d["rater"], b=d["ratee"], ref=d["ref"], score=d["score"],
                   counts=d["counts"])

    def on_Society_OwnerRated(self, e: EventRecord, rows: Rows) -> None:
        self._fact(e, rows, kind="owner", a=None, b=e.data["cid"], passed=e.data["up"])


# -- queries --------------------------------------------------------------------------------------------

def _when(at: str) -> dt.datetime:
    return dt.datetime.fromisoformat(at)


def fact_of(row: dict) -> rep.Fact:
    value = SCORES[row["score"]] if row["kind"] == "rating" else 0.0
    return rep.Fact(row["kind"], _when(row["at"]), row["a"], row["b"], value, row["passed"])


def facts_of(rows: list[dict], now: dt.datetime) -> list[rep.Fact]:
    """The facts of these rows up to ``now`` that count (a damped rating is kept, and does not)."""
    ordered = sorted((r for r in rows if r["counts"]), key=lambda r: r["position"])
    return [f for f in map(fact_of, ordered) if f.at <= now]


def all_facts(read_models, now: dt.datetime) -> list[rep.Fact]:
    return facts_of(read_models.rows(facts, facts.c.counts.is_(True)), now)


def reputation_rows(read_models, now: dt.datetime) -> list[dict]:
    """Every agent with its reputation now: a score 0-100 or "unrated", and the weighed evidence."""
    return reputation_from(read_models.rows(facts), read_models.rows(agents_table), now)


def reputation_from(fact_rows: list[dict], roster: list[dict], now: dt.datetime) -> list[dict]:
    """The same from rows as given (a replay's, or the live tables'), by CID."""
    roster = sorted(roster, key=lambda r: r["cid"])
    scores = rep.reputation(facts_of(fact_rows, now), now, [r["cid"] for r in roster])
    out = []
    for r in roster:
        s = scores.get(r["cid"], {"score": None, "evidence": 0.0})
        out.append({"cid": r["cid"], "name": r["name"], "role": r["role"],
                    "reputation": s["score"] if s["score"] is not None else rep.UNRATED, "evidence": s["evidence"]})
    return out


def bond_rows(read_models, now: dt.datetime, cid: int | None = None) -> list[dict]:
    """The contacts (bonds) between agents, strongest first: strength now, interactions, the last one."""
    found = rep.contacts(all_facts(read_models, now), now)
    rows = [{"a": a, "b": b, "strength": c["strength"], "interactions": c["interactions"],
             "last": c["last"].isoformat()} for (a, b), c in found.items() if cid is None or cid in (a, b)]
    return sorted(rows, key=lambda r: (-r["strength"], r["a"], r["b"]))


def opinion_rows(read_models, now: dt.datetime, cid: int | None = None) -> list[dict]:
    return [o for o in rep.opinion_rows(all_facts(read_models, now), now) if cid is None or cid in (o["of"], o["by"])]


def rating_rows(read_models, cid: int | None, limit: int) -> list[dict]:
    """The ratings, the latest first: agents' (with whether each counts) and the owner's."""
    f = facts.c
    where = [f.kind.in_(("rating", "owner"))]
    if cid is not None:
        where.append(sa.or_(f.a == cid, f.b == cid))
    rows = read_models.rows(facts, *where, order_by=sa.desc(f.position), limit=limit)
    return [{"at": r["at"], "by": "owner" if r["kind"] == "owner" else r["a"], "of": r["b"],
             "rating": r["score"] if r["kind"] == "rating" else ("trust more" if r["passed"] else "trust less"),
             "for": r["ref"], "counts": r["counts"]} for r in rows]
