"""Read models of work and conduct: tasks, their timelines and bids, the workers the scheduler
sees, the approvals queue, and each agent's conduct.

- ``rm_tasks``: one row per task (state, phase, worker, reviewer, bids, report, positions).
- a task's timeline (every transition, with who and why) is read from the task's stream in the log
  (``timeline_rows``), not kept here.
- ``rm_task_bids``: one row per (task, bidder), the latest price.
- ``rm_workers``: one row per worker: role, tier, idle/busy/offline, the work it holds, and the
  position of the last work it took (the scheduler's fairness key).
- ``rm_approvals``: the queue, one row per approval.
- ``rm_conduct``: one row per agent: mode, offences, warnings, fines.
- ``rm_conduct_log``: every offence and sanction step (append-only).
- ``rm_suspensions``: every probation and lockout, lifted or not.

Every handler is O(1) per event.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.scheduling import Idle, OpenTask, Queue, ReviewTask
from ..domain.tasks import STATES
from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, evictable, metadata
from .runner import equal_to

tasks = evictable(sa.Table(
    "rm_tasks", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("number", sa.String(24), nullable=False, unique=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("details", sa.Text, nullable=False),
    sa.Column("acceptance", sa.Text, nullable=False),
    sa.Column("role", sa.String(64)),
    sa.Column("budget", sa.BigInteger, nullable=False),
    sa.Column("project", sa.String(200)),
    sa.Column("parent", sa.String(24)),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("phase", sa.String(16)),
    sa.Column("worker", sa.String(64)),
    sa.Column("reviewer", sa.String(64)),
    sa.Column("bids", sa.Integer, nullable=False),
    sa.Column("report", sa.JSON),
    sa.Column("notes", sa.Text),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False, index=True),  # the task list's page, newest first
    sa.Column("queued_at", sa.BigInteger, nullable=False),  # created, or reported done (the review queue)
    sa.Column("updated_at", sa.String(40), nullable=False),
))

#: How many tasks are in each state, kept as the tasks move (the overview reads a handful of rows,
#: not a count over every task that ever was); held in memory: one row a state.
task_counts = sa.Table(
    "rm_task_counts", metadata,
    sa.Column("state", sa.String(16), primary_key=True),
    sa.Column("tasks", sa.BigInteger, nullable=False),
)

bids = evictable(sa.Table(
    "rm_task_bids", metadata,
    sa.Column("task", sa.String(24), primary_key=True),
    sa.Column("worker", sa.String(64), primary_key=True),
    sa.Column("price", sa.BigInteger, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
))

workers = sa.Table(
    "rm_workers", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.String(64), nullable=False, unique=True),
    sa.Column("role", sa.String(64), nullable=False),
    sa.Column("tier", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("activity", sa.String(200)),
    sa.Column("task", sa.String(24)),
    sa.Column("work", sa.String(8)),
    sa.Column("taken", sa.BigInteger, nullable=False),
    sa.Column("last_took", sa.BigInteger, nullable=False),
    sa.Column("since", sa.String(40), nullable=False),
)

approvals = evictable(sa.Table(
    "rm_approvals", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("number", sa.String(24), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("agent", sa.String(128)),
    sa.Column("ref", sa.String(200)),
    sa.Column("detail", sa.JSON),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("used", sa.Boolean, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("requested_at", sa.String(40), nullable=False),
    sa.Column("requested_by", sa.String(200), nullable=False),
    sa.Column("decided_at", sa.String(40)),
    sa.Column("decided_by", sa.String(200)),
    sa.Column("decision_reason", sa.Text),
))

conduct = sa.Table(
    "rm_conduct", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.String(128), nullable=False, unique=True),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("offences", sa.BigInteger, nullable=False),
    sa.Column("warnings", sa.BigInteger, nullable=False),
    sa.Column("fined", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)

conduct_log = append_only(sa.Table(
    "rm_conduct_log", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("cid", sa.String(128), nullable=False, index=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("event", sa.String(24), nullable=False),
    sa.Column("law", sa.String(100)),
    sa.Column("detail", sa.JSON),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text),
))

suspensions = sa.Table(
    "rm_suspensions", metadata,
    sa.Column("cid", sa.String(128), primary_key=True),
    sa.Column("suspension", sa.String(16), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("until", sa.String(40), nullable=False),
    sa.Column("law", sa.String(100), nullable=False),
    sa.Column("approval", sa.String(24)),
    sa.Column("lifted", sa.Boolean, nullable=False),
    sa.Column("lifted_at", sa.String(40)),
    sa.Column("lifted_by", sa.String(200)),
    sa.Column("at", sa.String(40), nullable=False),
)

#: A task's state when it is created (its row, and the first line of its timeline).
CREATED_STATE = "open"
_TASK_STATE = {"Task.Claimed": "claimed", "Task.Passed": "done", "Task.Failed": "failed", "Task.Withdrawn": "withdrawn"}


def _report(d: dict) -> dict:
    return {"summary": d["summary"], "files": d["files"], "checks": d["checks"]}


#: The task events that are lines of its timeline, and each one's detail (``timeline_rows``).  The same kinds as
#: ``WorkProjection``'s task handlers (``tests/test_tasks.py`` holds them to it).
LINE_DETAIL: dict[str, Callable[[dict], dict | None]] = {
    "Task.Created": lambda d: {"budget": d["budget"], "role": d["role"], "title": d["title"]},
    "Task.BidPlaced": lambda d: {"worker": d["worker"], "price": d["price"]},
    "Task.Claimed": lambda d: {"worker": d["worker"], "how": d["how"], "price": d["price"]},
    "Task.Reported": _report,
    "Task.ReviewerAssigned": lambda d: {"reviewer": d["reviewer"], "how": d["how"]},
    "Task.ReviewReleased": lambda d: {"reviewer": d["reviewer"]},
    "Task.Passed": lambda d: {"reviewer": d["reviewer"], "notes": d["notes"]},
    "Task.Failed": lambda d: {"why": d["why"], "notes": d["notes"]},
    "Task.Withdrawn": lambda d: None,
}


class WorkProjection(Projection):
    name = "work"
    # 2: rm_tasks.position is indexed (the task list's page reads no more than a page); 3: rm_task_counts;
    # 4: the timelines read from the log (a quarter of a rebuild's rows were theirs)
    version = 4
    tables = (tasks, bids, workers, approvals, conduct, conduct_log, suspensions, task_counts)
    retired_tables = ("rm_task_timeline",)

    # -- tasks ---------------------------------------------------------------------------

    def on_Task_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        row = {
            "id": e.originator_id, "number": d["number"], "title": d["title"], "details": d["details"],
            "acceptance": d["acceptance"], "role": d["role"], "budget": d["budget"], "project": d["project"],
            "parent": d["parent"], "state": CREATED_STATE, "phase": None, "worker": None, "reviewer": None, "bids": 0,
            "report": None, "notes": None, "created_at": e.at, "created_by": e.actor, "position": e.position,
            "queued_at": e.position, "updated_at": e.at,
        }
        rows.add("rm_tasks", row)
        self._count(rows, CREATED_STATE, 1)

    @staticmethod
    def _count(rows: Rows, state: str, by: int) -> None:
        held = rows.get("rm_task_counts", state)
        rows.put("rm_task_counts", {"state": state, "tasks": (held["tasks"] if held else 0) + by})

    def _task(self, e: EventRecord, rows: Rows, **changes) -> None:
        row = dict(rows.get("rm_tasks", e.originator_id))
        was = row["state"]
        row.update(changes, updated_at=e.at)
        if e.kind in _TASK_STATE:
            row["state"] = _TASK_STATE[e.kind]
        rows.put("rm_tasks", row)
        if row["state"] != was:
            self._count(rows, was, -1)
            self._count(rows, row["state"], 1)

    def on_Task_BidPlaced(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_tasks", e.originator_id)
        new = rows.get("rm_task_bids", (row["number"], e.data["worker"])) is None
        rows.put("rm_task_bids", {"task": row["number"], "worker": e.data["worker"], "price": e.data["price"], "at": e.at})
        self._task(e, rows, bids=row["bids"] + (1 if new else 0))

    def on_Task_Claimed(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._task(e, rows, worker=d["worker"], phase="working")

    def on_Task_Reported(self, e: EventRecord, rows: Rows) -> None:
        self._task(e, rows, report=_report(e.data), phase="review", queued_at=e.position)

    def on_Task_ReviewerAssigned(self, e: EventRecord, rows: Rows) -> None:
        self._task(e, rows, reviewer=e.data["reviewer"], phase="reviewing")

    def on_Task_ReviewReleased(self, e: EventRecord, rows: Rows) -> None:
        self._task(e, rows, reviewer=None, phase="review")

    def on_Task_Passed(self, e: EventRecord, rows: Rows) -> None:
        self._task(e, rows, phase=None, notes=e.data["notes"])

    def on_Task_Failed(self, e: EventRecord, rows: Rows) -> None:
        self._task(e, rows, phase=None, notes=e.data["notes"])

    def on_Task_Withdrawn(self, e: EventRecord, rows: Rows) -> None:
        self._task(e, rows, phase=None)

    # -- workers -----------------------------------------------------------------------------

    def on_Worker_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_workers", {"id": e.originator_id, "cid": d["cid"], "role": d["role"], "tier": d["tier"],
                                "status": "offline", "activity": None, "task": None, "work": None, "taken": 0,
                                "last_took": 0, "since": e.at})

    def _worker(self, e: EventRecord, rows: Rows, **changes) -> None:
        row = dict(rows.get("rm_workers", e.originator_id))
        row.update(changes)
        rows.put("rm_workers", row)

    def on_Worker_Available(self, e: EventRecord, rows: Rows) -> None:
        self._worker(e, rows, role=e.data["role"], tier=e.data["tier"], status="idle", activity=None, since=e.at)

    def on_Worker_Busy(self, e: EventRecord, rows: Rows) -> None:
        self._worker(e, rows, status="busy", activity=e.data["activity"], since=e.at)

    def on_Worker_Offline(self, e: EventRecord, rows: Rows) -> None:
        self._worker(e, rows, status="offline", activity=None, task=None, work=None, since=e.at)

    def on_Worker_Took(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_workers", e.originator_id)
        self._worker(e, rows, status="busy", task=e.data["task"], work=e.data["work"], activity=None,
                     taken=row["taken"] + 1, last_took=e.position, since=e.at)

    def on_Worker_Released(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_workers", e.originator_id)
        status = "idle" if row["status"] == "busy" else row["status"]
        self._worker(e, rows, task=None, work=None, status=status, since=e.at)

    # -- approvals -------------------------------------------------------------------------------

    def on_Approval_Requested(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_approvals", {
            "id": e.originator_id, "number": d["number"], "kind": d["kind"], "title": d["title"], "agent": d["agent"],
            "ref": d["ref"], "detail": d["detail"], "status": "pending", "used": False, "position": e.position,
            "requested_at": e.at, "requested_by": e.actor, "decided_at": None, "decided_by": None,
            "decision_reason": None,
        })

    def _decided(self, e: EventRecord, rows: Rows, status: str) -> None:
        row = dict(rows.get("rm_approvals", e.originator_id))
        row.update(status=status, decided_at=e.at, decided_by=e.actor, decision_reason=e.reason)
        rows.put("rm_approvals", row)

    def on_Approval_Approved(self, e: EventRecord, rows: Rows) -> None:
        self._decided(e, rows, "approved")

    def on_Approval_Denied(self, e: EventRecord, rows: Rows) -> None:
        self._decided(e, rows, "denied")

    def on_Approval_Used(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_approvals", dict(rows.get("rm_approvals", e.originator_id), used=True))

    # -- conduct ---------------------------------------------------------------------------------

    def on_Conduct_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_conduct", {"id": e.originator_id, "cid": e.data["cid"], "mode": "autonomous", "offences": 0,
                                "warnings": 0, "fined": 0, "updated_at": e.at})

    def _conduct(self, e: EventRecord, rows: Rows, law: str | None = None, detail: dict | None = None, **changes) -> dict:
        row = dict(rows.get("rm_conduct", e.originator_id))
        row.update(changes, updated_at=e.at)
        rows.put("rm_conduct", row)
        rows.put("rm_conduct_log", {"position": e.position, "cid": row["cid"], "at": e.at,
                                    "event": e.kind.split(".", 1)[1], "law": law, "detail": detail,
                                    "actor": e.actor, "reason": e.reason})
        return row

    def on_Conduct_ModeSet(self, e: EventRecord, rows: Rows) -> None:
        self._conduct(e, rows, None, {"mode": e.data["mode"]}, mode=e.data["mode"])

    def on_Conduct_Offended(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        row = rows.get("rm_conduct", e.originator_id)
        self._conduct(e, rows, d["law"], {k: d[k] for k in ("severity", "tool", "call_id", "count", "steps")},
                      offences=row["offences"] + 1)

    def on_Conduct_Warned(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_conduct", e.originator_id)
        self._conduct(e, rows, e.data["law"], {"note": e.data["note"]}, warnings=row["warnings"] + 1)

    def on_Conduct_Fined(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        row = rows.get("rm_conduct", e.originator_id)
        self._conduct(e, rows, d["law"], {k: d[k] for k in ("amount", "levied", "collected", "uncollected", "entry_id", "note")},
                      fined=row["fined"] + d["levied"])

    def on_Conduct_Suspended(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        row = self._conduct(e, rows, d["law"], {k: d[k] for k in ("suspension", "kind", "tool", "until", "approval")})
        rows.put("rm_suspensions", {"cid": row["cid"], "suspension": d["suspension"], "kind": d["kind"], "tool": d["tool"],
                                    "until": d["until"], "law": d["law"], "approval": d["approval"], "lifted": False,
                                    "lifted_at": None, "lifted_by": None, "at": e.at})

    def on_Conduct_Lifted(self, e: EventRecord, rows: Rows) -> None:
        row = self._conduct(e, rows, None, {"suspension": e.data["suspension"], "how": e.data["how"]})
        s = dict(rows.get("rm_suspensions", (row["cid"], e.data["suspension"])))
        s.update(lifted=True, lifted_at=e.at, lifted_by=e.actor)
        rows.put("rm_suspensions", s)

    def on_Conduct_OwnerAsked(self, e: EventRecord, rows: Rows) -> None:
        self._conduct(e, rows, e.data["law"], {"step": e.data["step"], "approval": e.data["approval"]})


def queue(read_models, limit: int = 10_000) -> Queue:
    """The scheduler's queue from the read models: open tasks with no bids, tasks waiting for a
    reviewer, idle workers; each oldest first."""
    t, w = tasks, workers
    open_rows = read_models.rows(t, t.c.state == "open", t.c.bids == 0, order_by=t.c.queued_at, limit=limit)
    review_rows = read_models.rows(t, t.c.state == "claimed", t.c.phase == "review", order_by=t.c.queued_at, limit=limit)
    idle_rows = read_models.rows(w, w.c.status == "idle", w.c.tier == "worker")
    return Queue(
        open=[OpenTask(r["number"], r["role"], r["queued_at"]) for r in open_rows],
        review=[ReviewTask(r["number"], r["worker"], r["queued_at"]) for r in review_rows],
        idle=[Idle(r["cid"], r["role"], r["last_took"]) for r in idle_rows],
    )


# -- what the screens read ---------------------------------------------------------------------------
def _numbered(row: dict) -> dict:
    """A task or an approval as people name it: its id is its number (t12, a3)."""
    row = dict(row)
    row["id"] = row.pop("number")
    return row


def task_rows(read_models, state: str | None, role: str | None, worker: str | None, limit: int) -> list[dict]:
    where = equal_to(tasks, state=state, role=role, worker=worker)
    return [_numbered(r) for r in read_models.rows(tasks, *where, order_by=sa.desc(tasks.c.position), limit=limit)]


def task_row(read_models, number: str) -> dict:
    """One task (``number`` as ``domain.names.task_number`` gives it) with its bids, cheapest first."""
    found = read_models.rows(tasks, tasks.c.number == number)
    if not found:
        raise Refusal("no_task", f"no task {number!r}")
    row = _numbered(found[0])
    row["bids"] = read_models.rows(bids, bids.c.task == number, order_by=bids.c.price)
    return row


def timeline_rows(read_models, number: str) -> list[dict]:
    """Every transition of a task, with who and why, oldest first: read from the task's stream in the log, up to
    where the read models are (as the task's row), each line with the state the event left the task in."""
    upto = read_models.position_of(WorkProjection.name)
    found = read_models.rows(tasks, tasks.c.number == number)
    if not found:
        raise Refusal("no_task", f"no task {number!r}")
    state, lines = CREATED_STATE, []
    for rec in read_models.store.stream(uuid.UUID(hex=found[0]["id"]), upto=upto):
        detail = LINE_DETAIL.get(rec.kind)
        if detail is None:
            continue
        state = CREATED_STATE if rec.kind == "Task.Created" else _TASK_STATE.get(rec.kind, state)
        lines.append({"position": rec.position, "task": number, "at": rec.at, "event": rec.kind.split(".", 1)[1],
                      "state": state, "actor": rec.actor, "reason": rec.reason, "detail": detail(rec.data) or None})
    return lines


def worker_rows(read_models) -> list[dict]:
    return read_models.rows(workers, order_by=workers.c.cid)


def tasks_overview(read_models) -> dict:
    """How many tasks are in each state (``rm_task_counts``: one row a state, whatever the log's length)."""
    counts = {r["state"]: r["tasks"] for r in read_models.rows(task_counts)}
    return {s: counts.get(s, 0) for s in STATES}


def approval_rows(read_models, status: str | None, kind: str | None, agent: str | None, limit: int) -> list[dict]:
    """The queue: pending ones oldest first, otherwise newest first."""
    where = equal_to(approvals, status=status, kind=kind, agent=agent)
    order = approvals.c.position if status == "pending" else sa.desc(approvals.c.position)
    return [_numbered(r) for r in read_models.rows(approvals, *where, order_by=order, limit=limit)]


def approval_row(read_models, number: str) -> dict:
    found = read_models.rows(approvals, approvals.c.number == number)
    if not found:
        raise Refusal("no_approval", f"no approval {number!r}")
    return _numbered(found[0])


def approvals_overview(read_models) -> dict:
    """How many approvals wait, in all and by kind."""
    a = approvals
    with read_models.engine.connect() as conn:
        counts = dict(conn.execute(sa.select(a.c.kind, sa.func.count()).where(a.c.status == "pending")
                                   .group_by(a.c.kind)).all())
    return {"pending": sum(counts.values()), "by_kind": counts}


def conduct_view(read_models, at: str, cid: str, limit: int) -> dict:
    """An agent's conduct at time ``at`` (ISO): its mode and counts, its suspensions (``in_force`` the
    ones not lifted and not yet over), and its latest ``limit`` sanctions, newest first."""
    rows = read_models.rows(conduct, conduct.c.cid == cid)
    base = rows[0] if rows else {"cid": cid, "mode": "autonomous", "offences": 0, "warnings": 0, "fined": 0}
    s = suspensions
    sus = read_models.rows(s, s.c.cid == cid, order_by=s.c.at)
    log = read_models.rows(conduct_log, conduct_log.c.cid == cid, order_by=sa.desc(conduct_log.c.position),
                           limit=limit)
    return {
        "cid": cid, "mode": base["mode"], "offences": base["offences"], "warnings": base["warnings"],
        "fined": base["fined"],
        "suspensions": [dict(x, in_force=not x["lifted"] and x["until"] > at) for x in sus],
        "in_force": [x for x in sus if not x["lifted"] and x["until"] > at],
        "sanctions": log,
    }
