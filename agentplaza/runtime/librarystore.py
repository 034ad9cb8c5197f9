"""Where the Library's bytes are kept: a local folder (the default: ``library/`` in the data folder,
0700, files 0600), or S3-compatible object storage when ``APZ_LIBRARY_S3_URL`` names a bucket:
``s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT&region=R`` (the endpoint and region may be left out
for AWS itself). The S3 credentials are the standard ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY`` of the hub's environment (never in an event, a log or an error); boto3 is
the ``s3`` extra (``pip install agentplaza[s3]``).

Also the type of an item, found from its content (``sniff``): the first bytes, never the file name alone;
and a blob read back only when it is the one the log's digest names (``read_checked``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from ..domain.base import Refusal

#: The environment variable that moves the Library into object storage.
S3_URL_ENV = "APZ_LIBRARY_S3_URL"
#: The local folder, under the data folder.
LOCAL_DIR = "library"
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")

#: Magic numbers: the first bytes of a file, and its type.
MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
         (b"GIF89a", "image/gif"), (b"%PDF-", "application/pdf"), (b"PK\x03\x04", "application/zip"),
         (b"\x1f\x8b", "application/gzip"), (b"\x1aE\xdf\xa3", "video/webm"), (b"ID3", "audio/mpeg"),
         (b"OggS", "audio/ogg"), (b"fLaC", "audio/flac"))


def sniff(data: bytes, filename: str = "") -> str:
    """The media type of ``data`` from its content; a text file's kind (Markdown, CSV) from its name."""
    head = data[:512]
    for magic, media in MAGIC:
        if head.startswith(magic):
            return media
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head[4:8] == b"ftyp":
        return "video/mp4"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    lead = text.lstrip()[:200].lower()
    if lead.startswith(("<!doctype html", "<html")):
        return "text/html"
    if lead.startswith("<svg") or (lead.startswith("<?xml") and "<svg" in text[:1000].lower()):
        return "image/svg+xml"
    if lead[:1] in ("{", "["):
        try:
            json.loads(text)
            return "application/json"
        except ValueError:
            pass
    ext = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    return {"md": "text/markdown", "csv": "text/csv"}.get(ext, "text/plain")


def read_checked(store: Any, key: str, sha256: str, what: str) -> bytes:
    """A blob's bytes, only when they are the ones the log's digest names: a blob cut short on disk (or
    changed there) is refused ``item_corrupt``, never served as good."""
    data = store.get(key)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise Refusal("item_corrupt", f"the bytes of {what} do not match the digest the log holds")
    return data


def _key(key: str) -> str:
    if KEY_PATTERN.fullmatch(key) is None:
        raise Refusal("invalid_request", "a library key is lower-case letters, digits and -")
    return key


class LocalStore:
    name = "local"

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)

    def put(self, key: str, data: bytes) -> None:
        path = self.root / _key(key)
        tmp = path.with_suffix(".part")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def get(self, key: str) -> bytes:
        try:
            return (self.root / _key(key)).read_bytes()
        except FileNotFoundError:
            raise Refusal("item_missing", "the item's bytes are missing from the library's folder") from None

    def delete(self, key: str) -> None:
        (self.root / _key(key)).unlink(missing_ok=True)


class S3Store:
    name = "s3"

    def __init__(self, url: str):
        u = urlparse(url)
        if u.scheme != "s3" or not u.netloc:
            raise ValueError(f"{S3_URL_ENV} is s3://BUCKET[/PREFIX]?endpoint=URL&region=R")
        q = parse_qs(u.query)
        import boto3  # the s3 extra

        self.bucket, self.prefix = u.netloc, u.path.strip("/")
        self.client = boto3.client("s3", endpoint_url=(q.get("endpoint") or [None])[0],
                                   region_name=(q.get("region") or ["us-east-1"])[0])

    def _name(self, key: str) -> str:
        return f"{self.prefix}/{_key(key)}" if self.prefix else _key(key)

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._name(key), Body=data)

    def get(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._name(key))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise Refusal("item_missing", "the item's bytes are missing from the object storage") from None

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._name(key))


def open_store(data_dir: Path):
    url = os.environ.get(S3_URL_ENV)
    return S3Store(url) if url else LocalStore(data_dir / LOCAL_DIR)
