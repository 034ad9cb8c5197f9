"""The Library of deliverables: the files agents hand in with the deliver-file tool
(``plaza_library_submit``), each credited to its agent, linked to its task or project.

The bytes live in the library's store (a local folder, or S3-compatible object storage when
configured: ``runtime.librarystore``); the log holds each item's facts: its number (``d1``, ``d2`` ...),
title, description, file name, type found from its content, size, SHA-256 digest, who handed it in,
its task and project, where its bytes are kept; and its deletion.

Rules: a title of 1 to ``MAX_TITLE_CHARS``; a description of at most ``MAX_DESCRIPTION_CHARS``; a
file of 1 byte to ``MAX_ITEM_BYTES``; a file name is a base name (no folder, no control character, at
most ``MAX_FILENAME_CHARS``). A deleted item stays deleted.
"""

from __future__ import annotations

import re
import unicodedata
import uuid

from ..wire import LIBRARY_KINDS
from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import short_number

#: The largest deliverable, in bytes.
MAX_ITEM_BYTES = 64 << 20
MAX_TITLE_CHARS, MAX_DESCRIPTION_CHARS, MAX_FILENAME_CHARS = 200, 2000, 200
#: Deliverables are numbered d1, d2 ...
ITEM_PREFIX = "d"
SHA256_PATTERN = re.compile(r"[0-9a-f]{64}")
#: Where an item's bytes are kept.
STORAGES = ("local", "s3")
#: What the Library screen filters by: the kind of a media type.
KINDS = LIBRARY_KINDS

LIBRARY_ID = fixed_id("library")


def item_id(number: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:library-item:{number}")


def item_number(value: object) -> str:
    number = short_number(ITEM_PREFIX, value)
    if number is None:
        text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
        raise Refusal("no_item", f"no library item {text[:40]!r}; they are numbered d1, d2 ...")
    return number


def file_name(name: str) -> str:
    """A base name fit to show and to download as (refused ``invalid_name`` otherwise)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if (not base or base in (".", "..") or len(base) > MAX_FILENAME_CHARS
            or any(unicodedata.category(c).startswith("C") for c in base)):
        raise Refusal("invalid_name", f"a deliverable's file name is a base name of 1 to {MAX_FILENAME_CHARS} "
                      "characters, with no control character")
    return base


def kind_of(media_type: str) -> str:
    major = media_type.split("/", 1)[0]
    if major in ("image", "video", "audio"):
        return major
    return {"application/pdf": "pdf", "text/html": "html", "application/zip": "archive",
            "application/gzip": "archive", "application/json": "text", "text/plain": "text",
            "text/markdown": "text", "text/csv": "text"}.get(media_type, "other")


class Library(PlazaAggregate):
    """The counter of deliverables."""

    class Created(PlazaAggregate.Created):
        pass

    class Numbered(PlazaAggregate.Event):
        number: str

        def apply(self, lib: Library) -> None:
            lib.count += 1

    def __init__(self) -> None:
        self.count = 0

    @classmethod
    def open(cls, ctx: Context) -> Library:
        return cls.start(ctx, id=LIBRARY_ID)

    def next_number(self, ctx: Context) -> str:
        number = f"{ITEM_PREFIX}{self.count + 1}"
        self.record(self.Numbered, ctx, number=number)
        return number


class Item(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        number: str
        title: str
        description: str
        filename: str
        media_type: str
        size: int
        sha256: str
        storage: str
        key: str
        task: str | None = None
        project: str | None = None

    class Deleted(PlazaAggregate.Event):
        number: str

        def apply(self, item: Item) -> None:
            item.deleted = True

    def __init__(self, number: str, title: str, description: str, filename: str, media_type: str, size: int,
                 sha256: str, storage: str, key: str, task: str | None = None, project: str | None = None) -> None:
        self.number, self.title, self.description, self.filename = number, title, description, filename
        self.media_type, self.size, self.sha256, self.storage, self.key = media_type, size, sha256, storage, key
        self.task, self.project = task, project
        self.deleted = False

    @classmethod
    def submit(cls, ctx: Context, number: str, *, title: str, description: str, filename: str, media_type: str,
               size: int, sha256: str, storage: str, key: str, task: str | None, project: str | None) -> Item:
        title = title.strip()
        if not title or len(title) > MAX_TITLE_CHARS:
            raise Refusal("bad_title", f"a deliverable's title is 1 to {MAX_TITLE_CHARS} characters")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise Refusal("body_too_long", f"a deliverable's description is at most {MAX_DESCRIPTION_CHARS} characters")
        if not 0 < size <= MAX_ITEM_BYTES:
            raise Refusal("item_too_large", f"a deliverable is 1 byte to {MAX_ITEM_BYTES >> 20} MiB")
        if SHA256_PATTERN.fullmatch(sha256) is None or storage not in STORAGES:
            raise Refusal("invalid_request", "a deliverable is kept with its SHA-256 and its storage")
        return cls.start(ctx, id=item_id(number), number=number, title=title, description=description,
                         filename=file_name(filename), media_type=media_type, size=size, sha256=sha256,
                         storage=storage, key=key, task=task, project=project)

    def delete(self, ctx: Context) -> None:
        if self.deleted:
            raise Refusal("no_item", f"library item {self.number} was deleted")
        self.record(self.Deleted, ctx, number=self.number)
