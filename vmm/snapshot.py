"""Snapshot folders: their manifest, the checks on restore, and the memory stream.

A snapshot is a folder with two files:

- ``manifest.json``: the format version, the backend that wrote it, the VMM
  version, what kind it is (sleep, checkpoint, template), its name and label,
  when it was taken, the machine's shape (vCPUs, memory, image hashes, kernel
  command line, workspace size), its volumes' names in order, and the frozen
  workspace layers it stands on;
- ``memory.ram`` and ``devices.bin`` where the machine's RAM is a file (``mapped``, the usual case):
  the guest's RAM page for page at its own offset, all-zero pages left as holes, and QEMU's
  migration stream of the devices and CPUs alone (``x-ignore-shared``: the RAM is not in it). A
  restore copies the data regions into the new machine's RAM file and loads the small stream;
  nothing is decompressed or parsed page by page;
- otherwise ``memory.zst`` (absent for a disk-only checkpoint): QEMU's migration stream
  (device and CPU state, then guest RAM) compressed with zstd (a template keeps
  it uncompressed as ``memory.raw``: it is loaded often, and loads faster). QEMU writes a
  page the guest never touched as a few bytes of "zero page" record, and zstd
  squeezes the rest, so memory the guest never used takes no space.

A snapshot restores only on the backend that wrote it and only with a format
version this code reads (``FORMAT_VERSION``); anything else is refused with a
``SnapshotError`` before a process starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from .backend import VMError
from .disks import data_extents

FORMAT_VERSION = 1
READS_FORMATS = (1,)
VMM_VERSION = "2"                   # bump when the machine model changes (breaks templates)
MANIFEST = "manifest.json"
MEMORY = "memory.zst"
MEMORY_RAW = "memory.raw"           # templates: restored often, loaded faster uncompressed
MEMORY_MAPPED = "memory.ram"        # the RAM file's pages at their offsets, zero pages as holes
DEVICES = "devices.bin"             # with MEMORY_MAPPED: the device and CPU state alone
COMPRESSIONS = {"zstd": MEMORY, "none": MEMORY_RAW, "mapped": MEMORY_MAPPED}
RAM_PIECE = 64 << 10                # an all-zero run of this size is left as a hole
KINDS = ("sleep", "checkpoint", "template")
BEFORE_RESTORE = "before-restore"   # the label of the safety checkpoint a restore takes
MAX_LABEL = 200


class SnapshotError(VMError):
    """A snapshot cannot be used here; the message says why."""


@dataclasses.dataclass
class Manifest:
    kind: str
    name: str
    backend: str
    shape: dict                      # vcpus, memory_mib, workspace_mib, image, artifacts, cmdline
    volumes: list                    # volume names, in order
    layers: list                     # frozen workspace layers, bottom first
    memory: bool = True              # False: a disk-only checkpoint
    label: str = ""
    created_at: float = 0.0
    machine: str = ""
    compression: str = "zstd"
    memory_bytes: int = 0            # size of the memory file on disk
    ram_bytes: int = 0               # guest RAM the stream describes
    format: int = FORMAT_VERSION
    vmm_version: str = VMM_VERSION

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Manifest:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def info(self) -> dict:
        """What a listing shows."""
        return {"name": self.name, "kind": self.kind, "label": self.label,
                "created_at": self.created_at, "memory": self.memory,
                "bytes": self.memory_bytes, "volumes": list(self.volumes)}


def write(folder: Path, m: Manifest) -> None:
    if m.kind not in KINDS:
        raise ValueError(f"bad snapshot kind {m.kind!r}")
    if len(m.label) > MAX_LABEL:
        raise ValueError(f"a label is at most {MAX_LABEL} characters")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (MANIFEST + ".new")
    tmp.write_text(json.dumps(m.to_json(), indent=1, sort_keys=True))
    with open(tmp) as f:
        os.fsync(f.fileno())
    os.replace(tmp, folder / MANIFEST)


def read(folder: Path) -> Manifest:
    try:
        d = json.loads((Path(folder) / MANIFEST).read_text())
    except FileNotFoundError:
        raise SnapshotError(f"no snapshot at {folder}") from None
    except ValueError as e:
        raise SnapshotError(f"snapshot {folder}: unreadable manifest ({e})") from None
    if not isinstance(d, dict) or "format" not in d or "backend" not in d:
        raise SnapshotError(f"snapshot {folder}: manifest without a format version or backend")
    return Manifest.from_json(d)


def check_restorable(m: Manifest, backend: str, shape: dict, volumes: list) -> None:
    """Refuse a snapshot this backend and machine cannot restore (pure)."""
    if m.format not in READS_FORMATS:
        raise SnapshotError(f"snapshot {m.name}: format version {m.format} is not one this build "
                            f"reads ({', '.join(map(str, READS_FORMATS))})")
    if m.backend != backend:
        raise SnapshotError(f"snapshot {m.name} was written by the {m.backend} backend; "
                            f"it restores only there, not on {backend}")
    if list(m.volumes) != list(volumes):
        raise SnapshotError(f"snapshot {m.name} has volumes {list(m.volumes)}; the machine has "
                            f"{list(volumes)} (same names in the same order needed)")
    if not m.memory:
        return          # a disk-only checkpoint boots cold: only the workspace must fit
    for k in ("vcpus", "memory_mib", "image", "vmm_version"):
        if m.shape.get(k) != shape.get(k):
            raise SnapshotError(f"snapshot {m.name}: {k} is {m.shape.get(k)!r}, the machine has "
                                f"{shape.get(k)!r}")


# -- the memory stream --------------------------------------------------------
def _zstd() -> str | None:
    return shutil.which("zstd")


def memory_name(m: Manifest) -> str:
    if m.compression not in COMPRESSIONS:
        raise SnapshotError(f"snapshot {m.name}: unknown memory compression {m.compression!r}")
    return COMPRESSIONS[m.compression]


def memory_files(m: Manifest) -> list:
    """The files of a memory snapshot (none for a disk-only checkpoint)."""
    if not m.memory:
        return []
    return [memory_name(m)] + ([DEVICES] if m.compression == "mapped" else [])


def copy_ram(src: Path, dst: Path, fsync: bool = False, skip_zeros: bool = True) -> int:
    """Copy a RAM file's data regions into dst (made or resized to src's size), leaving all-zero
    runs of RAM_PIECE as holes. Returns the bytes written. Only the regions the file system says
    hold data are read, so a snapshot's holes (the pages the guest never touched) cost nothing.
    ``skip_zeros=False`` (a restore: a snapshot holds no zero runs) lets the kernel copy each
    region (``sendfile``), with no pass through this process."""
    if not skip_zeros:
        return _copy_extents(src, dst)
    written = 0
    zero = bytes(RAM_PIECE)
    fi = os.open(src, os.O_RDONLY)
    try:
        fo = os.open(dst, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fi).st_size
            os.ftruncate(fo, size)
            for start, end in data_extents(fi, size):
                off = start
                while off < end:
                    buf = os.pread(fi, min(16 * RAM_PIECE, end - off), off)
                    if not buf:
                        break
                    for i in range(0, len(buf), RAM_PIECE):
                        piece = buf[i:i + RAM_PIECE]
                        if piece != zero[:len(piece)]:
                            os.pwrite(fo, piece, off + i)
                            written += len(piece)
                    off += len(buf)
            if fsync:
                os.fsync(fo)
        finally:
            os.close(fo)
    finally:
        os.close(fi)
    return written


def _copy_extents(src: Path, dst: Path) -> int:
    written = 0
    fi = os.open(src, os.O_RDONLY)
    try:
        fo = os.open(dst, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fi).st_size
            os.ftruncate(fo, size)
            for start, end in data_extents(fi, size):
                os.lseek(fo, start, os.SEEK_SET)
                off = start
                while off < end:
                    n = os.sendfile(fo, fi, off, end - off)
                    if n <= 0:
                        break
                    off += n
                    written += n
        finally:
            os.close(fo)
    finally:
        os.close(fi)
    return written


def open_writer(path: Path, compression: str = "zstd"):
    """(fd to hand QEMU, finish()) writing the migration stream to path."""
    if compression in ("none", "mapped"):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

        def finish_raw(timeout: float = 0) -> int:
            with open(path, "rb") as f:
                os.fsync(f.fileno())
            return path.stat().st_size
        return fd, finish_raw
    z = _zstd()
    if z is None:
        raise SnapshotError("zstd is not installed (apt: zstd)")
    out = open(path, "wb")
    r, w = os.pipe()
    proc = subprocess.Popen([z, "-1", "-q", "-T0", "-c"], stdin=r, stdout=out,
                            stderr=subprocess.PIPE)
    os.close(r)
    out.close()

    def finish(timeout: float = 120.0) -> int:
        _, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise SnapshotError(f"zstd failed: {err.decode(errors='replace')[-300:]}")
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        return path.stat().st_size
    return w, finish


def open_reader(path: Path, compression: str = "zstd"):
    """(fd QEMU reads the migration stream from, finish())."""
    if compression in ("none", "mapped"):
        if not path.is_file():
            raise SnapshotError(f"no memory file at {path}")
        return os.open(path, os.O_RDONLY), lambda timeout=0: None
    z = _zstd()
    if z is None:
        raise SnapshotError("zstd is not installed (apt: zstd)")
    if not path.is_file():
        raise SnapshotError(f"no memory file at {path}")
    r, w = os.pipe()
    proc = subprocess.Popen([z, "-d", "-q", "-c", str(path)], stdout=w, stderr=subprocess.PIPE)
    os.close(w)

    def finish(timeout: float = 30.0) -> None:
        try:
            proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return r, finish


def now() -> float:
    return time.time()
