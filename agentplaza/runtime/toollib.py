"""The tool library at run time: a program an agent packaged (``plaza_tool_package``, from a file it
shared), the tools each agent is offered (``x_<name>``: the read model's ``offered_for``, by the domain's
one rule), their specs for the model, and the program a call runs, sent to the calling agent's own VM
with the laws' allow (``HarnessSession.op_decide``): the guest harness runs it there
(``vmm/guest/harness.py: tool_library``), never the hub.

A library tool takes ``args`` (a list of strings, its command-line arguments) and ``input`` (its
standard input), as its schema says; the harness runs it in /workspace with ``vm.shell``'s limits."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from vmm.guest.contract import MAX_OUTPUT, SHELL_MAX_TIMEOUT_S, SHELL_TIMEOUT_S

from ..commands import toollib as tc
from ..commands.unit import Done
from ..domain.base import Context, Refusal
from ..domain.toollib import TOOL_PREFIX, offered_name, tool_name
from ..projections import toollib as rm
from .files import files_of
from .library import library_of

#: A program's key in the store starts so.
KEY_PREFIX = "x-"
#: The most arguments a library tool call takes.
MAX_ARGS = 64

INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "args": {"type": "array", "items": {"type": "string"},
                 "description": f"The program's command-line arguments (at most {MAX_ARGS})."},
        "input": {"type": "string", "description": "What the program reads on its standard input."},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": SHELL_MAX_TIMEOUT_S,
                    "description": f"Seconds before it is killed: default {SHELL_TIMEOUT_S}, at most {SHELL_MAX_TIMEOUT_S}."},
    },
    "additionalProperties": False,
}


def is_library_tool(name: object) -> bool:
    return isinstance(name, str) and name.startswith(TOOL_PREFIX)


def package(hub: Any, ctx: Context, author: int, name: str, file: str, description: str) -> Done[dict]:
    """The next version of ``name``: the program is a file the author shared (its own), copied into the
    store under its own key, so deleting the shared file leaves the version whole."""
    n = tool_name(name)
    f, data = files_of(hub).read(file, author)
    if f.owner != author:
        raise Refusal("not_shared_with_you", f"{f.number} is not a file you shared; share your program with "
                      "vm.share_file and package that")
    store = library_of(hub).store
    key = f"{KEY_PREFIX}{f.sha256[:32]}-{hub.commands.new_id()[:12]}"  # (the commands' ids: random on a hub)
    store.put(key, data)
    try:
        return tc.package(hub.commands, ctx, n, author=author, description=description, filename=f.filename,
                          size=len(data), sha256=f.sha256, storage=store.name, key=key)
    except BaseException:
        store.delete(key)
        raise


def offered(hub: Any, cid: int) -> list[dict]:
    """The library tools this agent is offered now (name, version, description, status)."""
    return rm.offered_for(hub.read_models, cid)


def spec(entry: dict) -> dict:
    """A library tool as the model sees it."""
    waits = " (your own version, waiting for the owner's approval: only you are offered it)" \
        if entry["status"] == "pending" else ""
    return {"name": entry["name"], "input_schema": INPUT_SCHEMA,
            "description": f"{entry['description']}\n\nA library tool (version {entry['version']}{waits}): a program "
                           f"an agent packaged; it runs in your own VM, in /workspace. Returns 'exit N' and its "
                           f"output, cut to {MAX_OUTPUT:,} characters."}


def program(hub: Any, name: str, cid: int) -> dict:
    """The program a call of ``x_<name>`` by this agent runs: the version it is offered, with its bytes
    (checked against the digest the log holds), for the agent's own VM."""
    n = tool_name(name)
    t = tc.load(hub.commands, n)
    v = t.version_for(cid)
    if v is None:
        raise Refusal("no_library_tool", f"no library tool {offered_name(n)} is offered to you")
    data = library_of(hub).store.get(v["key"])
    if hashlib.sha256(data).hexdigest() != v["sha256"]:
        raise Refusal("item_corrupt", f"the program of {offered_name(n)} version {v['version']} does not match "
                      "its digest")
    return {"tool": offered_name(n), "version": v["version"], "filename": v["filename"], "sha256": v["sha256"],
            "content": base64.b64encode(data).decode()}
