"""Shared read-only data volumes and the lists of them each role's agents mount.

The guide, "Data volumes" and "Giving volumes to a role":

- "A volume is an ext4 image that lives on the hub's machine. The owner makes it with agentplaza volumes
  create <name> <source>. The source is a path on the hub's machine, and the CLI makes it absolute."
- "A volume's name is 1 to 20 characters from a-z, 0-9 and -. It cannot start with -."  (``NAME_RE``)
- "agentplaza volumes rm <name> removes a volume. The hub refuses while a running VM mounts it."
- "Each role has a list of volume names ... A role takes at most 4 volumes."  (``MAX_PER_ROLE``)
- "The list applies to agents that are spawned from then on. Agents already running keep the volumes
  they were spawned with."  The spawn records the list on the agent (``Agent.Created.volumes``) and here
  (``Attached``), in the spawn's own commit: a spawn and a removal of the same volume conflict, and the
  second is decided again on fresh state.
- "A VM takes at most 4 volumes."  (``MAX_PER_VM``)
- "A VM moved to another node needs a volume with the same name on that node."  (``check_move``)

One aggregate, ``Volumes`` (a singleton), holds every volume, every role's list and which agents were
spawned with each volume; the rules, in the order they are applied, are in each method. Which of those
agents still run is the agents' own state: the remove command reads it and hands the running CIDs in.
Pure: no I/O; the image is built (and deleted) by the hub around these decisions.
"""

from __future__ import annotations

import posixpath
import re

from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import known_role

VOLUMES_ID = fixed_id("volumes")
#: A volume's name, matched whole.
NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,19}")
#: "A role takes at most 4 volumes."
MAX_PER_ROLE = 4
#: "A VM takes at most 4 volumes." (vmm.backend.MAX_VOLUMES holds the machine to the same number.)
MAX_PER_VM = 4
#: Volumes the plaza keeps at once (this project's limit: every list has one).
MAX_VOLUMES = 64
#: The image's file in the hub's volumes folder: the name and 8 hex digits, so a volume made again after
#: a removal never shares a file with the old one.
IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,19}-[0-9a-f]{8}\.ext4")
#: The longest source path kept.
SOURCE_CHARS_MAX = 4096
#: The largest image (MiB): a bigger source is refused before anything is built.
SIZE_MIB_MAX = 65536

NAME_RULE = "a volume's name is 1 to 20 characters from a-z, 0-9 and -, and cannot start with -"


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise Refusal("invalid_volume_name", f"{name!r}: {NAME_RULE}")
    return name


def check_source(source: object) -> str:
    """An absolute, normalised path (the CLI makes it absolute; the hub takes nothing relative)."""
    if not isinstance(source, str) or not source or len(source) > SOURCE_CHARS_MAX or "\x00" in source:
        raise Refusal("invalid_source", f"a volume's source is a path of at most {SOURCE_CHARS_MAX} characters")
    if not posixpath.isabs(source):
        raise Refusal("invalid_source", f"{source!r} is not an absolute path on the hub's machine")
    return posixpath.normpath(source)


def check_list(names: object, limit: int = MAX_PER_ROLE, what: str = "a role") -> list[str]:
    """A list of 1 to ``limit`` distinct volume names, in the order given (the order a VM mounts them)."""
    if not isinstance(names, (list, tuple)) or not names:
        raise Refusal("invalid_volume_list", "give at least one volume name (unmount removes a role's list)")
    if len(names) > limit:
        raise Refusal("too_many_volumes", f"{what} takes at most {limit} volumes; {len(names)} given")
    out = [check_name(n) for n in names]
    if len(set(out)) != len(out):
        raise Refusal("invalid_volume_list", "a volume is named twice")
    return out


def check_move(volumes: list[str], on_target: list[str] | set[str], target: str) -> None:
    """A move needs a volume of the same name on the target: every volume the VM mounts."""
    missing = [v for v in volumes if v not in set(on_target)]
    if missing:
        raise Refusal("volume_missing_on_target",
                      f"a move needs a volume of the same name on the target: {target} has no "
                      f"{', '.join(missing)}")


class Volumes(PlazaAggregate):
    family = "volumes"

    class Created(PlazaAggregate.Created):
        pass

    class VolumeCreated(PlazaAggregate.Event):
        name: str
        source: str
        image: str        # the image's file name in the hub's volumes folder
        size_bytes: int

        def apply(self, v: Volumes) -> None:
            v.volumes[self.name] = {"source": self.source, "image": self.image, "size_bytes": self.size_bytes}
            v.users[self.name] = []

    class VolumeRemoved(PlazaAggregate.Event):
        """The volume is gone, and out of every role's list."""
        name: str

        def apply(self, v: Volumes) -> None:
            v.volumes.pop(self.name, None)
            v.users.pop(self.name, None)
            for role, names in list(v.roles.items()):
                if self.name in names:
                    kept = [n for n in names if n != self.name]
                    if kept:
                        v.roles[role] = kept
                    else:
                        del v.roles[role]

    class RoleListSet(PlazaAggregate.Event):
        """A role's list, replacing the one it had; empty: the role mounts none."""
        role: str
        names: list[str]

        def apply(self, v: Volumes) -> None:
            if self.names:
                v.roles[self.role] = list(self.names)
            else:
                v.roles.pop(self.role, None)

    class Attached(PlazaAggregate.Event):
        """An agent was spawned (or forked) with these volumes."""
        agent_id: str
        cid: int
        names: list[str]

        def apply(self, v: Volumes) -> None:
            for n in self.names:
                v.users.setdefault(n, []).append(self.agent_id)

    def __init__(self) -> None:
        self.volumes: dict[str, dict] = {}
        self.roles: dict[str, list[str]] = {}
        self.users: dict[str, list[str]] = {}    # volume -> the agents spawned with it (hex ids)

    @classmethod
    def open(cls, ctx: Context) -> Volumes:
        return cls.start(ctx, id=VOLUMES_ID)

    @staticmethod
    def _owner(ctx: Context) -> None:
        if ctx.actor != "owner":
            raise Refusal("owner_only", "only the owner manages volumes")

    def volume(self, name: str) -> dict:
        """The volume ``name`` (its source, image, size); refused when there is none."""
        found = self.volumes.get(check_name(name))
        if found is None:
            raise Refusal("unknown_volume", f"no volume {name}")
        return found

    # -- the owner ------------------------------------------------------------------------------
    def create(self, ctx: Context, name: str, source: str, image: str, size_bytes: int) -> None:
        """Rules: the owner's; a good name; not taken; room for one more; an absolute source; the image's
        file named as the hub names it; a size."""
        self._owner(ctx)
        check_name(name)
        if name in self.volumes:
            raise Refusal("volume_exists", f"a volume named {name} exists")
        if len(self.volumes) >= MAX_VOLUMES:
            raise Refusal("too_many_volumes", f"the plaza keeps at most {MAX_VOLUMES} volumes")
        source = check_source(source)
        if not isinstance(image, str) or not IMAGE_RE.fullmatch(image) or not image.startswith(name + "-"):
            raise ValueError(f"the image of volume {name} is named {name}-<8 hex>.ext4, not {image!r}")
        if not isinstance(size_bytes, int) or not 0 < size_bytes <= SIZE_MIB_MAX << 20:
            raise ValueError(f"a volume's image is 1 byte to {SIZE_MIB_MAX} MiB")
        self.record(self.VolumeCreated, ctx, name=name, source=source, image=image, size_bytes=size_bytes)

    def remove(self, ctx: Context, name: str, running_cids: list[int]) -> None:
        """Rules: the owner's; a volume that exists; no running VM mounts it (``running_cids``: the CIDs of
        the agents spawned with it that still run, asleep or awake). Its roles' lists lose it."""
        self._owner(ctx)
        self.volume(name)
        if running_cids:
            raise Refusal("volume_in_use", f"volume {name} is mounted by the running VM"
                                           f"{'s' if len(running_cids) > 1 else ''} of agent "
                                           f"{', '.join(map(str, sorted(running_cids)))}; stop them first")
        self.record(self.VolumeRemoved, ctx, name=name)

    def mount(self, ctx: Context, role: str, names: list[str]) -> list[str]:
        """Rules: the owner's; a known role; 1 to 4 distinct names; each an existing volume. It replaces the
        role's list."""
        self._owner(ctx)
        known_role(role)
        names = check_list(names)
        for n in names:
            self.volume(n)
        if self.roles.get(role) == names:
            raise Refusal("no_change", f"role {role} already mounts {', '.join(names)}")
        self.record(self.RoleListSet, ctx, role=role, names=names)
        return names

    def unmount(self, ctx: Context, role: str) -> None:
        """Rules: the owner's; a known role that has a list."""
        self._owner(ctx)
        known_role(role)
        if role not in self.roles:
            raise Refusal("no_change", f"role {role} mounts no volumes")
        self.record(self.RoleListSet, ctx, role=role, names=[])

    # -- spawns ---------------------------------------------------------------------------------
    def for_role(self, role: str) -> list[str]:
        return list(self.roles.get(role, ()))

    def attach(self, ctx: Context, agent_id: str, cid: int, names: list[str]) -> None:
        """A new agent mounts ``names`` (its role's list, or its source's for a fork): each must exist."""
        names = check_list(names, MAX_PER_VM, "a VM")
        for n in names:
            self.volume(n)
        self.record(self.Attached, ctx, agent_id=agent_id, cid=cid, names=names)

    def images(self, names: list[str]) -> list[dict]:
        """What a node needs to hand each volume to a VM: its name and its image's file, in order."""
        return [{"name": n, "image": self.volume(n)["image"]} for n in names]
