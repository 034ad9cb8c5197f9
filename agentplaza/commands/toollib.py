"""The tool library's commands (see ``domain.toollib``): a program packaged as the next version of a
named tool, with its approval of kind ``tool_version`` in the same commit; the owner's decision on it
(through the approvals queue: ``approvals.decide_in`` calls ``decided_in``, so ``agentplaza approvals
approve`` and ``agentplaza tools approve`` are one decision)."""

from __future__ import annotations

from typing import Any

from ..domain.approvals import Approval
from ..domain.base import Context, Refusal
from ..domain.toollib import LibraryTool, offered_name, tool_id, tool_name, version_ref
from . import approvals
from .unit import Commands, Done, Unit


def load(cmds: Commands, name: str) -> LibraryTool:
    n = tool_name(name)
    t = Unit(cmds.store).get(tool_id(n))
    if not isinstance(t, LibraryTool):
        raise Refusal("no_library_tool", f"no library tool {offered_name(n)}")
    return t


def package(cmds: Commands, ctx: Context, name: str, *, author: int, description: str, filename: str, size: int,
            sha256: str, storage: str, key: str) -> Done[dict[str, Any]]:
    """The next version of ``name`` (the tool is made with its first), private to its author until the
    owner decides its approval."""
    n = tool_name(name)

    def decide(unit: Unit) -> dict[str, Any]:
        t = unit.get(tool_id(n)) or LibraryTool.open(ctx, n)
        version = t.next_version()
        number = approvals.Maker(unit, ctx).make(
            "tool_version", f"Version {version} of library tool {offered_name(n)}, packaged by agent {author}",
            agent=str(author), ref=version_ref(n, version),
            detail={"tool": n, "version": version, "author": author, "sha256": sha256, "description": description[:300]})
        t.package(ctx, author=author, description=description, filename=filename, size=size, sha256=sha256,
                  storage=storage, key=key, approval=number)
        unit.add(t)
        return {"tool": offered_name(n), "version": version, "approval": number, "status": "pending"}

    return cmds.run(decide)


def decided_in(unit: Unit, ctx: Context, a: Approval, approve: bool) -> None:
    """The owner's decision on a tool version's approval, in the approval's own commit."""
    t = unit.get(tool_id(tool_name(a.detail.get("tool"))))
    if not isinstance(t, LibraryTool):
        raise Refusal("no_library_tool", f"approval {a.number} names no library tool")
    t.decide(ctx, a.detail.get("version"), approve)
    unit.add(t)


def decide(cmds: Commands, ctx: Context, name: str, version: int, approve: bool) -> Done:
    """Approve or reject one version (its approval decided, with what it does)."""
    number = load(cmds, name).version_of(version)["approval"]
    return approvals.decide(cmds, ctx, number, approve)
