"""The Library's and the file store's blobs in the simulator: the hub's real services
(``runtime.library.LibraryService``, ``runtime.files.FileStore``) on the simulated hub, their bytes in
the data folder's ``library/`` (``runtime.librarystore.LocalStore``), their facts in the log.

A blob can be torn on disk (``faults.torn_file``): cut to half its length (what a disk, a copy or a
restore that died leaves) or a half-written ``.part`` beside it (what a crash inside the store's own
write leaves, before its rename). The people remember which blobs were cut (``Memory.torn_blobs``);
``invariants.a_torn_blob_is_never_served`` reads every item and shared file back through the
services, as a download does.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from ..commands import files as fc
from ..commands import library as lc
from ..domain.base import Refusal
from ..runtime.files import files_of
from ..runtime.library import library_of

if TYPE_CHECKING:
    from .workload import Memory
    from .world import World


def library(w: World):
    return library_of(w.runtime.hub)


def files(w: World):
    return files_of(w.runtime.hub)


def content(n: int) -> bytes:
    """A blob's bytes, drawn from a step's number (a few bytes to a few kilobytes)."""
    return (f"line {n % 1000} of the result\n" * (1 + n % 200)).encode()


def blobs(w: World, m: Memory) -> list[tuple[str, str, str]]:
    """Every item and shared file the people were told of: (kind, number, key)."""
    out = [("item", n, lc.load(w.cmds, n).key) for n in m.items]
    return out + [("file", n, fc.load(w.cmds, n).key) for n in m.shared]


def served(w: World, kind: str, number: str) -> tuple[bytes, str]:
    """A download, as the owner's routes make it: the bytes and the digest the log holds."""
    if kind == "item":
        item, data = library(w).download(number)
        return data, item.sha256
    f, data = files(w).download(number)
    return data, f.sha256


def problem(w: World, m: Memory) -> str | None:
    """A blob served that is not the one the log names, or a torn one served at all (in words)."""
    for kind, number, key in blobs(w, m):
        try:
            data, sha = served(w, kind, number)
        except Refusal as r:
            if key not in m.torn_blobs and r.code == "item_corrupt":
                return f"{kind} {number} is whole on disk and was refused as corrupt"
            continue
        if hashlib.sha256(data).hexdigest() != sha:
            return f"{kind} {number} was served with {len(data)} bytes that are not the ones its digest names"
        if key in m.torn_blobs:
            return f"{kind} {number}'s blob was cut short on disk and was served as good"
    return None
