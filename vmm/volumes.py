"""Data volumes' images: built from a folder with ``mkfs.ext4 -d`` (no root, nothing mounted), kept owner-only.

A volume is an ext4 image in one folder (the hub's ``<data>/volumes``, 0700), each image 0600. A VM gets it
as a read-only virtio-blk drive (``readonly=on``, ``vmm.qemu``); a jailed QEMU, an unprivileged uid that
could not open a 0600 file, is handed a read-only descriptor the jail's helper opened as root
(``JailSpec.fds``, QEMU's ``-add-fd`` and ``/dev/fdset/N``), so the image's mode never opens up.

- ``build(source, folder, name)``: the image of the folder ``source`` as ``<name>-<8 hex>.ext4``: sized from
  the source's bytes and files (``size_for``), written sparse, checked with ``e2fsck -n``.
- ``remove(folder, image)``: the file goes (a name that is not an image's is refused).
- ``held(folder)``: {volume name: image file} of the images in a folder, the newest of each name: what a
  node can give a VM, and the check a move makes on its target (``missing``).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from pathlib import Path

from .backend import VOLUME_NAME, VMError

#: ``<name>-<8 hex>.ext4``: the volume's name, then a random tag (a volume made again never reuses a file).
IMAGE_RE = re.compile(r"(?P<name>[a-z0-9][a-z0-9-]{0,19})-[0-9a-f]{8}\.ext4")
#: ext4's own room (inode tables, journal-less metadata) beside the data, and the smallest image.
OVERHEAD_FRACTION = 0.15
BYTES_PER_FILE = 4096 + 256
MIN_MIB = 8
#: The largest image this builds (the hub's domain holds the same limit).
MAX_MIB = 65536
#: ``mkfs.ext4`` gives up after this long.
BUILD_TIMEOUT_S = 1800


class VolumeError(VMError):
    """A volume's image cannot be built, found or removed; the message says why."""


def size_for(source: Path) -> int:
    """Bytes the image gets: the files' bytes rounded to blocks, a block per folder and file, and ext4's
    overhead, in whole MiB, at least ``MIN_MIB``. Raises VolumeError past ``MAX_MIB``."""
    data = 0
    count = 0
    for root, dirs, files in os.walk(source, onerror=_walk_error):
        count += 1 + len(dirs)
        for f in files:
            count += 1
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError as e:
                raise VolumeError(f"cannot read {os.path.join(root, f)}: {e.strerror}") from e
            data += -(-st.st_size // 4096) * 4096
    total = int((data + count * BYTES_PER_FILE) * (1 + OVERHEAD_FRACTION))
    mib = max(MIN_MIB, -(-total // (1 << 20)) + 4)
    if mib > MAX_MIB:
        raise VolumeError(f"the source needs a {mib} MiB image; a volume is at most {MAX_MIB} MiB")
    return mib << 20


def _walk_error(e: OSError) -> None:
    raise VolumeError(f"cannot read {e.filename}: {e.strerror}")


def private_folder(folder: Path) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    return folder


def build(source: os.PathLike | str, folder: os.PathLike | str, name: str) -> tuple[str, int]:
    """Build the image of the folder ``source`` in ``folder``; (its file name, its size in bytes)."""
    if not VOLUME_NAME.fullmatch(name):
        raise VolumeError(f"bad volume name {name!r}")
    src = Path(source)
    if not src.is_absolute():
        raise VolumeError(f"{source} is not an absolute path")
    if not src.is_dir():
        raise VolumeError(f"{source} is not a folder on the hub's machine")
    size = size_for(src)
    out = private_folder(Path(folder))
    image = f"{name}-{secrets.token_hex(4)}.ext4"
    path = out / image
    tmp = out / (image + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    try:
        # -d copies the folder in without mounting anything; -m 0 no blocks kept for root (nobody writes);
        # no journal (the image is never written once built); the label says what it is.
        r = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-L", f"apz-{name}"[:16],
                            "-d", str(src), str(tmp)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S)
        if r.returncode != 0:
            raise VolumeError(f"mkfs.ext4 could not build volume {name}: {r.stdout.decode(errors='replace')[-500:]}")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except FileNotFoundError as e:
        raise VolumeError("mkfs.ext4 is not installed (apt: e2fsprogs)") from e
    except subprocess.TimeoutExpired as e:
        raise VolumeError(f"mkfs.ext4 did not finish volume {name} within {BUILD_TIMEOUT_S} s") from e
    finally:
        if tmp.exists():
            tmp.unlink()
    return image, size


def image_path(folder: os.PathLike | str, image: str) -> Path:
    """The image's path in ``folder``; a name that is not an image's (a slash, ``..``) is refused."""
    if not isinstance(image, str) or not IMAGE_RE.fullmatch(image):
        raise VolumeError(f"{image!r} is not a volume image's name")
    return Path(folder) / image


def remove(folder: os.PathLike | str, image: str) -> bool:
    p = image_path(folder, image)
    try:
        p.unlink()
        return True
    except FileNotFoundError:
        return False


def held(folder: os.PathLike | str) -> dict:
    """{volume name: image file} of the images in ``folder`` (the newest of a name, should there be two)."""
    found: dict = {}
    try:
        entries = sorted(Path(folder).iterdir(), key=lambda p: p.stat().st_mtime_ns)
    except FileNotFoundError:
        return {}
    for p in entries:
        m = IMAGE_RE.fullmatch(p.name)
        if m and p.is_file():
            found[m["name"]] = p.name
    return found


def missing(folder: os.PathLike | str, names: list) -> list:
    """The volumes of ``names`` that ``folder`` holds no image of: a move needs a volume of the same name
    on the target, so a non-empty answer refuses the move."""
    have = held(folder)
    return [n for n in names if n not in have]
