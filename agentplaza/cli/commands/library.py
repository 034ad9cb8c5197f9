"""agentplaza library list [--search Q] [--type T] | shared [--search Q] [--type T] | show ID | download ID
[-o FILE] | delete ID [--yes]. An ID is a deliverable's (d3) or a shared file's (f3)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from ...wire import LIBRARY_KINDS
from ..actions import Action, Area, arg
from ..client import HubError
from ..env import Env
from ..output import pairs, refuse, table

LIST_COLUMNS = ["number", "title", "kind", "size", "by", "task", "project", "submitted_at"]
SHARED_COLUMNS = ["number", "filename", "kind", "size", "by", "public", "agents", "shared_at"]
SEARCH = (arg("--search", metavar="Q", help="words in the title, description or file name"),
          arg("--type", choices=LIBRARY_KINDS), arg("--limit", type=int, default=100))


def search(a) -> dict:
    return {"q": getattr(a, "search", None), "type": getattr(a, "type", None), "limit": getattr(a, "limit", 100)}


def download(env: Env) -> int:
    """The item's bytes, checked against its digest, to FILE (default: its own name here) or - for stdout."""
    a = env.args
    item = env.client.get(f"/v1/library/{a.id}")["item"]
    r = env.client.http.request("GET", f"/v1/library/{a.id}/content", headers={"Accept": "*/*"})
    if r.status_code != 200:
        try:
            err = r.json().get("error", {})
        except ValueError:  # not the hub's error shape
            err = {}
        raise HubError(err.get("message") or f"the hub answered {r.status_code}", err.get("code"), r.status_code)
    data = r.content
    if hashlib.sha256(data).hexdigest() != item["sha256"]:
        return refuse(f"the download of {item['number']} does not match its digest", "item_corrupt")
    if a.output == "-":
        sys.stdout.buffer.write(data)
        return 0
    out = Path(a.output or item["filename"])
    if out.exists() and not a.output:
        return refuse(f"{out} exists; name the file with -o", "file_exists")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return env.show({"item": item["number"], "file": str(out), "bytes": len(data), "sha256": item["sha256"]}, pairs)


ID = arg("id", metavar="ID", help="a deliverable (d3) or a shared file (f3)")

AREA = Area("library", "the Library: list, show, download and delete the files agents hand in and share", (
    Action("list", "the deliverables, newest first", "GET", "/v1/library", args=SEARCH, query=search,
           render=lambda d: table(d["items"], LIST_COLUMNS), default=True),
    Action("shared", "the files agents shared (the file store), newest first", "GET", "/v1/library/shared",
           args=SEARCH, query=search, render=lambda d: table(d["files"], SHARED_COLUMNS)),
    Action("show", "one deliverable or shared file", "GET", "/v1/library/{id}", args=(ID,),
           render=lambda d: pairs(d["item"])),
    Action("download", "download a deliverable or shared file (checked against its digest)",
           args=(ID, arg("-o", "--output", metavar="FILE", help="where to write it (- for stdout)")),
           run=download),
    Action("delete", "delete a deliverable or shared file and its bytes", "DELETE", "/v1/library/{id}",
           args=(ID,), confirm=lambda a: f"Delete library item {a.id} and its file?",
           render=lambda d: f"deleted {d['deleted']}"),
))
