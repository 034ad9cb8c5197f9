"""The read model of projects, council motions, court cases and incidents, and the queries the
Projects and Council screens, ``agentplaza projects`` and ``agentplaza council`` read.

- ``rm_projects``: one row a project, where it stands (stage, revision, flags, counts).
- ``rm_project_docs`` (append-only): every document (brief, research, revision, critique, deliverable)
  and every move, in order: the project's history with who and why.
- ``rm_motions``: one row a motion, with its votes as the seats gave them last.
- ``rm_cases``, ``rm_incidents``: the courts.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, evictable, metadata

projects = evictable(sa.Table(
    "rm_projects", metadata,
    sa.Column("id", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False, index=True),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("stage", sa.String(16), nullable=False, index=True),
    sa.Column("vetoed", sa.Boolean, nullable=False),
    sa.Column("owner_flag", sa.Boolean, nullable=False),
    sa.Column("owner_approved", sa.Boolean, nullable=False),
    sa.Column("mayor_approved", sa.Integer),
    sa.Column("approval", sa.String(24)),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("research", sa.Integer, nullable=False),
    sa.Column("critiques", sa.Integer, nullable=False),
    sa.Column("tasks", sa.Text, nullable=False),  # JSON list of the linked tasks
    sa.Column("done", sa.Integer, nullable=False),
    sa.Column("repo", sa.String(64)),  # its repository on the plaza's git server
    sa.Column("specs", sa.Integer, nullable=False),  # the revisions kept there as OpenSpec changes
    sa.Column("thread", sa.String(24)),  # its thread's post on the board
    sa.Column("opened_by", sa.String(80), nullable=False),
    sa.Column("opened_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
))

docs = append_only(sa.Table(
    "rm_project_docs", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("project", sa.String(24), nullable=False, index=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("actor", sa.String(80), nullable=False),
    sa.Column("what", sa.String(16), nullable=False),  # brief research proposal critique move ... deliverable
    sa.Column("revision", sa.Integer),
    sa.Column("title", sa.String(200)),
    sa.Column("text", sa.Text),
    sa.Column("detail", sa.Text),  # JSON: a revision's tasks document and spec; a move's stages; a critique's revise
    sa.Column("reason", sa.Text),
))

motions = evictable(sa.Table(
    "rm_motions", metadata,
    sa.Column("id", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("seat", sa.String(16), nullable=False),
    sa.Column("amount", sa.BigInteger),
    sa.Column("to", sa.String(64)),
    sa.Column("minted", sa.BigInteger, nullable=False),
    sa.Column("status", sa.String(12), nullable=False, index=True),
    sa.Column("result", sa.String(8)),
    sa.Column("votes", sa.Text, nullable=False),  # JSON: seat -> {vote, why, by}
    sa.Column("owner", sa.Text),  # JSON: the owner's decision {approve, note}
    sa.Column("moved", sa.Text),  # JSON: a carried budget move's entry or why not
    sa.Column("at", sa.String(40), nullable=False),
))

cases = evictable(sa.Table(
    "rm_cases", metadata,
    sa.Column("id", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("accused", sa.String(64), nullable=False),
    sa.Column("law", sa.String(64), nullable=False),
    sa.Column("severity", sa.String(10), nullable=False),
    sa.Column("charge", sa.Text, nullable=False),
    sa.Column("incident", sa.String(24)),
    sa.Column("prosecutor", sa.String(80), nullable=False),
    sa.Column("defences", sa.Integer, nullable=False),
    sa.Column("defended", sa.Text, nullable=False),  # JSON list: each defence {by, text, at}
    sa.Column("verdict", sa.String(12)),
    sa.Column("ruling", sa.Text),
    sa.Column("judge", sa.String(80)),
    sa.Column("at", sa.String(40), nullable=False),
))

incidents = evictable(sa.Table(
    "rm_incidents", metadata,
    sa.Column("id", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("agent", sa.String(64)),
    sa.Column("by", sa.String(80), nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
))

#: Which aggregate is which number (an event names only its aggregate).
ids = sa.Table(
    "rm_project_ids", metadata,
    sa.Column("key", sa.String(32), primary_key=True),
    sa.Column("id", sa.String(24), nullable=False),
)
motion_ids = sa.Table(
    "rm_motion_ids", metadata,
    sa.Column("key", sa.String(32), primary_key=True),
    sa.Column("id", sa.String(24), nullable=False),
)
case_ids = sa.Table(
    "rm_case_ids", metadata,
    sa.Column("key", sa.String(32), primary_key=True),
    sa.Column("id", sa.String(24), nullable=False),
)
#: The columns a list of projects or motions shows.
PROJECT_COLUMNS = ("id", "kind", "title", "stage", "vetoed", "owner_flag", "revision", "done", "updated_at")
MOTION_COLUMNS = ("id", "kind", "title", "seat", "amount", "status", "result", "at")


class GovernanceProjection(Projection):
    name = "governance"
    version = 2
    tables = (projects, docs, motions, cases, incidents, ids, motion_ids, case_ids)

    # -- projects --------------------------------------------------------------------------------------

    def _doc(self, e: EventRecord, rows: Rows, project: str, what: str, **row) -> None:
        rows.put("rm_project_docs", {"position": e.position, "project": project, "at": e.at, "actor": e.actor,
                                     "what": what, "revision": None, "title": None, "text": None, "detail": None,
                                     "reason": e.reason, **row})

    def on_Project_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_projects", {"id": d["number"], "seq": int(d["number"][2:]), "kind": d["kind"], "title": d["title"],
                                 "stage": "brief", "vetoed": False, "owner_flag": d["owner_flag"],
                                 "owner_approved": False, "mayor_approved": None, "approval": None, "revision": 0,
                                 "research": 0, "critiques": 0, "tasks": "[]", "done": 0, "repo": None, "specs": 0,
                                 "thread": None, "opened_by": e.actor,
                                 "opened_at": e.at, "updated_at": e.at})
        rows.put("rm_project_ids", {"key": e.originator_id, "id": d["number"]})
        self._doc(e, rows, d["number"], "brief", title=d["title"], text=d["brief"])

    def _row(self, e: EventRecord, rows: Rows) -> dict | None:
        key = rows.get("rm_project_ids", e.originator_id)
        return None if key is None else rows.get("rm_projects", key["id"])

    def _touch(self, e: EventRecord, rows: Rows, what: str, change=None, **doc) -> None:
        """The project's row changed by ``change(row)`` (a dict of new values), and one history line."""
        row = self._row(e, rows)
        if row is None:
            return
        row.update(change(row) if change else {})
        row["updated_at"] = e.at
        rows.put("rm_projects", row)
        self._doc(e, rows, row["id"], what, **doc)

    def on_Project_Moved(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._touch(e, rows, "move", lambda r: {"stage": d["stage"]}, title=d["stage"], text=d["why"],
                    detail=json.dumps({"from": d["source"], "to": d["stage"]}))

    def on_Project_ResearchAttached(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "research", lambda r: {"research": r["research"] + 1}, title=e.data["title"],
                    text=e.data["text"])

    def on_Project_Proposed(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._touch(e, rows, "proposal", lambda r: {"revision": d["revision"], "mayor_approved": None},
                    revision=d["revision"], text=d["proposal"],
                    detail=json.dumps({"tasks": d["tasks_doc"], "spec": d["spec"]}))

    def on_Project_Critiqued(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._touch(e, rows, "critique", lambda r: {"critiques": r["critiques"] + 1}, revision=d["revision"],
                    text=d["text"], detail=json.dumps({"revise": d["revise"]}))

    def on_Project_SentBack(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "sent_back", revision=e.data["revision"])

    def on_Project_Flagged(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "flag", lambda r: {"owner_flag": e.data["on"]})

    def on_Project_MayorApproved(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "mayor", lambda r: {"mayor_approved": e.data["revision"]}, revision=e.data["revision"])

    def on_Project_OwnerAsked(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "asked", lambda r: {"approval": e.data["approval"]}, title=e.data["approval"])

    def on_Project_OwnerApproved(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "owner", lambda r: {"owner_approved": True})

    def on_Project_RepoOpened(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "repo", lambda r: {"repo": e.data["repo"]}, title=e.data["repo"])

    def on_Project_SpecCommitted(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._touch(e, rows, "spec", lambda r: {"specs": r["specs"] + 1}, revision=d["revision"], title=d["path"],
                    detail=json.dumps({"repo": d["repo"], "path": d["path"], "commit": d["commit"],
                                       "author": d["author"]}))

    def on_Project_Threaded(self, e: EventRecord, rows: Rows) -> None:
        row = self._row(e, rows)
        if row is not None:
            row["thread"] = e.data["post"]
            rows.put("rm_projects", row)

    def on_Project_Vetoed(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "veto", lambda r: {"vetoed": True})

    def on_Project_TaskLinked(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "task", lambda r: {"tasks": json.dumps([*json.loads(r["tasks"]), e.data["task"]])},
                    title=e.data["task"])

    def on_Project_TaskDone(self, e: EventRecord, rows: Rows) -> None:
        self._touch(e, rows, "task_done", lambda r: {"done": r["done"] + 1}, title=e.data["task"])

    def on_Project_DeliverableAttached(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._touch(e, rows, "deliverable", title=d["title"], text=d["text"], detail=json.dumps({"item": d["item"]}))

    # -- the council -----------------------------------------------------------------------------------

    def on_Motion_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_motion_ids", {"key": e.originator_id, "id": d["number"]})
        rows.put("rm_motions", {"id": d["number"], "seq": int(d["number"][1:]), "kind": d["kind"], "title": d["title"],
                                "text": d["text"], "seat": d["seat"], "amount": d["amount"], "to": d["to"],
                                "minted": d["minted"], "status": "open", "result": None, "votes": "{}",
                                "owner": None, "moved": None, "at": e.at})

    def _motion(self, e: EventRecord, rows: Rows) -> dict | None:
        key = rows.get("rm_motion_ids", e.originator_id)
        return None if key is None else rows.get("rm_motions", key["id"])

    def on_Motion_Voted(self, e: EventRecord, rows: Rows) -> None:
        m = self._motion(e, rows)
        if m is not None:
            votes = json.loads(m["votes"])
            votes[e.data["seat"]] = {"vote": e.data["vote"], "why": e.data["why"], "by": e.actor}
            m["votes"] = json.dumps(votes, sort_keys=True)
            rows.put("rm_motions", m)

    def on_Motion_Counted(self, e: EventRecord, rows: Rows) -> None:
        m = self._motion(e, rows)
        if m is not None:
            m["status"], m["result"] = e.data["status"], e.data["result"]
            rows.put("rm_motions", m)

    def on_Motion_OwnerDecided(self, e: EventRecord, rows: Rows) -> None:
        m = self._motion(e, rows)
        if m is not None:
            m["status"] = "carried" if e.data["approve"] else "rejected"
            m["owner"] = json.dumps({"approve": e.data["approve"], "note": e.data["note"]})
            rows.put("rm_motions", m)

    def on_Motion_Moved(self, e: EventRecord, rows: Rows) -> None:
        m = self._motion(e, rows)
        if m is not None:
            m["moved"] = json.dumps({"entry": e.data["entry"], "note": e.data["note"]})
            rows.put("rm_motions", m)

    # -- the courts ------------------------------------------------------------------------------------

    def on_Incident_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_incidents", {"id": d["number"], "seq": int(d["number"][1:]), "title": d["title"],
                                  "text": d["text"], "agent": d["agent"], "by": e.actor, "at": e.at})

    def on_Case_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_case_ids", {"key": e.originator_id, "id": d["number"]})
        rows.put("rm_cases", {"id": d["number"], "seq": int(d["number"][1:]), "accused": d["accused"], "law": d["law"],
                              "severity": d["severity"], "charge": d["charge"], "incident": d["incident"],
                              "prosecutor": d["prosecutor"], "defences": 0, "defended": "[]", "verdict": None,
                              "ruling": None, "judge": None, "at": e.at})

    def _case(self, e: EventRecord, rows: Rows) -> dict | None:
        key = rows.get("rm_case_ids", e.originator_id)
        return None if key is None else rows.get("rm_cases", key["id"])

    def on_Case_Defended(self, e: EventRecord, rows: Rows) -> None:
        c = self._case(e, rows)
        if c is not None:
            c["defences"] += 1
            c["defended"] = json.dumps([*json.loads(c["defended"]),
                                        {"by": e.actor, "text": e.data["text"], "at": e.at}])
            rows.put("rm_cases", c)

    def on_Case_Ruled(self, e: EventRecord, rows: Rows) -> None:
        c = self._case(e, rows)
        if c is not None:
            c["verdict"], c["ruling"], c["judge"] = e.data["verdict"], e.data["text"], e.actor
            rows.put("rm_cases", c)




# -- queries --------------------------------------------------------------------------------------------

def _loads(row: dict, *names: str) -> dict:
    return {**row, **{n: json.loads(row[n]) if row.get(n) else None for n in names}}


def project_rows(read_models, stage: str | None = None) -> list[dict]:
    where = [projects.c.stage == stage] if stage else []
    return [_loads(r, "tasks") for r in read_models.rows(projects, *where, order_by=projects.c.seq)]


def project_row(read_models, number: str) -> dict | None:
    found = read_models.rows(projects, projects.c.id == number)
    if not found:
        return None
    history = [_loads(d, "detail") for d in read_models.rows(docs, docs.c.project == number, order_by=docs.c.position)]
    return {**_loads(found[0], "tasks"), "history": history}


def projects_for_git(read_models) -> list[str]:
    """The projects the hub still keeps in git: no repository yet (not vetoed or delivered), or a code
    project with a revision not yet in its repository."""
    with read_models.engine.connect() as conn:
        found = conn.execute(sa.select(projects.c.id).where(sa.or_(
            sa.and_(projects.c.repo.is_(None), projects.c.vetoed.is_(False), projects.c.stage != "delivered"),
            sa.and_(projects.c.kind == "code", projects.c.repo.is_not(None), projects.c.specs < projects.c.revision),
        )).order_by(projects.c.seq)).scalars().all()
    return list(found)


def motion_rows(read_models, status: str | None = None) -> list[dict]:
    where = [motions.c.status == status] if status else []
    return [_loads(r, "votes", "owner", "moved") for r in read_models.rows(motions, *where, order_by=motions.c.seq)]


def motion_row(read_models, number: str) -> dict | None:
    found = read_models.rows(motions, motions.c.id == number)
    return _loads(found[0], "votes", "owner", "moved") if found else None


def case_rows(read_models) -> list[dict]:
    return [_loads(r, "defended") for r in read_models.rows(cases, order_by=cases.c.seq)]


def case_row(read_models, number: str) -> dict | None:
    """One case with its defences and ruling, and the incident it names."""
    found = read_models.rows(cases, cases.c.id == number)
    if not found:
        return None
    row = _loads(found[0], "defended")
    named = read_models.rows(incidents, incidents.c.id == row["incident"]) if row["incident"] else []
    return {**row, "incident_of": named[0] if named else None}


def incident_rows(read_models) -> list[dict]:
    return read_models.rows(incidents, order_by=incidents.c.seq)


def incident_row(read_models, number: str) -> dict | None:
    """One incident and the cases that name it."""
    found = read_models.rows(incidents, incidents.c.id == number)
    if not found:
        return None
    named = read_models.rows(cases, cases.c.incident == number, order_by=cases.c.seq)
    return {**found[0], "cases": [_loads(r, "defended") for r in named]}


def counts(read_models) -> dict:
    """The overview's governance line: projects by stage, motions waiting for the owner."""
    with read_models.engine.connect() as conn:
        by_stage = dict(conn.execute(sa.select(projects.c.stage, sa.func.count()).where(projects.c.vetoed.is_(False))
                                     .group_by(projects.c.stage)).all())
        waiting = conn.execute(sa.select(sa.func.count()).select_from(motions)
                               .where(motions.c.status == "waiting")).scalar_one()
    return {"projects": sum(by_stage.values()), "delivered": by_stage.get("delivered", 0), "motions_waiting": waiting}
