"""The files a template's ``COPY`` steps copy in: the SDK asks whether the archive of a step's files (named
by the step's ``filesHash``) is here, and uploads it when it is not, to a link of the hub's that names the
template and the hash and carries a capability made with the hub's key (so only who was given the link
can upload, and only that archive for that template). The archives are a cache of content, like the
VMs' disks: kept in the data folder (``FILES_DIR``, 0700; each file 0600), never in the log; what is in
the log is each upload (the hash, the archive's size and SHA-256, ``E2bTemplate.FilesUploaded``) and the
build that copies them (its plan holds the hash)."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

from ..domain.base import Refusal

#: Where the archives are kept, in the hub's data folder.
FILES_DIR = "e2b-files"
#: A step's files hash: the SDK's SHA-256, in hex.
FILES_HASH = re.compile(r"[0-9a-f]{64}")
#: The largest archive one COPY step uploads.
ARCHIVE_BYTES_MAX = 256 * 1024 * 1024


def check_hash(files_hash: str) -> str:
    if not isinstance(files_hash, str) or not FILES_HASH.fullmatch(files_hash):
        raise Refusal("invalid_request", "a files hash is 64 hex digits")
    return files_hash


class FileStore:
    def __init__(self, data_dir: Path, key: bytes) -> None:
        self.dir = Path(data_dir) / FILES_DIR
        self.key = key

    def path(self, files_hash: str) -> Path:
        return self.dir / f"{check_hash(files_hash)}.tar"

    def present(self, files_hash: str) -> bool:
        return self.path(files_hash).is_file()

    def capability(self, template_id: str, files_hash: str) -> str:
        return hmac.new(self.key, f"e2b-upload:{template_id}:{files_hash}".encode(), hashlib.sha256).hexdigest()[:40]

    def check(self, template_id: str, files_hash: str, capability: str | None) -> None:
        if not capability or not hmac.compare_digest(capability, self.capability(template_id, files_hash)):
            raise Refusal("e2b_upload_refused", "this upload link is not this hub's for that template and hash")

    def save(self, files_hash: str, chunks: Iterable[bytes]) -> tuple[int, str]:
        """Write the archive (all of it, or nothing: a partial upload leaves no file); its size and SHA-256."""
        final = self.path(files_hash)
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.dir / f".{files_hash}.{secrets.token_hex(4)}"
        size = 0
        digest = hashlib.sha256()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    size += len(chunk)
                    if size > ARCHIVE_BYTES_MAX:
                        raise Refusal("body_too_large", f"an archive of a COPY step is at most {ARCHIVE_BYTES_MAX} bytes")
                    f.write(chunk)
                    digest.update(chunk)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                tmp.unlink()
        return size, digest.hexdigest()

    def read(self, files_hash: str) -> bytes:
        return self.path(files_hash).read_bytes()
