"""Copy-on-write workspace disks: a read-only base and qcow2 layers over it.

A machine's workspace is a chain of files in its ``disks/`` folder::

    base.ext4  <-  L0001.qcow2  <-  L0002.qcow2  <-  ...  <-  top

``base.ext4`` is a raw ext4 image (a fresh ``mkfs``, or a copy of a template's
workspace); each ``L*.qcow2`` names the file below it as its backing file by a
bare file name, so the chain resolves wherever the folder is (inside the
jail it is ``/vm/disks``). Only the top is written by the guest. A snapshot
freezes the chain as it is: the top stops being the top (a new empty layer
goes on it, live over QMP while the guest runs) and from then on no running
guest writes it. A snapshot therefore never rewrites a file a guest uses, and
costs no copy. Frozen layers are made read-only (and, for a jailed QEMU, owned
by root, so the VM's uid cannot write them).

``chain.json`` lists the layers, bottom first. Layers no snapshot and not the
live chain refer to are removed by ``gc``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from collections.abc import Iterable
from pathlib import Path

BASE = "base.ext4"
CHAIN = "chain.json"
ZERO_PIECE = 512 * 1024            # copies skip all-zero runs of this size (holes kept)


class DiskError(RuntimeError):
    pass


def qemu_img(*args: str) -> str:
    try:
        r = subprocess.run(["qemu-img", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    except FileNotFoundError as e:
        raise DiskError("qemu-img is not installed (apt: qemu-utils)") from e
    if r.returncode != 0:
        raise DiskError(f"qemu-img {' '.join(args)} failed: {r.stdout.strip()[-800:]}")
    return r.stdout


def layer_name(n: int) -> str:
    return f"L{n:04d}.qcow2"


def layer_number(name: str) -> int:
    return int(name[1:5]) if name.startswith("L") and name.endswith(".qcow2") else 0


def backing_of(layer: Path) -> str | None:
    """The backing file name written in a qcow2 header (None for a raw file)."""
    if layer.name == BASE:
        return None
    # Read from the header itself (qcow2 spec: magic, version, then the backing file name's offset
    # (u64) and length (u32), big-endian): no ``qemu-img info`` process at every restore.
    try:
        with open(layer, "rb") as f:
            head = f.read(20)
            if len(head) == 20 and head[:4] == b"QFI\xfb":
                offset, size = struct.unpack(">QI", head[8:20])
                if offset == 0 or size == 0:
                    return None
                if size <= 1023:
                    f.seek(offset)
                    name = f.read(size)
                    if len(name) == size:
                        return name.decode("utf-8", errors="replace")
    except OSError:
        pass
    info = json.loads(qemu_img("info", "--output=json", "-U", str(layer)))
    return info.get("backing-filename")


def sparse_copy(src: os.PathLike, dst: os.PathLike, piece: int = ZERO_PIECE) -> int:
    """Copy src to dst keeping holes: only data extents are read, and all-zero
    pieces in them are left as holes. Returns the bytes written."""
    written = 0
    tmp = Path(str(dst) + ".part")
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        zero = bytes(piece)
        for start, end in data_extents(fi.fileno(), size):
            off = start
            while off < end:
                n = min(piece, end - off)
                fi.seek(off)
                data = fi.read(n)
                if data != zero[:len(data)]:
                    fo.seek(off)
                    fo.write(data)
                    written += len(data)
                off += n
        fo.truncate(size)
        fo.flush()
        os.fsync(fo.fileno())
    os.replace(tmp, dst)
    return written


def data_extents(fd: int, size: int) -> Iterable[tuple]:
    """(start, end) of the regions of fd that hold data (SEEK_DATA/SEEK_HOLE;
    the whole file where the filesystem does not say)."""
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:          # ENXIO: no data after off
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, min(end, size)
        off = end


def _virtual_size(path: Path, fmt: str) -> int:
    if fmt == "qcow2":
        with open(path, "rb") as f:
            head = f.read(32)
        if len(head) == 32 and head[:4] == b"QFI\xfb":
            return struct.unpack(">Q", head[24:32])[0]
        raise DiskError(f"{path.name} is not a qcow2 file")
    return os.stat(path).st_size


#: (backing format, virtual size, backing name's length) -> (the bytes of an empty qcow2 layer that
#: qemu-img made once, where the backing name is in it)
_EMPTY: dict = {}


def empty_layer(path: Path, backing: str, fmt: str, backing_path: Path) -> None:
    """An empty qcow2 layer over ``backing`` (a bare file name in the same folder), as
    ``qemu-img create -f qcow2 -F fmt -b backing`` writes it. The file qemu-img makes depends only on
    the backing's format, its size and the name, and layer names are of fixed length: so qemu-img runs
    once per shape in a process, and each later layer is that file with the name written in (no
    process at every restore, wake and checkpoint)."""
    key = (fmt, _virtual_size(backing_path, fmt), len(backing.encode()))
    if key not in _EMPTY:
        qemu_img("create", "-q", "-f", "qcow2", "-F", fmt, "-b", backing, str(path))
        data = path.read_bytes()
        offset, size = struct.unpack(">QI", data[8:20])
        if size != key[2] or data[offset:offset + size] != backing.encode():
            return          # not the layout expected: this layer is qemu-img's own, nothing is kept
        _EMPTY[key] = (data, offset)
        return
    data, offset = _EMPTY[key]
    name = backing.encode()
    data = data[:offset] + name + data[offset + len(name):]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for off in range(0, len(data), 4096):   # its zero blocks stay holes, as qemu-img left them
            block = data[off:off + 4096]
            if block.count(0) != len(block):
                os.pwrite(fd, block, off)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class Chain:
    """The workspace layers of one machine (``<machine>/disks``)."""

    def __init__(self, folder: Path) -> None:
        self.dir = Path(folder)

    # -- the list ------------------------------------------------------------
    @property
    def layers(self) -> list:
        try:
            return list(json.loads((self.dir / CHAIN).read_text())["layers"])
        except FileNotFoundError:
            return []

    def _read(self) -> dict:
        try:
            return json.loads((self.dir / CHAIN).read_text())
        except FileNotFoundError:
            return {"layers": [], "next": 1}

    def _write(self, layers: list, next_n: int | None = None) -> None:
        d = self._read()
        d["layers"] = layers
        if next_n is not None:
            d["next"] = next_n
        tmp = self.dir / (CHAIN + ".new")
        tmp.write_text(json.dumps(d))
        os.replace(tmp, self.dir / CHAIN)

    def exists(self) -> bool:
        return bool(self.layers)

    @property
    def top(self) -> Path:
        layers = self.layers
        if not layers:
            raise DiskError(f"no workspace in {self.dir}")
        return self.dir / layers[-1]

    # -- making ----------------------------------------------------------------
    def create(self, make_base, size_mib: int, owner: int | None = None) -> None:
        """A new workspace: base made by ``make_base(path, size_mib)``, one layer on it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        base = self.dir / BASE
        if base.exists():
            base.unlink()
        make_base(base, size_mib)
        self._freeze(base)
        self._write([BASE])
        self.push(owner)

    def adopt_base(self, raw: Path, owner: int | None = None) -> None:
        """A workspace whose base is an existing raw image (moved here)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        os.replace(raw, self.dir / BASE)
        self._freeze(self.dir / BASE)
        self._write([BASE])
        self.push(owner)

    def push(self, owner: int | None = None, over: list | None = None) -> Path:
        """Put a new empty layer on ``over`` (default: the current chain) and make
        it the top. The layer below is frozen. Returns the new top."""
        below = list(self.layers if over is None else over)
        if not below:
            raise DiskError("no layer to put a layer on")
        n = max([int(self._read().get("next", 1))] +
                [layer_number(x) + 1 for x in os.listdir(self.dir)])
        name = layer_name(n)
        path = self.dir / name
        fmt = "raw" if below[-1] == BASE else "qcow2"
        empty_layer(path, below[-1], fmt, self.dir / below[-1])
        self._freeze(self.dir / below[-1])
        self.set_owner(path, owner)
        self._write(below + [name], n + 1)
        return path

    def pop(self, layers: list) -> None:
        """Undo a push that QEMU did not take: back to ``layers``."""
        top = self.layers[-1]
        self._write(list(layers))
        if top not in layers:
            try:
                os.unlink(self.dir / top)
            except FileNotFoundError:
                pass

    def fix_modes(self, owner: int | None) -> None:
        """Before a start: every layer but the top frozen, the top the VM's."""
        layers = self.layers
        for name in layers[:-1]:
            self._freeze(self.dir / name)
        self.set_owner(self.dir / layers[-1], owner)

    def set_owner(self, path: Path, owner: int | None) -> None:
        if owner is not None and os.geteuid() == 0:
            os.chown(path, owner, owner)
        os.chmod(path, 0o600)

    def _freeze(self, path: Path) -> None:
        if os.geteuid() == 0:
            os.chown(path, 0, 0)
        os.chmod(path, 0o444)

    def freeze_top(self) -> list:
        """Freeze the chain as it is (the machine is not running) and return it."""
        layers = self.layers
        self._freeze(self.dir / layers[-1])
        return layers

    def compact(self, keep: Iterable[str]) -> list:
        """With no guest running: merge the top into the layer below while that
        layer is a qcow2 layer no snapshot in ``keep`` uses (``qemu-img commit``).
        Keeps a machine that sleeps and wakes often from growing a long chain.
        Returns the chain; its content is unchanged."""
        keep = set(keep)
        layers = self.layers
        while len(layers) >= 3 and layers[-2] != BASE and layers[-2] not in keep:
            top, parent = self.dir / layers[-1], self.dir / layers[-2]
            os.chmod(parent, 0o600)
            qemu_img("commit", "-q", "-d", str(top))
            layers = layers[:-1]
            self._write(layers)
            os.unlink(top)
        return layers

    # -- keeping ---------------------------------------------------------------
    def gc(self, keep: Iterable[Iterable[str]]) -> list:
        """Remove layers that neither the live chain nor any list in ``keep`` uses."""
        used = set(self.layers)
        for layers in keep:
            used.update(layers)
        gone = []
        for f in sorted(os.listdir(self.dir)):
            if (f == BASE or layer_number(f)) and f not in used:
                os.unlink(self.dir / f)
                gone.append(f)
        return gone

    def copy_to(self, layers: list, dest: Chain) -> None:
        """Copy ``layers`` (a frozen chain) into dest (holes kept); the caller puts
        a new top on them."""
        dest.dir.mkdir(parents=True, exist_ok=True)
        for name in layers:
            sparse_copy(self.dir / name, dest.dir / name)
            dest._freeze(dest.dir / name)
        dest._write(list(layers), max(layer_number(x) for x in layers) + 1)

    def wipe(self) -> None:
        for f in os.listdir(self.dir) if self.dir.exists() else []:
            if f == BASE or f == CHAIN or layer_number(f) or f.endswith(".part"):
                os.unlink(self.dir / f)

    def flatten(self, layers: list, out: Path) -> None:
        """Write the chain's content as one raw file (sparse)."""
        qemu_img("convert", "-q", "-U", "-O", "raw", "-S", "4k", str(self.dir / layers[-1]), str(out))

    def check(self, layers: list) -> None:
        """Each layer names the one below it as its backing file."""
        for below, above in zip(layers, layers[1:]):
            got = backing_of(self.dir / above)
            if got != below:
                raise DiskError(f"layer {above} is backed by {got!r}, expected {below!r}")
