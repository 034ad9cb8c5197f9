"""Moving a sleeping machine: export its files here, import them elsewhere.

The export reads each file in 4 MiB blocks (only the regions the filesystem
says hold data) and hands them out as 512 KiB pieces; a piece that is all
zeros is not sent, and the import leaves a hole in its place, so a sparse
image crosses at the size of its data. Nothing ever holds a whole image in
memory. An export holds its files open from the start, so the bytes it hashes
are the bytes it sends; it stops nothing on the source. An import writes into
a staging folder beside the target and only ``finish()`` (every file complete,
every digest matching) renames it into place as a sleeping machine. A move that
fails before that leaves the machine where it was: ``abort()`` drops the
staging folder and the source still has everything.

Per file the digest is SHA-256 over (offset, piece) of every non-zero piece
plus the file's size, computed by both sides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import struct
import time
from collections.abc import Iterator
from pathlib import Path

from .disks import data_extents

READ_BLOCK = 4 << 20                # files are read in 4 MiB blocks
PIECE = 512 << 10                   # and sent in 512 KiB pieces
EXPORT_TTL_S = 3600                 # an export or import not finished in an hour is dropped
SKIP = ("run", "jail")              # per-boot folders that do not move


class MoveError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class Piece:
    file: int                       # index into the export's file list
    offset: int
    data: bytes


def _digest_update(h, offset: int, data: bytes) -> None:
    h.update(struct.pack(">QI", offset, len(data)))
    h.update(data)


class Export:
    """The files of a sleeping machine's folder, open, ready to stream."""

    def __init__(self, machine_dir: os.PathLike) -> None:
        self.dir = Path(machine_dir)
        self.name = self.dir.name
        self.created = time.monotonic()
        self.files: list = []           # [{"path", "size", "mode"}]
        self._fds: list = []
        try:
            for p in sorted(self.dir.rglob("*")):
                rel = p.relative_to(self.dir)
                if rel.parts[0] in SKIP or not p.is_file() or p.name.endswith((".new", ".part")):
                    continue
                fd = os.open(p, os.O_RDONLY)
                st = os.fstat(fd)
                self._fds.append(fd)
                self.files.append({"path": str(rel), "size": st.st_size, "mode": st.st_mode & 0o777})
        except BaseException:
            self.close()
            raise
        self.digests: list = [None] * len(self.files)
        self.bytes_read = 0
        self.bytes_sent = 0

    @property
    def expired(self) -> bool:
        return time.monotonic() - self.created > EXPORT_TTL_S

    def apparent_bytes(self) -> int:
        return sum(f["size"] for f in self.files)

    def pieces(self) -> Iterator[Piece]:
        """Every non-zero piece of every file, in order. Sets ``digests`` as it goes."""
        zero = bytes(PIECE)
        for i, fd in enumerate(self._fds):
            size = self.files[i]["size"]
            h = hashlib.sha256()
            for start, end in data_extents(fd, size):
                off = start
                while off < end:
                    block = os.pread(fd, min(READ_BLOCK, end - off), off)
                    if not block:
                        break
                    self.bytes_read += len(block)
                    for j in range(0, len(block), PIECE):
                        data = block[j:j + PIECE]
                        if data != zero[:len(data)]:
                            _digest_update(h, off + j, data)
                            self.bytes_sent += len(data)
                            yield Piece(i, off + j, data)
                    off += len(block)
            h.update(struct.pack(">Q", size))
            self.digests[i] = h.hexdigest()

    def manifest(self) -> dict:
        """After ``pieces()`` is exhausted: what the import checks."""
        if any(d is None for d in self.digests):
            raise MoveError("the export has not been read to the end")
        return {"name": self.name, "files": [dict(f, sha256=d) for f, d in zip(self.files, self.digests)]}

    def close(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Import:
    """Receives an export's pieces into ``<base_dir>/.import-<name>-*`` and, on
    ``finish``, becomes ``<base_dir>/<name>`` (a sleeping machine)."""

    def __init__(self, base_dir: os.PathLike, name: str, files: list) -> None:
        self.base = Path(base_dir)
        self.name = name
        if (self.base / name).exists():
            raise MoveError(f"a machine named {name} already exists in {self.base}")
        self.base.mkdir(parents=True, exist_ok=True)
        self.stage = self.base / f".import-{name}-{os.getpid()}-{time.monotonic_ns()}"
        self.stage.mkdir()
        self.created = time.monotonic()
        self.files = [dict(f) for f in files]      # path, size, mode (sha256 comes at finish)
        self._fds: list = []
        self._hashes = [hashlib.sha256() for _ in files]
        self._last = [-1] * len(files)
        self.bytes_written = 0
        try:
            for f in self.files:
                rel = Path(f["path"])
                if rel.is_absolute() or ".." in rel.parts:
                    raise MoveError(f"bad path in export: {f['path']!r}")
                p = self.stage / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                self._fds.append(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        except BaseException:
            self.abort()
            raise

    @property
    def expired(self) -> bool:
        return time.monotonic() - self.created > EXPORT_TTL_S

    def write(self, piece: Piece) -> None:
        if not 0 <= piece.file < len(self._fds):
            raise MoveError(f"piece for unknown file {piece.file}")
        if piece.offset <= self._last[piece.file]:
            raise MoveError("pieces must come in order")
        if piece.offset + len(piece.data) > self.files[piece.file]["size"]:
            raise MoveError("piece past the end of its file")
        self._last[piece.file] = piece.offset
        os.pwrite(self._fds[piece.file], piece.data, piece.offset)
        _digest_update(self._hashes[piece.file], piece.offset, piece.data)
        self.bytes_written += len(piece.data)

    def finish(self, manifest: dict) -> Path:
        """Check every file against the export's digests and put the machine in place."""
        try:
            want = manifest["files"]
            if [f["path"] for f in want] != [f["path"] for f in self.files]:
                raise MoveError("the export's file list changed")
            for i, f in enumerate(want):
                fd = self._fds[i]
                os.ftruncate(fd, f["size"])           # the tail may be a hole
                os.fsync(fd)
                os.fchmod(fd, f.get("mode", 0o600))
                h = self._hashes[i].copy()
                h.update(struct.pack(">Q", f["size"]))
                if h.hexdigest() != f["sha256"]:
                    raise MoveError(f"{f['path']}: digest mismatch")
            self._close()
            target = self.base / self.name
            os.rename(self.stage, target)
            return target
        except BaseException:
            self.abort()
            raise

    def _close(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def abort(self) -> None:
        self._close()
        shutil.rmtree(self.stage, ignore_errors=True)


def copy(export: Export, imp: Import) -> dict:
    """Stream an export into an import in this process (a local move); returns
    the figures. The import is aborted on any failure."""
    t0 = time.monotonic()
    try:
        for p in export.pieces():
            imp.write(p)
        target = imp.finish(export.manifest())
    except BaseException:
        imp.abort()
        raise
    return {"target": str(target), "apparent_bytes": export.apparent_bytes(),
            "bytes_sent": export.bytes_sent, "seconds": time.monotonic() - t0}


def move(machine, target_base: os.PathLike, spec=None, backend=None):
    """Export a sleeping machine, import it under target_base and return the
    machine there (asleep; call ``wake()``). The source is released only after
    the import finished; on any failure before that the source is untouched."""
    exp = machine.export()
    try:
        imp = Import(target_base, machine.spec.name, exp.files)
        figures = copy(exp, imp)
    finally:
        exp.close()
    from .qemu import QemuMachine
    spec = spec or machine.spec
    moved = (backend.machine(spec, target_base) if backend is not None
             else QemuMachine(spec, target_base, machine.platform))
    moved.move_figures = figures
    machine.release()
    return moved
