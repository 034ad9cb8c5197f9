"""The plaza's file store: the files agents share (``vm.share_file``), their bytes in the library's store
(one place for files: ``librarystore``, a local folder or the bucket), their facts in the log
(``commands.files``). Bytes are written before the file is recorded (a refused file's bytes are removed
again); a read is checked against the digest the log holds, and against who may read it
(``SharedFile.may_read``)."""

from __future__ import annotations

import hashlib
from typing import Any

from ..commands import files as fc
from ..commands.unit import Done
from ..domain.base import Context, Refusal
from ..domain.files import MAX_FILE_BYTES, SharedFile, file_number
from ..domain.library import file_name
from .library import library_of
from .librarystore import read_checked, sniff

#: A shared file's key in the store starts so (a deliverable's is its digest alone).
KEY_PREFIX = "f-"


class FileStore:
    def __init__(self, hub: Any):
        self.cmds = hub.commands
        self.store = library_of(hub).store

    def share(self, ctx: Context, owner: int, path: str, data: bytes, agents: list[int] | None = None) -> Done[str]:
        """Keep ``data`` (a file of the agent's workspace at ``path``) as a shared file: public when
        ``agents`` is None, else only for those agents (and the sharer)."""
        if not data or len(data) > MAX_FILE_BYTES:
            raise Refusal("item_too_large", f"a shared file is 1 byte to {MAX_FILE_BYTES >> 20} MiB")
        name = file_name(path)
        digest = hashlib.sha256(data).hexdigest()
        key = f"{KEY_PREFIX}{digest[:32]}-{self.cmds.new_id()[:12]}"
        self.store.put(key, data)
        try:
            return fc.share(self.cmds, ctx, owner=owner, path=path, filename=name, media_type=sniff(data, name),
                            size=len(data), sha256=digest, storage=self.store.name, key=key, agents=agents)
        except BaseException:
            self.store.delete(key)
            raise

    def bytes_of(self, f: SharedFile) -> bytes:
        return read_checked(self.store, f.key, f.sha256, f.number)

    def read(self, number: str, cid: int) -> tuple[SharedFile, bytes]:
        """The file and its bytes, for an agent that may read it."""
        f = fc.readable(self.cmds, number, cid)
        return f, self.bytes_of(f)

    def download(self, number: str) -> tuple[SharedFile, bytes]:
        """The owner's download: any shared file."""
        f = fc.load(self.cmds, number)
        return f, self.bytes_of(f)

    def delete(self, ctx: Context, number: str) -> Done[SharedFile]:
        done = fc.delete(self.cmds, ctx, file_number(number))
        self.store.delete(done.value.key)
        return done


def files_of(hub: Any) -> FileStore:
    found = hub.__dict__.get("_files")
    if found is None:
        found = hub.__dict__["_files"] = FileStore(hub)
    return found
