"""agentplaza volumes ls | create NAME SOURCE | rm NAME [--yes] | roles | mount ROLE NAME... | unmount ROLE:
the shared read-only data volumes, and which of them each role's agents mount (the guide, "Data volumes")."""

from __future__ import annotations

import os

from ..actions import Action, Area, arg
from ..output import table

VOLUME_COLUMNS = ["name", "size", "mounted_by", "source"]


def size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def _ls(d: dict) -> str:
    if not d["volumes"]:
        return "no volumes (make one: agentplaza volumes create NAME SOURCE)"
    return table([{"name": v["name"], "size": size(v["size_bytes"]),
                   "mounted_by": ", ".join(map(str, v["mounted_by"])) or "-", "source": v["source"]}
                  for v in d["volumes"]], VOLUME_COLUMNS)


def _roles(d: dict) -> str:
    return table([{"role": r["role"], "volumes": ", ".join(r["volumes"]) or "-"} for r in d["roles"]],
                 ["role", "volumes"])


AREA = Area("volumes", "shared read-only data volumes, and the ones each role's agents mount", (
    Action("ls", "each volume with its size, the VMs that mount it, and its source", "GET", "/v1/volumes",
           render=_ls, default=True, aliases=("list",)),
    Action("create", "make a volume: an ext4 image of a folder on the hub's machine", "POST", "/v1/volumes",
           args=(arg("name", help="1 to 20 of a-z, 0-9 and -, not starting with -"),
                 arg("source", help="a folder on the hub's machine (made absolute here)")),
           # the source is made absolute before it is sent (the guide); the hub takes no relative path
           body=lambda a: {"name": a.name, "source": os.path.abspath(os.path.expanduser(a.source))},
           render=lambda d: f"volume {d['volume']['name']} made ({size(d['volume']['size_bytes'])}) "
                            f"from {d['volume']['source']}"),
    Action("rm", "remove a volume (refused while a running VM mounts it)", "DELETE", "/v1/volumes/{name}",
           args=(arg("name"),),
           confirm=lambda a: f"Remove volume {a.name}? Its image is deleted and the roles that list it lose it.",
           render=lambda d: f"volume {d['removed']} removed"),
    Action("roles", "each role and the volumes its agents mount", "GET", "/v1/volumes/roles", render=_roles),
    Action("mount", "set a role's volumes (at most 4), replacing its list; agents spawned from now on mount them",
           "PUT", "/v1/volumes/roles/{role}",
           args=(arg("role"), arg("names", nargs="+", metavar="NAME")),
           body=lambda a: {"volumes": a.names},
           render=lambda d: f"role {d['role']} mounts {', '.join(d['volumes'])} (agents spawned from now on)"),
    Action("unmount", "remove a role's list, so its agents mount none", "DELETE", "/v1/volumes/roles/{role}",
           args=(arg("role"),), render=lambda d: f"role {d['role']} mounts no volumes (agents spawned from now on)"),
))
