"""Owner-only files: the rule apid checks before it starts.

The state, config and data folders must be ``PRIVATE_FOLDER_MODE`` (0700) and
every file in them the hub relies on (the owner token, the hub document, the
store, the keys) ``PRIVATE_FILE_MODE`` (0600): any read or write permission for
the group or other users (``EXPOSED_BITS``) lets another local user read a
key, or swap the owner token's hash.  A folder or file that breaks the rule
stops the start with one line that names it, its mode, and the ``chmod``
that fixes it.  Files that do not exist yet are made private when they are made.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

PRIVATE_FOLDER_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
#: Any permission for the group or other users.
EXPOSED_BITS = 0o077
_READ_BITS = stat.S_IRGRP | stat.S_IROTH
_WRITE_BITS = stat.S_IWGRP | stat.S_IWOTH


class Exposed(Exception):
    """A folder or file of the plaza that other users may read or write."""


def _problem(path: Path, what: str, fix_mode: int) -> str | None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    if not mode & EXPOSED_BITS:
        return None
    how = [w for w, bits in (("readable", _READ_BITS), ("writable", _WRITE_BITS)) if mode & bits] or ["open"]
    return (f"the {what} {path} is {' and '.join(how)} by other users (mode {mode:04o}); "
            f"fix it with: chmod {fix_mode:o} {path}")


def check_private(folders: Iterable[tuple[Path, str]], files: Iterable[tuple[Path, str]]) -> None:
    """Raise ``Exposed`` for the first folder, then file, that breaks the rule.
    Each is (path, what it is, in words: "state folder", "owner token" ...)."""
    for path, what in folders:
        problem = _problem(path, what, PRIVATE_FOLDER_MODE)
        if problem:
            raise Exposed(problem)
    for path, what in files:
        problem = _problem(path, what, PRIVATE_FILE_MODE)
        if problem:
            raise Exposed(problem)


def make_private_file(path: Path) -> None:
    """Create ``path`` empty and 0600 if it is missing (so a library that would make
    it with the process's umask finds it made; SQLite gives its -wal and -shm the
    store file's mode)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


#: The umask apid and noded run under: whatever the caller's, what they make is 0600 and 0700.
PRIVATE_UMASK = 0o077


def private_umask() -> int:
    """Make every file and folder this process creates from now on owner-only (a library that creates
    a file with 0644, or a folder with 0755, gets 0600 and 0700); the umask it had before."""
    return os.umask(PRIVATE_UMASK)


def write_private_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` whole as 0600, atomically: a reader sees the old contents or the new, never a
    half-written or empty file (the node's status file is read while the uplink rewrites it)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, PRIVATE_FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
