"""The volumes (``domain.volumes``), each role's list, and which agents' VMs mount each volume.

``rm_volume_mounts`` is one row per agent spawned with volumes (its CID, the names in order, its run state
as the agent's own events say); a volume's "VMs that mount it" are those rows whose agent still runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from jhrl.catalog import ROLES

from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

volumes_table = sa.Table(
    "rm_volumes", metadata,
    sa.Column("name", sa.String(20), primary_key=True),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("image", sa.String(40), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)
volume_roles = sa.Table(
    "rm_volume_roles", metadata,
    sa.Column("role", sa.String(40), primary_key=True),
    sa.Column("names", sa.JSON, nullable=False),
)
volume_mounts = sa.Table(
    "rm_volume_mounts", metadata,
    sa.Column("agent_id", sa.String(36), primary_key=True),
    sa.Column("cid", sa.Integer, nullable=False),
    sa.Column("names", sa.JSON, nullable=False),
    sa.Column("run", sa.String(10), nullable=False),   # running (awake or asleep), stopped, retired
)


class VolumesProjection(Projection):
    name = "volumes"
    version = 1
    tables = (volumes_table, volume_roles, volume_mounts)

    def on_Volumes_VolumeCreated(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_volumes", {"name": d["name"], "source": d["source"], "image": d["image"],
                                "size_bytes": d["size_bytes"], "created_at": e.at})

    def on_Volumes_VolumeRemoved(self, e: EventRecord, rows: Rows) -> None:
        name = e.data["name"]
        rows.delete("rm_volumes", name)
        for role in ROLES:   # at most the catalogue's roles have a list: O(17)
            r = rows.get("rm_volume_roles", role)
            if r is not None and name in r["names"]:
                kept = [n for n in r["names"] if n != name]
                if kept:
                    rows.put("rm_volume_roles", {"role": role, "names": kept})
                else:
                    rows.delete("rm_volume_roles", role)

    def on_Volumes_RoleListSet(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        if d["names"]:
            rows.put("rm_volume_roles", {"role": d["role"], "names": list(d["names"])})
        else:
            rows.delete("rm_volume_roles", d["role"])

    # -- the agents' own run state, for the agents spawned with volumes -------------------------
    def on_Agent_Created(self, e: EventRecord, rows: Rows) -> None:
        names = e.data.get("volumes") or []
        if names:
            rows.put("rm_volume_mounts", {"agent_id": e.originator_id, "cid": e.data["cid"], "names": list(names),
                                          "run": "running"})

    def _run(self, e: EventRecord, rows: Rows, run: str) -> None:
        r = rows.get("rm_volume_mounts", e.originator_id)
        if r is not None:
            rows.put("rm_volume_mounts", {**r, "run": run})

    def on_Agent_Stopped(self, e: EventRecord, rows: Rows) -> None:
        self._run(e, rows, "stopped")

    def on_Agent_Restarted(self, e: EventRecord, rows: Rows) -> None:
        self._run(e, rows, "running")

    def on_Agent_Wiped(self, e: EventRecord, rows: Rows) -> None:
        self._run(e, rows, "running")

    def on_Agent_Retired(self, e: EventRecord, rows: Rows) -> None:
        self._run(e, rows, "retired")

    def on_Agent_Deleted(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_volume_mounts", e.originator_id)


# -- Queries ---------------------------------------------------------------------------------------------


def _running_mounts(read_models: ReadModels) -> list[dict]:
    return read_models.rows(volume_mounts, volume_mounts.c.run == "running", order_by=volume_mounts.c.cid)


def volumes(read_models: ReadModels) -> list[dict]:
    """Every volume by name: size, source, and the CIDs of the running VMs that mount it."""
    mounts = _running_mounts(read_models)
    out = []
    for v in read_models.rows(volumes_table, order_by=volumes_table.c.name):
        out.append({"name": v["name"], "size_bytes": v["size_bytes"], "source": v["source"],
                    "created_at": v["created_at"],
                    "mounted_by": [m["cid"] for m in mounts if v["name"] in m["names"]]})
    return out


def roles(read_models: ReadModels) -> list[dict]:
    """Each role of the catalogue with the volumes its agents mount (an empty list: none)."""
    lists = {r["role"]: r["names"] for r in read_models.rows(volume_roles)}
    return [{"role": role, "volumes": list(lists.get(role, []))} for role in sorted(ROLES)]


def role_list(read_models: ReadModels, role: str) -> list[str]:
    found = read_models.rows(volume_roles, volume_roles.c.role == role)
    return list(found[0]["names"]) if found else []


def of_agent(read_models: ReadModels, agent_id: str) -> list[dict]:
    """What a node needs to give this agent's VM its volumes: [{name, image}] in order (a volume removed
    since has no image: the node refuses to start the VM and says which)."""
    found = read_models.rows(volume_mounts, volume_mounts.c.agent_id == agent_id)
    if not found:
        return []
    images = {v["name"]: v["image"] for v in read_models.rows(volumes_table)}
    return [{"name": n, "image": images.get(n, "")} for n in found[0]["names"]]


def counts(read_models: ReadModels) -> dict:
    return {"volumes": len(read_models.rows(volumes_table))}
