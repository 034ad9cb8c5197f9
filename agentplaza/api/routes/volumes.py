"""/v1/volumes: the shared read-only data volumes and each role's list (the guide, "Data volumes").

- ``GET /v1/volumes``: each volume with its size, the running VMs that mount it (their CIDs) and its source.
- ``POST /v1/volumes {"name", "source"}``: builds the ext4 image of the folder ``source`` (an absolute path
  on the hub's machine, outside the plaza's own folders) in ``<data>/volumes``, then records the volume;
  a refused record deletes the image again, so a refusal leaves nothing behind.
- ``DELETE /v1/volumes/{name}``: refused while a running VM mounts it; the image goes once it is recorded.
- ``GET /v1/volumes/roles``: each role with its list; ``PUT /v1/volumes/roles/{role} {"volumes": [...]}``
  sets a role's list (1 to 4 names, replacing the one it had); ``DELETE /v1/volumes/roles/{role}`` removes it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
from starlette.requests import Request
from starlette.routing import Route

from vmm import volumes as images

from ...commands import volumes as cmd
from ...domain.base import Refusal
from ...domain.volumes import check_name, check_source
from ...projections import volumes as rm
from ..errors import Body, read_body
from ..kit import api_of, endpoint

log = logging.getLogger("apid.volumes")
#: Folders no volume is made of: what the kernel presents, not files on a disk.
PSEUDO_FOLDERS = ("/proc", "/sys", "/dev", "/run")


class CreateBody(Body):
    name: str
    source: str


class ListBody(Body):
    volumes: list[str]


def volumes_dir(hub) -> Path:
    """Where the hub keeps the images: ``<data>/volumes`` (0700; each image 0600)."""
    return Path(hub.folders.data) / "volumes"


def check_source_folder(hub, source: str) -> str:
    """The source as the hub will read it: an existing folder, not inside the plaza's own folders (a volume
    of the state folder would hand the owner token and the vault's files to every agent that mounts it)."""
    real = os.path.realpath(source)
    for own in (hub.folders.state, hub.folders.config, hub.folders.data):
        mine = os.path.realpath(own)
        if real == mine or real.startswith(mine.rstrip("/") + "/") or mine.startswith(real.rstrip("/") + "/"):
            raise Refusal("invalid_source", f"{source} holds the plaza's own files ({own}); a volume cannot be made of it")
    for pseudo in PSEUDO_FOLDERS:   # the kernel's own files: endless, or devices, never data to share
        if real == pseudo or real.startswith(pseudo + "/"):
            raise Refusal("invalid_source", f"{source} is in {pseudo}, the kernel's own files; a volume cannot be made of it")
    if not os.path.isdir(real):
        raise Refusal("invalid_source", f"{source} is not a folder on the hub's machine")
    return real


@endpoint
async def list_volumes(request: Request) -> dict:
    api = api_of(request)
    return {"volumes": await api.query(rm.volumes, api.hub.read_models)}


@endpoint
async def create_volume(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    body = await read_body(request, CreateBody)
    name = check_name(body.name)
    source = check_source(body.source)
    real = check_source_folder(hub, source)
    if any(v["name"] == name for v in await api.query(rm.volumes, hub.read_models)):
        raise Refusal("volume_exists", f"a volume named {name} exists")   # before building anything
    folder = volumes_dir(hub)
    try:
        image, size = await anyio.to_thread.run_sync(images.build, real, folder, name)
    except images.VolumeError as e:
        raise Refusal("volume_build_failed", str(e)) from None
    ctx = api.context(request)
    try:
        made = await api.command(lambda: cmd.create(hub.commands, ctx, name, source, image, size))
    except BaseException:
        images.remove(folder, image)   # the record was refused (or failed): the image goes with it
        raise
    return {"volume": {"name": made["name"], "size_bytes": made["size_bytes"], "source": made["source"],
                       "mounted_by": []}}


@endpoint
async def remove_volume(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    name = check_name(request.path_params["name"])
    image = await api.command(lambda: cmd.remove(hub.commands, api.context(request), name))
    try:
        images.remove(volumes_dir(hub), image)
    except OSError as e:   # recorded as removed; a file left behind is the operator's to delete
        log.warning("volume %s removed, but its image %s stays: %s", name, image, e)
    return {"removed": name}


@endpoint
async def list_roles(request: Request) -> dict:
    api = api_of(request)
    return {"roles": await api.query(rm.roles, api.hub.read_models)}


@endpoint
async def mount(request: Request) -> dict:
    api = api_of(request)
    role = request.path_params["role"]
    body = await read_body(request, ListBody)
    names = await api.command(lambda: cmd.mount(api.hub.commands, api.context(request), role, body.volumes))
    return {"role": role, "volumes": names}


@endpoint
async def unmount(request: Request) -> dict:
    api = api_of(request)
    role = request.path_params["role"]
    await api.command(lambda: cmd.unmount(api.hub.commands, api.context(request), role))
    return {"role": role, "volumes": []}


ROUTES = [
    Route("/v1/volumes", list_volumes),
    Route("/v1/volumes", create_volume, methods=["POST"]),
    Route("/v1/volumes/roles", list_roles),
    Route("/v1/volumes/roles/{role}", mount, methods=["PUT"]),
    Route("/v1/volumes/roles/{role}", unmount, methods=["DELETE"]),
    Route("/v1/volumes/{name}", remove_volume, methods=["DELETE"]),
]
