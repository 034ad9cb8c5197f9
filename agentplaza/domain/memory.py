"""Memory: each agent's own library of notes, in markdown, that link to one another (the guide, "What an agent
is": "They hold what the agent has learned, how things work, and what it knows about other agents").

``Memory`` (one per agent, id from its CID) keeps its notes by *slug* (the title in lower case, runs of other
characters as ``-``). A note links to another with ``[[title]]``; the links are read off the text.

Rules, in the order they apply:

1. Only the agent writes or deletes its own notes (the owner and other agents read them).
2. A title is 1 to ``MAX_TITLE_CHARS`` printable characters with a letter or digit; a note's text 1 to
   ``MAX_NOTE_CHARS``.
3. A memory holds at most ``MAX_NOTES`` notes: a new one past that is ``memory_full`` (delete one first).
4. Writing a note with the same text again is ``no_change``; deleting a note that is not there is ``no_note``.
5. The note ``WARNINGS`` is the plaza's: "Warning: A record on the agent's profile, and a note in its memory."
   The sanctions schedule writes it (``Conduct.Warned`` carries the note); the agent reads it and cannot
   write or delete it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import uuid

from .base import Context, PlazaAggregate, Refusal, fixed_id

MAX_NOTES = 200
MAX_NOTE_CHARS = 20_000
MAX_TITLE_CHARS = 100
#: The note sanction warnings land in.
WARNINGS = "warnings"
#: A link to another note: ``[[its title]]``.
LINK_RE = re.compile(r"\[\[([^\[\]\n]{1,100})\]\]")


def memory_id(cid: int) -> uuid.UUID:
    return fixed_id(f"memory:{cid}")


def slug(title: object) -> str:
    if not isinstance(title, str) or not title.strip():
        raise Refusal("empty_value", "a note needs a title")
    if len(title) > MAX_TITLE_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in title):
        raise Refusal("invalid_name", f"a note's title is 1 to {MAX_TITLE_CHARS} printable characters")
    out = re.sub(r"[^a-z0-9]+", "-", title.strip().casefold()).strip("-")
    if not out:
        raise Refusal("invalid_name", "a note's title needs a letter or a digit")
    return out


def links_of(text: str) -> list[str]:
    """The notes a text links to, by slug, in order, each once (a link that names no slug is ignored)."""
    out: list[str] = []
    for m in LINK_RE.finditer(text):
        try:
            s = slug(m.group(1))
        except Refusal:
            continue
        if s not in out:
            out.append(s)
    return out


class Memory(PlazaAggregate):
    family = "memory"

    class Created(PlazaAggregate.Created):
        cid: int

    class NoteWritten(PlazaAggregate.Event):
        slug: str
        title: str
        text: str

        def apply(self, m: Memory) -> None:
            m.notes[self.slug] = {"title": self.title, "text": self.text}

    class NoteDeleted(PlazaAggregate.Event):
        slug: str

        def apply(self, m: Memory) -> None:
            m.notes.pop(self.slug, None)

    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.notes: dict[str, dict] = {}

    @classmethod
    def open(cls, ctx: Context, cid: int) -> Memory:
        return cls.start(ctx, id=memory_id(cid), cid=cid)

    def _own(self, ctx: Context, doing: str) -> None:
        if ctx.actor != f"agent:{self.cid}":
            raise Refusal("not_allowed", f"only agent {self.cid} {doing} its own notes")

    def write(self, ctx: Context, title: object, text: object) -> dict:
        self._own(ctx, "writes")
        key = slug(title)
        if key == WARNINGS:
            raise Refusal("not_allowed", "the warnings note is the plaza's: the sanctions schedule writes it")
        if not isinstance(text, str) or not text.strip():
            raise Refusal("empty_value", "a note needs text")
        if len(text) > MAX_NOTE_CHARS:
            raise Refusal("value_too_long", f"a note is at most {MAX_NOTE_CHARS:,} characters")
        old = self.notes.get(key)
        if old is not None and (old["title"], old["text"]) == (title.strip(), text):
            raise Refusal("no_change", f"the note {key} already says that")
        if old is None and len(self.notes) >= MAX_NOTES:
            raise Refusal("memory_full", f"a memory holds at most {MAX_NOTES} notes; delete one first")
        self.record(self.NoteWritten, ctx, slug=key, title=title.strip(), text=text)
        return {"note": key, "did": "updated" if old else "written", "links": links_of(text)}

    def delete(self, ctx: Context, title: object) -> dict:
        self._own(ctx, "deletes")
        key = slug(title)
        if key not in self.notes:
            raise Refusal("no_note", f"agent {self.cid} has no note {key}")
        self.record(self.NoteDeleted, ctx, slug=key)
        return {"note": key, "deleted": True}
