"""The tool library: programs agents built and packaged as tools (``plaza_tool_package``), each kept as
the next version of a named tool.

A new version is private to its author until the owner approves it (an approval of kind
``tool_version``); an approved version is offered to every agent as ``x_<name>`` and runs inside the
calling agent's own VM. The owner may reject a version instead; a decision is final.

Which version an agent is offered (``LibraryTool.version_for``, the one rule): the newest approved
version; its author is offered its own newer version while it waits (to try it), never another
agent's. A rejected version is offered to nobody.

Rules: a name of ``NAME_PATTERN`` (lower-case letters, digits and single ``_``, starting with a letter, at most
``MAX_NAME_CHARS``); a description of 1 to ``MAX_DESCRIPTION_CHARS``; a program of 1 byte to
``MAX_PROGRAM_BYTES``; at most ``MAX_VERSIONS`` versions of a name.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from jhrl.catalog import LIBRARY_TOOL_PREFIX

from .base import Context, PlazaAggregate, Refusal
from .library import SHA256_PATTERN, STORAGES, file_name

#: A library tool's name; the agents call it ``x_<name>``.
MAX_NAME_CHARS = 40
#: Single underscores only: a model's wire names carry ``vm.shell`` as ``vm__shell``.
NAME_PATTERN = re.compile(r"(?=.{1,40}\Z)[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
TOOL_PREFIX = LIBRARY_TOOL_PREFIX  # the laws' catalogue holds it (and a library tool's risk)
MAX_DESCRIPTION_CHARS = 1000
#: A program is one file, sent from the VM like any shared file (the guest contract's 1 MiB).
MAX_PROGRAM_BYTES = 1 << 20
MAX_VERSIONS = 100
#: A version's states.
PENDING, APPROVED, REJECTED = "pending", "approved", "rejected"


def tool_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:library-tool:{name}")


def tool_name(value: object) -> str:
    """A library tool's name, given bare or as ``x_<name>``; refused ``invalid_name`` otherwise."""
    text = value.strip() if isinstance(value, str) else ""
    if text.startswith(TOOL_PREFIX):
        text = text[len(TOOL_PREFIX):]
    if NAME_PATTERN.fullmatch(text) is None:
        raise Refusal("invalid_name", f"a library tool's name is lower-case letters, digits and _, starting with a "
                      f"letter, at most {MAX_NAME_CHARS} characters (agents call it {TOOL_PREFIX}NAME)")
    return text


def offered_name(name: str) -> str:
    return TOOL_PREFIX + name


def version_ref(name: str, version: int) -> str:
    """What a tool version's approval points at (``approvals.ApprovalRef``)."""
    return f"tool:{name}:{version}"


class LibraryTool(PlazaAggregate):
    """One named tool and its versions."""

    class Created(PlazaAggregate.Created):
        name: str

    class Packaged(PlazaAggregate.Event):
        name: str
        version: int
        author: int
        description: str
        filename: str
        size: int
        sha256: str
        storage: str
        key: str
        approval: str

        def apply(self, t: LibraryTool) -> None:
            t.versions[self.version] = {"version": self.version, "author": self.author, "description": self.description,
                                        "filename": self.filename, "size": self.size, "sha256": self.sha256,
                                        "storage": self.storage, "key": self.key, "approval": self.approval,
                                        "status": PENDING}

    class Approved(PlazaAggregate.Event):
        name: str
        version: int

        def apply(self, t: LibraryTool) -> None:
            t.versions[self.version]["status"] = APPROVED

    class Rejected(PlazaAggregate.Event):
        name: str
        version: int

        def apply(self, t: LibraryTool) -> None:
            t.versions[self.version]["status"] = REJECTED

    def __init__(self, name: str) -> None:
        self.name = name
        self.versions: dict[int, dict[str, Any]] = {}

    @classmethod
    def open(cls, ctx: Context, name: str) -> LibraryTool:
        return cls.start(ctx, id=tool_id(name), name=name)

    def next_version(self) -> int:
        return len(self.versions) + 1

    def package(self, ctx: Context, *, author: int, description: str, filename: str, size: int, sha256: str,
                storage: str, key: str, approval: str) -> int:
        description = description.strip()
        if not description or len(description) > MAX_DESCRIPTION_CHARS:
            raise Refusal("invalid_request", f"a library tool's description is 1 to {MAX_DESCRIPTION_CHARS} characters")
        if not 0 < size <= MAX_PROGRAM_BYTES:
            raise Refusal("item_too_large", f"a library tool's program is 1 byte to {MAX_PROGRAM_BYTES >> 20} MiB")
        if SHA256_PATTERN.fullmatch(sha256) is None or storage not in STORAGES:
            raise Refusal("invalid_request", "a library tool's program is kept with its SHA-256 and its storage")
        if len(self.versions) >= MAX_VERSIONS:
            raise Refusal("too_many_versions", f"{offered_name(self.name)} has {MAX_VERSIONS} versions, the most kept")
        version = self.next_version()
        self.record(self.Packaged, ctx, name=self.name, version=version, author=author, description=description,
                    filename=file_name(filename), size=size, sha256=sha256, storage=storage, key=key, approval=approval)
        return version

    def version_of(self, version: object) -> dict[str, Any]:
        v = self.versions.get(version) if isinstance(version, int) and not isinstance(version, bool) else None
        if v is None:
            raise Refusal("unknown_version", f"{offered_name(self.name)} has no version {version!r}")
        return v

    def decide(self, ctx: Context, version: int, approve: bool) -> None:
        """The owner's decision on a pending version (through its approval; final)."""
        v = self.version_of(version)
        if v["status"] != PENDING:
            raise Refusal("approval_decided", f"{offered_name(self.name)} version {version} was already {v['status']}; "
                          "a decision is final")
        self.record(self.Approved if approve else self.Rejected, ctx, name=self.name, version=version)

    def version_for(self, cid: int) -> dict[str, Any] | None:
        return version_for(self.versions.values(), cid)


def version_for(versions: Iterable[dict[str, Any]], cid: int) -> dict[str, Any] | None:
    """The version of one tool this agent is offered, or None: the newest approved one, or the agent's
    own newer version while it waits (the module's doc: the one rule, for the aggregate and the read model)."""
    versions = list(versions)
    best = max((v["version"] for v in versions if v["status"] == APPROVED), default=0)
    own = [v["version"] for v in versions if v["status"] == PENDING and v["author"] == cid and v["version"] > best]
    chosen = max(own, default=best)
    return next((v for v in versions if v["version"] == chosen), None) if chosen else None
