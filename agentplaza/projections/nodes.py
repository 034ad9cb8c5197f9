"""Join codes and the nodes that joined with one (``domain.nodes``), and the owner token's rotations.

A code's row holds its id, label, times, state and failures, never its secret nor the secret's hash
(the store's events keep the hash; nothing a screen shows needs it).  Whether an open code has expired
is read at query time against the clock.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.nodes import ENDED, OPEN, REVOKED, USED
from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

#: A code that is open but past its time reads as this state.
EXPIRED = "expired"

join_codes = sa.Table(
    "rm_join_codes", metadata,
    sa.Column("aggregate", sa.String(36), primary_key=True),  # the JoinCode's id, as its events name it
    sa.Column("id", sa.String(12), nullable=False, unique=True),  # the code's own short id
    sa.Column("label", sa.String(40), nullable=False),
    sa.Column("made_at", sa.String(40), nullable=False),
    sa.Column("expires_at", sa.String(40), nullable=False),
    sa.Column("state", sa.String(8), nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),
    sa.Column("node", sa.String(16)),
    sa.Column("closed_at", sa.String(40)),
    sa.Column("hub", sa.Text, nullable=False),
)
joined_nodes = sa.Table(
    "rm_joined_nodes", metadata,
    sa.Column("name", sa.String(16), primary_key=True),
    sa.Column("label", sa.String(40), nullable=False),
    sa.Column("cid_first", sa.Integer, nullable=False),
    sa.Column("cid_last", sa.Integer, nullable=False),
    sa.Column("public_key", sa.String(43), nullable=False),
    sa.Column("joined_at", sa.String(40), nullable=False),
    sa.Column("code", sa.String(12), nullable=False),
    sa.Column("draining", sa.Boolean, nullable=False, default=False),
    sa.Column("revoked_at", sa.String(40)),
)
owner_token = sa.Table(
    "rm_owner_token", metadata,
    sa.Column("key", sa.String(8), primary_key=True),
    sa.Column("rotations", sa.Integer, nullable=False),
    sa.Column("rotated_at", sa.String(40)),
    sa.Column("rotated_by", sa.String(80)),
)
OWNER_TOKEN_KEY = "owner"


class NodesProjection(Projection):
    name = "nodes"
    version = 2
    tables = (join_codes, joined_nodes, owner_token)

    def on_JoinCode_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_join_codes", {"aggregate": e.originator_id, "id": d["code_id"], "label": d["label"],
                                   "made_at": e.at, "expires_at": d["expires_at"], "state": OPEN, "failures": 0,
                                   "node": None, "closed_at": None, "hub": d["hub_url"]})

    def on_JoinCode_RedemptionFailed(self, e: EventRecord, rows: Rows) -> None:
        self._code(e, rows, lambda r: {"failures": r["failures"] + 1})

    def on_JoinCode_Redeemed(self, e: EventRecord, rows: Rows) -> None:
        self._code(e, rows, lambda r: {"state": USED, "node": e.data["node"], "closed_at": e.at})

    def on_JoinCode_Revoked(self, e: EventRecord, rows: Rows) -> None:
        self._code(e, rows, lambda r: {"state": REVOKED, "closed_at": e.at})

    def on_JoinCode_Ended(self, e: EventRecord, rows: Rows) -> None:
        self._code(e, rows, lambda r: {"state": ENDED, "closed_at": e.at})

    def _code(self, e: EventRecord, rows: Rows, change) -> None:
        row = rows.get("rm_join_codes", e.originator_id)
        if row is None:
            return
        rows.put("rm_join_codes", {**row, **change(row)})

    def on_NodeRegistry_NodeJoined(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_joined_nodes", {"name": d["name"], "label": d["label"], "cid_first": d["cid_first"],
                                     "cid_last": d["cid_last"], "public_key": d["public_key"], "joined_at": e.at,
                                     "code": d["code_id"], "draining": False, "revoked_at": None})

    def on_NodeRegistry_NodeDrained(self, e: EventRecord, rows: Rows) -> None:
        self._node(e, rows, {"draining": True})

    def on_NodeRegistry_NodeUndrained(self, e: EventRecord, rows: Rows) -> None:
        self._node(e, rows, {"draining": False})

    def on_NodeRegistry_NodeRevoked(self, e: EventRecord, rows: Rows) -> None:
        self._node(e, rows, {"draining": False, "revoked_at": e.at})

    def _node(self, e: EventRecord, rows: Rows, change: dict) -> None:
        row = rows.get("rm_joined_nodes", e.data["name"])
        if row is not None:
            rows.put("rm_joined_nodes", {**row, **change})

    def on_OwnerToken_Rotated(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_owner_token", OWNER_TOKEN_KEY) or {"key": OWNER_TOKEN_KEY, "rotations": 0}
        rows.put("rm_owner_token", {**row, "rotations": row["rotations"] + 1, "rotated_at": e.at,
                                    "rotated_by": e.actor})


# -- Queries ---------------------------------------------------------------------------------------------


def codes(read_models: ReadModels, now: dt.datetime) -> list[dict]:
    """Every join code, newest first; an open code past its time shows as expired."""
    out = []
    for r in read_models.rows(join_codes, order_by=join_codes.c.made_at.desc()):
        state = EXPIRED if r["state"] == OPEN and now >= dt.datetime.fromisoformat(r["expires_at"]) else r["state"]
        out.append({k: v for k, v in r.items() if k != "aggregate"} | {"state": state})
    return out


def joined(read_models: ReadModels) -> list[dict]:
    """The nodes that joined, in the order they joined."""
    return read_models.rows(joined_nodes, order_by=joined_nodes.c.cid_first)


def rotations(read_models: ReadModels) -> dict:
    found = read_models.rows(owner_token)
    return found[0] if found else {"key": OWNER_TOKEN_KEY, "rotations": 0, "rotated_at": None, "rotated_by": None}
