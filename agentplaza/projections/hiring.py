"""Hiring's read model: each hire (who hired whom for which task, the bonus and what became of it, how
the task ended), and the owner's settings agents' money and outreach follow (``payments.approve_over``,
``society.outreach_minutes``).

- ``rm_hires``: one row a hire, by the hire's id; ``rm_hire_tasks`` maps a task's id to its hire, so a
  task's verdict (``Task.Passed``, ``Failed``, ``Withdrawn``) reaches its hire's row.
- ``rm_settings``: one row, the plaza's settings.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..domain.hiring import DEFAULT_APPROVE_OVER
from ..domain.outreach import DEFAULT_OUTREACH_MINUTES
from ..domain.tasks import task_id
from ..events.records import EventRecord
from .framework import Projection, Rows, evictable, metadata

hires = evictable(sa.Table(
    "rm_hires", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("position", sa.BigInteger, nullable=False, index=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("task", sa.String(32), nullable=False),
    sa.Column("hirer", sa.BigInteger, nullable=False, index=True),
    sa.Column("contact", sa.BigInteger, nullable=False, index=True),
    sa.Column("bonus", sa.BigInteger, nullable=False),
    sa.Column("bonus_state", sa.String(16), nullable=False),  # offered, paid, unpaid, none
    sa.Column("why", sa.Text),  # unpaid: why the bonus could not be paid
    sa.Column("outcome", sa.String(16)),  # done, failed, withdrawn; None while the task runs
))

hire_tasks = sa.Table(
    "rm_hire_tasks", metadata,
    sa.Column("task_id", sa.String(32), primary_key=True),
    sa.Column("hire", sa.String(32), nullable=False),
)

settings_table = sa.Table(
    "rm_settings", metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("approve_over", sa.BigInteger, nullable=False),
    sa.Column("outreach_minutes", sa.BigInteger, nullable=False),
)

HIRE_COLUMNS = ("at", "task", "hirer", "contact", "bonus", "bonus_state", "why", "outcome")


class HiringProjection(Projection):
    name = "hiring"
    version = 2
    tables = (hires, hire_tasks, settings_table)

    def on_Hire_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_hires", {"id": e.originator_id, "position": e.position, "at": e.at, "task": d["task"],
                              "hirer": d["hirer"], "contact": d["contact"], "bonus": d["bonus"],
                              "bonus_state": "offered" if d["bonus"] else "none", "why": None, "outcome": None})
        rows.put("rm_hire_tasks", {"task_id": task_id(d["task"]).hex, "hire": e.originator_id})

    def _hire(self, rows: Rows, hire_id: str, **change) -> None:
        row = rows.get("rm_hires", hire_id)
        if row is not None:
            rows.put("rm_hires", {**row, **change})

    def on_Hire_BonusPaid(self, e: EventRecord, rows: Rows) -> None:
        self._hire(rows, e.originator_id, bonus_state="paid")

    def on_Hire_BonusUnpaid(self, e: EventRecord, rows: Rows) -> None:
        self._hire(rows, e.originator_id, bonus_state="unpaid", why=e.data["why"])

    def _ended(self, e: EventRecord, rows: Rows, outcome: str) -> None:
        link = rows.get("rm_hire_tasks", e.originator_id)
        if link is None:
            return
        row = rows.get("rm_hires", link["hire"])
        if row is not None:
            state = row["bonus_state"] if outcome == "done" else ("none" if row["bonus_state"] == "offered"
                                                                   else row["bonus_state"])
            rows.put("rm_hires", {**row, "outcome": outcome, "bonus_state": state})

    def on_Task_Passed(self, e: EventRecord, rows: Rows) -> None:
        self._ended(e, rows, "done")

    def on_Task_Failed(self, e: EventRecord, rows: Rows) -> None:
        self._ended(e, rows, "failed")

    def on_Task_Withdrawn(self, e: EventRecord, rows: Rows) -> None:
        self._ended(e, rows, "withdrawn")

    def _settings(self, rows: Rows, **change) -> None:
        row = rows.get("rm_settings", "plaza") or {"id": "plaza", "approve_over": DEFAULT_APPROVE_OVER,
                                                   "outreach_minutes": DEFAULT_OUTREACH_MINUTES}
        rows.put("rm_settings", {**row, **change})

    def on_PlazaSettings_PaymentsSet(self, e: EventRecord, rows: Rows) -> None:
        self._settings(rows, approve_over=e.data["approve_over"])

    def on_PlazaSettings_OutreachSet(self, e: EventRecord, rows: Rows) -> None:
        self._settings(rows, outreach_minutes=e.data["outreach_minutes"])


# -- queries --------------------------------------------------------------------------------------------


def hire_rows(read_models, cid: int | None = None, limit: int = 100) -> list[dict]:
    """The hires, the latest first (of one agent, hiring or hired, with ``cid``)."""
    c = hires.c
    where = [sa.or_(c.hirer == cid, c.contact == cid)] if cid is not None else []
    rows = read_models.rows(hires, *where, order_by=sa.desc(c.position), limit=limit)
    return [{k: r[k] for k in HIRE_COLUMNS} for r in rows]


def settings_view(read_models) -> dict:
    rows = read_models.rows(settings_table)
    r = rows[0] if rows else {"approve_over": DEFAULT_APPROVE_OVER, "outreach_minutes": DEFAULT_OUTREACH_MINUTES}
    return {"payments": {"approve_over": r["approve_over"]}, "society": {"outreach_minutes": r["outreach_minutes"]}}
