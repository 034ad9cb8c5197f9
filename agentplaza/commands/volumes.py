"""The volumes' commands: create, remove, a role's list (``domain.volumes``), and what a spawn composes.

``create`` records a volume whose image the hub has already built (the route builds it first, and deletes
it again if the command refuses); ``remove`` reads which agents spawned with the volume still run and hands
their CIDs to the rule.  ``for_spawn_in`` and ``attach_in`` are a spawn's (and a fork's) steps in the
spawn's own unit: the agent keeps the list it was spawned with, and the volume knows it has a user.
"""

from __future__ import annotations

import uuid

from ..domain.base import Context, Refusal
from ..domain.volumes import VOLUMES_ID, Volumes
from .unit import Commands, Done, Unit


def volumes_in(unit: Unit, ctx: Context) -> Volumes:
    found = unit.get(VOLUMES_ID)
    return found if found is not None else Volumes.open(ctx)


def create(cmds: Commands, ctx: Context, name: str, source: str, image: str, size_bytes: int) -> Done[dict]:
    def decide(unit: Unit) -> dict:
        v = volumes_in(unit, ctx)
        v.create(ctx, name, source, image, size_bytes)
        unit.add(v)
        return {"name": name, **v.volumes[name]}

    return cmds.run(decide)


def running_users(unit: Unit, v: Volumes, name: str) -> list[int]:
    """The CIDs of the agents spawned with ``name`` whose VM still runs (awake or asleep)."""
    out = []
    for agent_id in v.users.get(name, ()):
        a = unit.get(uuid.UUID(hex=agent_id))
        if a is not None and not a.deleted and a.run == "running":
            out.append(a.cid)
    return out


def remove(cmds: Commands, ctx: Context, name: str) -> Done[str]:
    """Remove a volume; its image's file name (the caller deletes the file once this is committed)."""
    def decide(unit: Unit) -> str:
        v = volumes_in(unit, ctx)
        image = v.volume(name)["image"]
        v.remove(ctx, name, running_users(unit, v, name))
        unit.add(v)
        return image

    return cmds.run(decide)


def mount(cmds: Commands, ctx: Context, role: str, names: list[str]) -> Done[list[str]]:
    def decide(unit: Unit) -> list[str]:
        v = volumes_in(unit, ctx)
        out = v.mount(ctx, role, names)
        unit.add(v)
        return out

    return cmds.run(decide)


def unmount(cmds: Commands, ctx: Context, role: str) -> Done[None]:
    def decide(unit: Unit) -> None:
        v = volumes_in(unit, ctx)
        v.unmount(ctx, role)
        unit.add(v)

    return cmds.run(decide)


# -- a spawn's steps ---------------------------------------------------------------------------------
def for_spawn_in(unit: Unit, role: str) -> list[str]:
    """The role's list now (none before the plaza has any volume)."""
    v = unit.get(VOLUMES_ID)
    return v.for_role(role) if v is not None else []


def attach_in(unit: Unit, ctx: Context, agents: list[tuple[uuid.UUID, int]], names: list[str]) -> None:
    """Each new agent mounts ``names``: recorded on the volumes in the spawn's commit (a removal of one of
    them at the same time conflicts with it and is decided again)."""
    if not names:
        return
    v = volumes_in(unit, ctx)
    for agent_id, cid in agents:
        v.attach(ctx, agent_id.hex, cid, names)
    unit.add(v)


def present_in(unit: Unit, cid: int, names: list[str]) -> None:
    """An agent's VM starts again (a restart, a wipe) only with every volume it was spawned with."""
    if not names:
        return
    v = unit.get(VOLUMES_ID)
    gone = [n for n in names if v is None or n not in v.volumes]
    if gone:
        raise Refusal("unknown_volume", f"agent {cid}'s volume {', '.join(gone)} was removed; its VM cannot start "
                                        "without it")
