"""The vault's files: private (0600) atomic writes, the key file check, zero-and-delete."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

PRIVATE_MODE = 0o600
#: Any permission for the group or other users makes a key file unsafe.
EXPOSED_BITS = 0o077


class KeyFileExposed(Exception):
    """The key file can be read by other users: the hub refuses to start."""


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a 0600 temp file beside ``path``, fsync, rename over ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, PRIVATE_MODE)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: Path, value: Any) -> None:
    write_private(path, json.dumps(value, indent=1, sort_keys=True).encode() + b"\n")


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None


def check_key_file(path: Path) -> None:
    """Raise ``KeyFileExposed`` when other users may read (or write) the key file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    mode = stat.S_IMODE(st.st_mode)
    if mode & EXPOSED_BITS:
        raise KeyFileExposed(
            f"the vault key file {path} is readable by other users (mode {mode:04o}); "
            f"set it to owner-only (chmod 600 {path}) and start the hub again"
        )


def shred(path: Path) -> None:
    """Overwrite a file with zeros, flush it to disk, then delete it."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.write(b"\x00" * size)
        f.flush()
        os.fsync(f.fileno())
    path.unlink()
