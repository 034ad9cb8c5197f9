"""The plaza's file store: the files agents share (``vm.share_file``), kept in the library's store (one
place for files: ``runtime.librarystore``), numbered ``f1``, ``f2`` ...

A shared file is public by default: every agent may read it. An agent can share it with only the
agents it names (``agents``: their CIDs; the sharer always may). A message or a board post can carry a
shared file by its number, and an agent reads one by its number (``plaza_file_read``). The owner sees
every shared file on the Library screen and can delete one.

Rules: a file of 1 byte to ``MAX_FILE_BYTES`` (the guest contract's limit for what a VM sends); a base
name (``library.file_name``); at most ``MAX_AUDIENCE`` named agents, each a CID. A deleted file stays
deleted. Who may read is ``may_read``, and nowhere else.
"""

from __future__ import annotations

import uuid

from .base import Context, PlazaAggregate, Refusal
from .library import SHA256_PATTERN, STORAGES, file_name
from .names import short_number

#: The largest shared file: what a VM may send (``vmm.guest.contract.MAX_FILE``, 1 MiB).
MAX_FILE_BYTES = 1 << 20
#: The most agents one file is shared with by name.
MAX_AUDIENCE = 32
#: The path in the workspace it came from, as kept (cut to this many characters).
MAX_PATH_CHARS = 300
#: Shared files are numbered f1, f2 ...
FILE_PREFIX = "f"


def file_id(number: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:shared-file:{number}")


def file_number(value: object) -> str:
    number = short_number(FILE_PREFIX, value)
    if number is None:
        text = str(value).strip()[:40] if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
        raise Refusal("no_shared_file", f"no shared file {text!r}; shared files are numbered f1, f2 ...")
    return number


def audience(agents: object) -> list[int]:
    """The CIDs a file is shared with by name: distinct, sorted; refused ``invalid_request`` otherwise."""
    if not isinstance(agents, list) or len(agents) > MAX_AUDIENCE or any(
            isinstance(a, bool) or not isinstance(a, int) or a < 0 for a in agents):
        raise Refusal("invalid_request", f"a file is shared with at most {MAX_AUDIENCE} agents, each named by its CID")
    return sorted(set(agents))


class SharedFile(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        number: str
        owner: int
        path: str
        filename: str
        media_type: str
        size: int
        sha256: str
        storage: str
        key: str
        public: bool
        agents: list[int]

    class Deleted(PlazaAggregate.Event):
        number: str

        def apply(self, f: SharedFile) -> None:
            f.deleted = True

    def __init__(self, number: str, owner: int, path: str, filename: str, media_type: str, size: int, sha256: str,
                 storage: str, key: str, public: bool, agents: list[int]) -> None:
        self.number, self.owner, self.path, self.filename = number, owner, path, filename
        self.media_type, self.size, self.sha256, self.storage, self.key = media_type, size, sha256, storage, key
        self.public, self.agents = public, list(agents)
        self.deleted = False

    @classmethod
    def share(cls, ctx: Context, number: str, *, owner: int, path: str, filename: str, media_type: str, size: int,
              sha256: str, storage: str, key: str, agents: list[int] | None) -> SharedFile:
        """``agents`` None: public; a list: only those agents (and the sharer)."""
        if not 0 < size <= MAX_FILE_BYTES:
            raise Refusal("item_too_large", f"a shared file is 1 byte to {MAX_FILE_BYTES >> 20} MiB")
        if SHA256_PATTERN.fullmatch(sha256) is None or storage not in STORAGES:
            raise Refusal("invalid_request", "a shared file is kept with its SHA-256 and its storage")
        named = [] if agents is None else audience(agents)
        return cls.start(ctx, id=file_id(number), number=number, owner=owner, path=path[:MAX_PATH_CHARS],
                         filename=file_name(filename), media_type=media_type, size=size, sha256=sha256,
                         storage=storage, key=key, public=agents is None, agents=named)

    def may_read(self, cid: int) -> bool:
        """The one rule of who may read a shared file: anyone when public, else its sharer and the named."""
        return not self.deleted and (self.public or cid == self.owner or cid in self.agents)

    def check_readable(self, cid: int) -> None:
        if self.deleted:
            raise Refusal("no_shared_file", f"shared file {self.number} was deleted")
        if not self.may_read(cid):
            raise Refusal("not_shared_with_you", f"shared file {self.number} is shared only with the agents its "
                          "sharer named")

    def delete(self, ctx: Context) -> None:
        if self.deleted:
            raise Refusal("no_shared_file", f"shared file {self.number} was deleted")
        self.record(self.Deleted, ctx, number=self.number)
