"""The Library of deliverables: the bytes in the library's store (``librarystore``), the facts in the
log (``commands.library``). An item's bytes are written before it is recorded (a refused item's
bytes are removed again); a download is checked against the digest the log holds."""

from __future__ import annotations

import hashlib
from typing import Any

from ..commands import library as lc
from ..commands.unit import Done
from ..domain.base import Context, Refusal
from ..domain.library import MAX_ITEM_BYTES, Item, file_name
from .librarystore import open_store, read_checked, sniff


class LibraryService:
    def __init__(self, hub: Any):
        self.cmds = hub.commands
        self.store = open_store(hub.folders.data)

    def submit(self, ctx: Context, data: bytes, filename: str, title: str, description: str = "",
               task: str | None = None, project: str | None = None) -> Done[str]:
        if not data or len(data) > MAX_ITEM_BYTES:
            raise Refusal("item_too_large", f"a deliverable is 1 byte to {MAX_ITEM_BYTES >> 20} MiB")
        name = file_name(filename)
        digest = hashlib.sha256(data).hexdigest()
        key = f"{digest[:32]}-{self.cmds.new_id()[:12]}"  # (the commands' ids: random on a hub)
        self.store.put(key, data)
        try:
            return lc.submit(self.cmds, ctx, title=title, description=description, filename=name,
                             media_type=sniff(data, name), size=len(data), sha256=digest, storage=self.store.name,
                             key=key, task=task, project=project)
        except BaseException:
            self.store.delete(key)
            raise

    def download(self, number: str) -> tuple[Item, bytes]:
        item = lc.load(self.cmds, number)
        return item, read_checked(self.store, item.key, item.sha256, item.number)

    def delete(self, ctx: Context, number: str) -> Done[Item]:
        done = lc.delete(self.cmds, ctx, number)
        self.store.delete(done.value.key)
        return done


def library_of(hub: Any) -> LibraryService:
    found = hub.__dict__.get("_library")
    if found is None:
        found = hub.__dict__["_library"] = LibraryService(hub)
    return found
