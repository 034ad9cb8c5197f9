"""Read models of the agents: the roster (one row per agent) and the transcripts' egress entries.  A transcript
itself is read from its stream in the log (``transcript``).

The roster's ``permission_mode`` is the agent's conduct's (``domain.conduct``, the mode's one home):
``rm_agent_modes`` follows every conduct's mode, and a new agent's row starts with its CID's.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..domain.agents import transcript_id
from ..domain.base import Refusal
from ..domain.conduct import DEFAULT_MODE, conduct_id
from ..domain.models import resolve
from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, metadata
from .work import conduct_view

if TYPE_CHECKING:
    from .runner import ReadModels

agents_table = sa.Table(
    "rm_agents",
    metadata,
    sa.Column("cid", sa.Integer, primary_key=True),
    sa.Column("agent_id", sa.String(36), nullable=False),
    sa.Column("name", sa.String(80)),
    sa.Column("role", sa.String(40), nullable=False),
    sa.Column("node", sa.String(40), nullable=False),
    sa.Column("status", sa.String(10), nullable=False),
    sa.Column("run", sa.String(10), nullable=False),
    sa.Column("model", sa.String(200)),
    sa.Column("permission_mode", sa.String(12), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("wipes", sa.Integer, nullable=False),
    sa.Column("queue", sa.Integer, nullable=False),
    sa.Column("working_on", sa.String(40)),
    sa.Column("entries", sa.Integer, nullable=False),
    sa.Column("forked_from", sa.Integer),
    sa.Column("fork_checkpoint", sa.String(40)),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("changed_at", sa.String(40), nullable=False),
    sa.Column("species", sa.String(16)),  # its robot on the floor (Floor.Dealt); None before it was dealt one
)

#: A transcript is read from its own stream in the log (``transcript``: O(page) by the stream's key), not copied
#: into a table: its entries were the largest read-model table, some 0.2 of a rebuild's rows.  The egress audit
#: reads every agent's ``egress`` entries, newest first, so those are kept here, one row each.
egress_table = append_only(sa.Table(
    "rm_egress",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("cid", sa.Integer, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("verdict", sa.String(20)),  # one of EGRESS_VERDICTS, else None
    sa.Column("text", sa.Text),
    sa.Column("detail", sa.JSON, nullable=False),
    sa.Index("ix_rm_egress_cid_position", "cid", "position"),
    sa.Index("ix_rm_egress_verdict_position", "verdict", "position"),
))

#: Which agent (and CID) an agent or transcript aggregate belongs to: O(1) lookups in the folds.
agent_index = sa.Table(
    "rm_agent_index",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("agent_id", sa.String(36), nullable=False),
    sa.Column("cid", sa.Integer, nullable=False),
)

#: Each conduct's permission mode, by the conduct's id (a conduct is one CID's, and outlives a deleted agent).
agent_modes = sa.Table(
    "rm_agent_modes",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.String(64), nullable=False),
    sa.Column("mode", sa.String(12), nullable=False),
)


#: The species each CID was dealt (``domain.floor``), kept apart from the roster's rows so a deal folded
#: before its agent's row (two spawns in one commit) is not lost.
agent_species = sa.Table(
    "rm_agent_species",
    metadata,
    sa.Column("cid", sa.Integer, primary_key=True),
    sa.Column("species", sa.String(16), nullable=False),
)


class AgentsProjection(Projection):
    """The roster, keyed by CID (a deleted agent's row goes; its CID may name a new agent later)."""

    name = "agents"
    version = 4  # 2: forks; 3: the mode is the conduct's; 4: species on the floor
    tables = (agents_table, agent_index, agent_modes, agent_species)

    def _row(self, e: EventRecord, rows: Rows) -> dict | None:
        idx = rows.get("rm_agent_index", e.originator_id)
        if idx is None:
            return None
        row = rows.get("rm_agents", idx["cid"])
        if row is None or row["agent_id"] != idx["agent_id"]:
            return None
        return dict(row, changed_at=e.at)

    @staticmethod
    def _put(rows: Rows, row: dict | None, **changes) -> None:
        if row is not None:
            row.update(changes)
            rows.put("rm_agents", row)

    def on_Agent_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_agent_index", {"id": e.originator_id, "agent_id": e.originator_id, "cid": d["cid"]})
        conduct = rows.get("rm_agent_modes", conduct_id(str(d["cid"])).hex)
        rows.put("rm_agents", {
            "cid": d["cid"], "agent_id": e.originator_id, "name": None, "role": d["role"], "node": d["node"],
            "status": "offline", "run": "running", "model": d["model"],
            "permission_mode": conduct["mode"] if conduct is not None else DEFAULT_MODE,
            "generation": 0, "wipes": 0, "queue": 0, "working_on": None, "entries": 0,
            "forked_from": d.get("forked_from"), "fork_checkpoint": d.get("fork_checkpoint"), "created_at": e.at, "changed_at": e.at,
            "species": (rows.get("rm_agent_species", d["cid"]) or {}).get("species"),
        })

    def on_Floor_Dealt(self, e: EventRecord, rows: Rows) -> None:
        """The species changes the look only: the row's ``changed_at`` (how long it has been idle) stays."""
        cid, species = e.data["cid"], e.data["species"]
        rows.put("rm_agent_species", {"cid": cid, "species": species})
        row = rows.get("rm_agents", cid)
        if row is not None:
            rows.put("rm_agents", dict(row, species=species))

    def on_Transcript_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_agent_index", {"id": e.originator_id, "agent_id": e.data["agent_id"], "cid": e.data["cid"]})

    def on_Transcript_Entry(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), entries=e.data["seq"])

    def on_Agent_Named(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), name=e.data["name"])

    on_Agent_Renamed = on_Agent_Named

    def on_Agent_ModelSet(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), model=e.data["model"])

    def on_Conduct_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_agent_modes", {"id": e.originator_id, "cid": e.data["cid"], "mode": DEFAULT_MODE})

    def on_Conduct_ModeSet(self, e: EventRecord, rows: Rows) -> None:
        """(An old ``Agent.ModeSet`` always came with this one, in the same commit: it is not folded.)"""
        conduct = rows.get("rm_agent_modes", e.originator_id)
        if conduct is None:
            return
        rows.put("rm_agent_modes", dict(conduct, mode=e.data["mode"]))
        if conduct["cid"].isascii() and conduct["cid"].isdigit():  # an agent's CID (a conduct may also be kept for another id)
            row = rows.get("rm_agents", int(conduct["cid"]))
            self._put(rows, dict(row, changed_at=e.at) if row is not None else None, permission_mode=e.data["mode"])

    def on_Agent_Connected(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            self._put(rows, row, status="working" if row["working_on"] else "idle")

    def on_Agent_Disconnected(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), status="offline")

    def on_Agent_Told(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            self._put(rows, row, queue=row["queue"] + 1)

    def on_Agent_WorkStarted(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            self._put(rows, row, queue=max(0, row["queue"] - 1), working_on=e.data["item"], status="working")

    def on_Agent_WorkWithdrawn(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            self._put(rows, row, queue=max(0, row["queue"] - 1))

    def on_Agent_WorkFinished(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            self._put(rows, row, working_on=None, status="idle" if row["status"] == "working" else row["status"])

    def on_Agent_Slept(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), status="asleep")

    def on_Agent_Woke(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), status="idle")

    def on_Agent_Moved(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), node=e.data["target"])

    def on_Agent_Stopped(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), run="stopped", status="offline", working_on=None)

    def on_Agent_Restarted(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), run="running", status="offline", working_on=None,
                  generation=e.data["generation"])

    def on_Agent_Wiped(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            self._put(rows, row, run="running", status="offline", working_on=None, queue=0,
                      generation=e.data["generation"], wipes=row["wipes"] + 1)

    def on_Agent_Retired(self, e: EventRecord, rows: Rows) -> None:
        self._put(rows, self._row(e, rows), run="retired", status="offline", working_on=None, queue=0)

    def on_Agent_Deleted(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is None:
            return
        rows.delete("rm_agents", row["cid"])


class TranscriptProjection(Projection):
    """The transcripts' egress entries, every agent's (each transcript itself is read from the log)."""

    name = "transcript"
    version = 3  # 2: the index by kind and position; 3: only the egress entries (the transcripts from the log)
    tables = (egress_table,)
    retired_tables = ("rm_transcript",)

    def on_Transcript_Entry(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        if d["kind"] != "egress":
            return
        detail = d["detail"]
        verdict = detail.get("verdict") if type(detail) is dict else None
        rows.put("rm_egress", {
            "position": e.position, "cid": d["cid"], "at": e.at,
            "verdict": verdict if verdict in EGRESS_VERDICTS else None, "text": d["text"], "detail": detail,
        })


# -- the queries of the agents' screens -------------------------------------------------------------------

#: Transcript entries the agent page shows.
PAGE_TRANSCRIPT = 50
#: Sanctions (the conduct log's latest) the agent page shows.
PAGE_SANCTIONS = 20
ROSTER_COLUMNS = ("cid", "name", "role", "status", "run", "model", "permission_mode", "node", "generation", "queue",
                  "working_on", "entries", "forked_from", "fork_checkpoint", "created_at", "changed_at")


def policy_of(read_models: ReadModels) -> dict | None:
    row = read_models.states["models"].rows.get("rm_model_policy", "policy")
    return row["policy"] if row else None


def agent_view(row: dict, policy: dict | None = None) -> dict:
    """``model`` is the agent's own (or None); ``resolved_model`` the one it thinks with, and
    ``model_source`` where that comes from: agent (set for it), role (its role's) or default."""
    view = {k: row[k] for k in ROSTER_COLUMNS}
    view["species"] = row.get("species")
    if policy is not None:
        r = resolve(policy, row["role"], row["model"])
        view["resolved_model"], view["model_source"] = r.model, r.source
    else:
        view["resolved_model"], view["model_source"] = row["model"], "agent" if row["model"] else "default"
    return view


def roster(read_models: ReadModels, role: str | None = None) -> list[dict]:
    where = [agents_table.c.role == role] if role else []
    policy = policy_of(read_models)
    return [agent_view(r, policy) for r in read_models.rows(agents_table, *where, order_by=agents_table.c.cid)]


def agent_row(read_models: ReadModels, cid: int) -> dict:
    rows = read_models.rows(agents_table, agents_table.c.cid == cid)
    if not rows:
        raise Refusal("unknown_agent", f"no agent with cid {cid}")
    return rows[0]


def agent_of(read_models: ReadModels, cid: int) -> dict:
    """One agent as the roster shows it."""
    return agent_view(agent_row(read_models, cid), policy_of(read_models))


#: The event of a transcript that is an entry (its first, version 1, opens it).
ENTRY_KIND = "Transcript.Entry"


def entry_view(rec: EventRecord) -> dict:
    """A transcript entry as the agent page, the CLI and the MCP tools show it."""
    d = rec.data
    return {"seq": d["seq"], "at": rec.at, "actor": rec.actor, "kind": d["kind"], "tool": d["tool"],
            "text": d["text"], "detail": d["detail"]}


def transcript(read_models: ReadModels, cid: int, after: int = 0, limit: int = PAGE_TRANSCRIPT,
               tail: bool = False) -> list[dict]:
    """A page of an agent's transcript (``entries``), up to where its read model is, as when its entries were that
    read model's rows: the read models fold every event together, so an editor shown a tool call waiting for
    approval finds the approval in the queue."""
    row = agent_row(read_models, cid)
    return entries(read_models.store, transcript_id(uuid.UUID(hex=row["agent_id"])), after, limit, tail,
                   upto=read_models.position_of(TranscriptProjection.name))


def entries(store: Any, tid: uuid.UUID, after: int = 0, limit: int = PAGE_TRANSCRIPT, tail: bool = False,
            upto: int | None = None) -> list[dict]:
    """A page of the transcript ``tid`` (an agent's, a sandbox's), read from its stream in the log: the entries after
    ``after`` (a ``seq``), oldest first, or with ``tail`` its last ``limit``; none after position ``upto``."""
    if limit < 1:
        return []
    # Entry ``seq`` n is at least the stream's version n + 1, so the entries after ``after`` are all past version
    # ``after`` (one more event read, the entry ``after`` itself, and no sum past 64 bits for the largest ``after``).
    events = (store.stream(tid, upto=upto, newest_first=True, page=limit + 1) if tail
              else store.stream(tid, after, upto=upto, page=limit + 1))
    out: list[dict] = []
    for rec in events:
        if rec.kind == ENTRY_KIND and (tail or rec.data["seq"] > after):
            out.append(entry_view(rec))
            if len(out) == limit:
                break
    if tail:
        out.reverse()
    return out


def agent_page(read_models: ReadModels, at: str, cid: int) -> dict:
    """The agent page at time ``at``: the profile, the transcript's last entries, and its conduct (the
    suspensions in force, each liftable at /v1/conduct/{cid}/suspensions/{id}/lift, and the sanctions it
    received)."""
    row = agent_row(read_models, cid)
    return {"agent": agent_view(row, policy_of(read_models)), "transcript": transcript(read_models, cid, tail=True),
            "conduct": conduct_view(read_models, at, str(cid), PAGE_SANCTIONS)}


def agents_on(read_models: ReadModels, node: str) -> int:
    """How many agents live on ``node``."""
    return len(read_models.rows(agents_table, agents_table.c.node == node))


def agents_overview(read_models: ReadModels) -> dict:
    """The overview's agents line: how many, by status."""
    by: dict[str, int] = {}
    for r in read_models.rows(agents_table):
        by[r["status"]] = by.get(r["status"], 0) + 1
    return {"total": sum(by.values()), "by_status": dict(sorted(by.items()))}


#: The verdicts an egress entry carries (``runtime.egress``): the proxy dialled, refused, or could not reach.
EGRESS_VERDICTS = ("allowed", "refused", "failed")
#: Egress entries the Egress screen shows a page of.
PAGE_EGRESS = 50


def egress_audit(read_models: ReadModels, verdict: str | None = None, cid: int | None = None,
                 before: int | None = None, limit: int = PAGE_EGRESS) -> list[dict]:
    """Every agent's egress connections, newest first: one transcript entry each (the proxy writes one for
    every connection, allowed or refused). ``before`` is an entry's ``position``: the page older than it."""
    t = egress_table
    where = ([t.c.verdict == verdict] if verdict is not None else []) + ([t.c.cid == cid] if cid is not None else [])
    if before is not None:
        where.append(t.c.position < before)
    names = {r["cid"]: r["name"] for r in read_models.rows(agents_table)}
    out = []
    for r in read_models.rows(t, *where, order_by=sa.desc(t.c.position), limit=limit):
        d = r["detail"] if type(r["detail"]) is dict else {}
        out.append({"position": r["position"], "at": r["at"], "cid": r["cid"], "agent": names.get(r["cid"]),
                    "verdict": r["verdict"], "host": d.get("host"), "port": d.get("port"),
                    "why": d.get("why"), "text": r["text"]})
    return out
