"""The E2B API's read model (``domain/e2b.py``): the sandboxes (ended ones kept, with why), the snapshots,
the templates with their builds and the builds' logs. The /e2b routes, the owner's /v1/e2b routes, the
CLI, the gateway's lookups and the reaper read it; the hub rebuilds it from the log."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..domain.e2b import BUILDING, ENDED, ERROR, PAUSED, READY, RUNNING, STARTING, WAITING
from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, evictable, metadata

sandboxes = evictable(sa.Table(
    "rm_e2b_sandboxes", metadata,
    sa.Column("id", sa.String(40), primary_key=True),  # the aggregate's
    sa.Column("sandbox_id", sa.String(40), nullable=False, unique=True),
    sa.Column("cid", sa.BigInteger, nullable=False, index=True),
    sa.Column("template_id", sa.String(140), nullable=False),
    sa.Column("alias", sa.String(200), nullable=False),
    sa.Column("client_id", sa.String(40), nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("timeout_s", sa.Integer, nullable=False),
    sa.Column("auto_pause", sa.Boolean, nullable=False),
    sa.Column("auto_pause_memory", sa.Boolean, nullable=False),
    sa.Column("cold", sa.Boolean, nullable=False),  # paused without its memory: a resume boots it cold
    sa.Column("allow_out", sa.JSON, nullable=False),
    sa.Column("deny_out", sa.JSON, nullable=False),
    sa.Column("source", sa.String(140), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("started_at", sa.String(40), nullable=False),
    sa.Column("end_at", sa.String(40), nullable=False),
    sa.Column("ended_at", sa.String(40), nullable=True),
    sa.Column("ended_reason", sa.String(16), nullable=True),
    sa.Column("ended_message", sa.Text, nullable=True),
    sa.Column("position", sa.BigInteger, nullable=False),
))

snapshots = evictable(sa.Table(
    "rm_e2b_snapshots", metadata,
    sa.Column("snapshot_id", sa.String(40), primary_key=True),
    sa.Column("names", sa.JSON, nullable=False),
    sa.Column("sandbox_id", sa.String(40), nullable=False),
    sa.Column("cid", sa.BigInteger, nullable=False),
    sa.Column("checkpoint", sa.String(200), nullable=False),
    sa.Column("template_id", sa.String(140), nullable=False),
    sa.Column("memory", sa.Boolean, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
))

templates = sa.Table(
    "rm_e2b_templates", metadata,
    sa.Column("template_id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(140), nullable=False, index=True),
    sa.Column("tags", sa.JSON, nullable=False),  # tag -> build id
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
)

builds = sa.Table(
    "rm_e2b_builds", metadata,
    sa.Column("build_id", sa.String(40), primary_key=True),
    sa.Column("template_id", sa.String(40), nullable=False, index=True),
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("plan", sa.String(64), nullable=False),
    sa.Column("cid", sa.BigInteger, nullable=True),
    sa.Column("checkpoint", sa.String(200), nullable=True),
    sa.Column("workdir", sa.Text, nullable=True),
    sa.Column("reason", sa.JSON, nullable=True),
    sa.Column("logs", sa.Integer, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
)

build_logs = append_only(sa.Table(
    "rm_e2b_build_logs", metadata,
    sa.Column("build_id", sa.String(40), primary_key=True),
    sa.Column("n", sa.Integer, primary_key=True),
    sa.Column("entry", sa.JSON, nullable=False),
))

#: The states a sandbox is listed in (E2B's two) and those whose VM the node holds.
LISTED, LIVE = (RUNNING, PAUSED), (STARTING, RUNNING, PAUSED)


class E2bProjection(Projection):
    name = "e2b"
    version = 2
    tables = (sandboxes, snapshots, templates, builds, build_logs)

    # -- sandboxes ----------------------------------------------------------------------------------
    def on_E2bSandbox_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_e2b_sandboxes", {
            "id": e.originator_id, "sandbox_id": d["sandbox_id"], "cid": d["cid"], "template_id": d["template_id"], "alias": d["alias"],
            "client_id": d["client_id"], "metadata": d["metadata"], "timeout_s": d["timeout_s"],
            "auto_pause": d["auto_pause"], "auto_pause_memory": d.get("auto_pause_memory", True), "cold": False,
            "allow_out": d["allow_out"], "deny_out": d["deny_out"],
            "source": d["source"], "state": STARTING, "started_at": e.at, "end_at": d["end_at"],
            "ended_at": None, "ended_reason": None, "ended_message": None, "position": e.position})

    def on_E2bSandbox_Started(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, e, state=RUNNING)

    def on_E2bSandbox_Paused(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, e, state=PAUSED, cold=e.data.get("memory", True) is False)

    def on_E2bSandbox_Resumed(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, e, state=RUNNING, end_at=e.data["end_at"], auto_pause=e.data["auto_pause"], cold=False)

    def on_E2bSandbox_TimeoutSet(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, e, timeout_s=e.data["timeout_s"], end_at=e.data["end_at"])

    def on_E2bSandbox_NetworkSet(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, e, allow_out=e.data["allow_out"], deny_out=e.data["deny_out"])

    def on_E2bSandbox_Ended(self, e: EventRecord, rows: Rows) -> None:
        self._set(rows, e, state=ENDED, ended_at=e.at, ended_reason=e.data["cause"],
                  ended_message=e.data["message"])

    def _set(self, rows: Rows, e: EventRecord, **change: Any) -> None:
        row = rows.get("rm_e2b_sandboxes", e.originator_id)
        if row is not None:
            rows.put("rm_e2b_sandboxes", {**row, **change})

    # -- snapshots ------------------------------------------------------------------------------------
    def on_E2bSnapshot_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_e2b_snapshots", {
            "snapshot_id": d["snapshot_id"], "names": d["names"], "sandbox_id": d["sandbox_id"], "cid": d["cid"],
            "checkpoint": d["checkpoint"], "template_id": d["template_id"], "memory": d["memory"], "at": e.at,
            "position": e.position})

    # -- templates and builds ---------------------------------------------------------------------------
    def on_E2bTemplate_Created(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_e2b_templates", {"template_id": e.data["template_id"], "name": e.data["name"], "tags": {},
                                      "created_at": e.at, "position": e.position})

    def on_E2bTemplate_Renewed(self, e: EventRecord, rows: Rows) -> None:
        rows.put("rm_e2b_templates", {"template_id": e.data["template_id"], "name": e.data["name"],
                                      "tags": {}, "created_at": e.at, "position": e.position})

    def on_E2bTemplate_BuildRequested(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_e2b_builds", {
            "build_id": d["build_id"], "template_id": d["template_id"], "tags": d["tags"], "status": WAITING,
            "plan": "", "cid": None, "checkpoint": None, "workdir": None, "reason": None, "logs": 0,
            "created_at": e.at, "position": e.position})

    def _build(self, rows: Rows, e: EventRecord, **change: Any) -> dict | None:
        row = rows.get("rm_e2b_builds", e.data["build_id"])
        if row is not None:
            row = {**row, **change}
            rows.put("rm_e2b_builds", row)
        return row

    def _move_tags(self, rows: Rows, build: dict) -> None:
        t = rows.get("rm_e2b_templates", build["template_id"])
        if t is not None:
            rows.put("rm_e2b_templates", {**t, "tags": {**t["tags"], **{tag: build["build_id"] for tag in build["tags"]}}})

    def on_E2bTemplate_BuildStarted(self, e: EventRecord, rows: Rows) -> None:
        self._build(rows, e, status=BUILDING, plan=e.data["plan"], cid=e.data["cid"])

    def on_E2bTemplate_BuildCached(self, e: EventRecord, rows: Rows) -> None:
        src = rows.get("rm_e2b_builds", e.data["from_build"]) or {}
        b = self._build(rows, e, status=READY, plan=e.data["plan"], cid=src.get("cid"),
                        checkpoint=src.get("checkpoint"), workdir=src.get("workdir"))
        if b is not None:
            self._move_tags(rows, b)

    def on_E2bTemplate_BuildLogged(self, e: EventRecord, rows: Rows) -> None:
        b = rows.get("rm_e2b_builds", e.data["build_id"])
        if b is None:
            return
        n = b["logs"]
        for entry in e.data["entries"]:
            rows.put("rm_e2b_build_logs", {"build_id": b["build_id"], "n": n, "entry": entry})
            n += 1
        rows.put("rm_e2b_builds", {**b, "logs": n})

    def on_E2bTemplate_BuildReady(self, e: EventRecord, rows: Rows) -> None:
        b = self._build(rows, e, status=READY, checkpoint=e.data["checkpoint"], workdir=e.data["workdir"])
        if b is not None:
            self._move_tags(rows, b)

    def on_E2bTemplate_BuildFailed(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._build(rows, e, status=ERROR,
                    reason={"message": d["message"], **({"step": d["step"]} if d["step"] else {})})

    def on_E2bTemplate_BuildRemoved(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_e2b_builds", e.data["build_id"])

    def on_E2bTemplate_Deleted(self, e: EventRecord, rows: Rows) -> None:
        tid = e.data["template_id"]
        rows.delete("rm_e2b_templates", tid)
        for b in [b for b in rows.all("rm_e2b_builds") if b["template_id"] == tid]:
            rows.delete("rm_e2b_builds", b["build_id"])



# -- the queries --------------------------------------------------------------------------------------
def sandbox_row(read_models: Any, sandbox_id: str) -> dict | None:
    """A sandbox in any state (an ended one too), or None."""
    found = read_models.rows(sandboxes, sandboxes.c.sandbox_id == sandbox_id)
    return found[0] if found else None


def sandbox_rows(read_models: Any, states: tuple = LISTED, metadata: dict | None = None) -> list[dict]:
    """The sandboxes in these states, oldest first, whose metadata holds every pair asked for."""
    rows = read_models.rows(sandboxes, sandboxes.c.state.in_(states), order_by=sandboxes.c.position)
    return [r for r in rows if all(r["metadata"].get(k) == v for k, v in (metadata or {}).items())]


def sandbox_of_cid(read_models: Any, cid: int) -> dict | None:
    """The live sandbox (starting, running or paused) whose VM has this CID, or None."""
    found = read_models.rows(sandboxes, sandboxes.c.cid == cid, sandboxes.c.state.in_(LIVE))
    return found[0] if found else None


def snapshot_rows(read_models: Any) -> list[dict]:
    return read_models.rows(snapshots, order_by=snapshots.c.position)


def snapshots_named(read_models: Any, ref: str) -> list[dict]:
    """The snapshot whose id is ``ref``, else every snapshot that has the name ``ref``."""
    rows = snapshot_rows(read_models)
    by_id = [r for r in rows if r["snapshot_id"] == ref]
    return by_id or [r for r in rows if ref in r["names"]]


def cids_held_by_snapshots(read_models: Any) -> set[int]:
    return {r["cid"] for r in snapshot_rows(read_models)}


def template_row(read_models: Any, ref: str) -> dict | None:
    """A template by its id or its name, or None."""
    found = read_models.rows(templates, sa.or_(templates.c.template_id == ref, templates.c.name == ref))
    return found[0] if found else None


def template_rows(read_models: Any) -> list[dict]:
    return read_models.rows(templates, order_by=templates.c.position)


def build_rows(read_models: Any, template_id: str) -> list[dict]:
    """A template's builds, in the order they were asked for."""
    return read_models.rows(builds, builds.c.template_id == template_id, order_by=builds.c.position)


def builds_of(read_models: Any) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for b in read_models.rows(builds, order_by=builds.c.position):
        out.setdefault(b["template_id"], []).append(b)
    return out


def build_log(read_models: Any, build_id: str, offset: int, limit: int) -> list[dict]:
    rows = read_models.rows(build_logs, build_logs.c.build_id == build_id, build_logs.c.n >= offset,
                            order_by=build_logs.c.n, limit=limit)
    return [r["entry"] for r in rows]
