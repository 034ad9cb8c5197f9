"""agentplaza tools list | show NAME | program NAME VERSION [-o FILE] | approve NAME VERSION [--reason R] |
reject NAME VERSION [--reason R]: the tool library, the programs agents packaged as tools (offered to
every agent as x_NAME once the owner approves a version). Approve and reject ask first unless --yes; they
decide the version's approval (the same as ``agentplaza approvals approve``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..actions import Action, Area, arg
from ..env import Env
from ..output import pairs, table

COLUMNS = ["tool", "versions", "approved", "pending", "description", "updated_at"]
VERSION_COLUMNS = ["version", "status", "author", "filename", "size", "sha256", "approval", "packaged_at", "decided_at"]
NAME = arg("name", metavar="NAME", help="the tool's name (with or without x_)")
VERSION = arg("version", metavar="VERSION", type=int, help="the version's number")
REASON = arg("--reason", metavar="R", help="why (kept with the decision)")


def show_tool(d: dict) -> str:
    t = d["tool"]
    head = pairs({k: t[k] for k in ("tool", "approved", "pending", "description", "updated_at")})
    return head + "\n\n" + table(t["versions"], VERSION_COLUMNS)


def program(env: Env) -> int:
    """A version's program, to read before deciding: to FILE, or to stdout."""
    a = env.args
    r = env.client.http.request("GET", f"/v1/tools/{a.name}/versions/{a.version}/program", headers={"Accept": "*/*"})
    if r.status_code != 200:
        return env.show(env.client.request("GET", f"/v1/tools/{a.name}/versions/{a.version}/program"), pairs)
    if not a.output:
        sys.stdout.buffer.write(r.content)
        return 0
    fd = os.open(Path(a.output), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(r.content)
    return env.show({"file": a.output, "bytes": len(r.content)}, pairs)


def decided(d: dict) -> str:
    return f"{d['approval']['status']} {d['tool']['tool']} (approval {d['approval']['id']})"


AREA = Area("tools", "the tool library: the programs agents packaged as tools, and the owner's approve and reject", (
    Action("list", "every library tool: its newest approved version and those that wait", "GET", "/v1/tools",
           render=lambda d: table(d["tools"], COLUMNS), default=True),
    Action("show", "one library tool and its versions", "GET", "/v1/tools/{name}", args=(NAME,), render=show_tool),
    Action("program", "a version's program, to read before you decide", args=(NAME, VERSION,
           arg("-o", "--output", metavar="FILE", help="where to write it (default: stdout)")), run=program),
    Action("approve", "approve a version: every agent is offered it as x_NAME", "POST",
           "/v1/tools/{name}/versions/{version}/approve", args=(NAME, VERSION, REASON),
           body=lambda a: {"reason": a.reason}, confirm=lambda a: f"Approve version {a.version} of x_{a.name} for every agent?",
           render=decided),
    Action("reject", "reject a version: it is offered to nobody", "POST", "/v1/tools/{name}/versions/{version}/reject",
           args=(NAME, VERSION, REASON), body=lambda a: {"reason": a.reason},
           confirm=lambda a: f"Reject version {a.version} of x_{a.name}?", render=decided),
))
