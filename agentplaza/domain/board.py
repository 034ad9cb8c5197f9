"""The board: the plaza's public noticeboard, and each agent's read marker on it.

- ``Board`` (one, ``BOARD_ID``): posts ``p1``, ``p2`` ... and their replies, the posts it keeps (at
  most ``BOARD_CAPACITY``: a new post past that drops the oldest, with its replies), which deliveries
  are paused (the whole board, or one project's) and the mentions that wait for a resume, and who
  has taken part in each project's board (``@all`` on a project board reaches them).
- ``BoardMarker`` (one per agent): the last post it has seen, so the board shows it what is new.

A post or a reply names agents with ``@name`` (an agent's name or a role: every agent of it) and
``@all`` (everyone on the project; every agent when the post has no project). Mentions are delivered
to the named agents' queues in the post's own commit (``commands.board``), each once: a paused board
records them as waiting and delivers them in the resume's commit. The domain decides who is named
and whether delivery waits; the command tells the agents.

Rules, in the order they apply:

1. A post's text is 1 to ``MAX_POST_CHARS`` characters; a reply's too.
2. A project is named by ``PROJECT_RE``; a task by its number (``names.task_number``).
3. A reply answers a post the board still keeps (``no_post`` otherwise).
4. Pausing a paused scope, or resuming a running one, is ``no_change``.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import POST_PREFIX

BOARD_ID = fixed_id("board")
#: The most posts the board keeps; a new post past it drops the oldest (and its replies).
BOARD_CAPACITY = 500
#: The longest post or reply.
MAX_POST_CHARS = 8_000
#: A project's id on the board: matched whole.
PROJECT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: A mention: ``@`` then a name or a role (a name's spaces are not part of a mention). Not inside a word
#: (an e-mail address names nobody).
MENTION_RE = re.compile(r"(?<![\w@])@([A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*)")
#: The mention that means everyone on the project (every agent when the post has no project).
ALL = "all"
#: The scope of the whole board in the paused list (a project's scope is its id).
WHOLE = ""


def marker_id(cid: int) -> uuid.UUID:
    return fixed_id(f"board-marker:{cid}")


def check_text(text: str, what: str = "a post") -> str:
    if not isinstance(text, str) or not text.strip():
        raise Refusal("empty_message", f"{what} needs text")
    if len(text) > MAX_POST_CHARS:
        raise Refusal("message_too_long", f"{what} is at most {MAX_POST_CHARS:,} characters")
    return text


def check_project(project: str | None) -> str | None:
    if project is None:
        return None
    if not isinstance(project, str) or not PROJECT_RE.fullmatch(project):
        raise Refusal("invalid_project", "a project id is 1 to 64 letters, digits, '.', '-' or '_'")
    return project


def mentions_in(text: str) -> list[str]:
    """The mention words of a text, lower-cased, each once, in order."""
    out: list[str] = []
    for m in MENTION_RE.finditer(text):
        word = m.group(1).lower()
        if word not in out:
            out.append(word)
    return out


def mentions_all(text: str) -> bool:
    return ALL in mentions_in(text)


@dataclass(frozen=True)
class Member:
    """An agent as the board sees it, to resolve a mention: its CID, name and role."""

    cid: int
    name: str | None
    role: str


def named(text: str, roster: Iterable[Member], members: Iterable[int] | None, author: int | None) -> list[int]:
    """The CIDs a text mentions, sorted, never its author. ``members`` is who is on the post's project
    (None: the post has no project, and ``@all`` is every agent)."""
    words = mentions_in(text)
    roster = list(roster)
    found: set[int] = set()
    for w in words:
        if w == ALL:
            found |= {m.cid for m in roster} if members is None else set(members) & {m.cid for m in roster}
            continue
        by_name = {m.cid for m in roster if m.name is not None and _mention_form(m.name) == w}
        found |= by_name or {m.cid for m in roster if m.role == w}
    return sorted(found - {author})


def _mention_form(name: str) -> str:
    """How a name is written in a mention: lower-case, spaces as '-' ("Ann Lee" is @ann-lee)."""
    return name.strip().lower().replace(" ", "-")


def author_cid(actor: str) -> int | None:
    kind, _, rest = actor.partition(":")
    return int(rest) if kind == "agent" and rest.isdigit() else None


class Board(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        pass

    class Posted(PlazaAggregate.Event):
        number: str
        text: str
        project: str | None
        task: str | None
        mentions: list[int]
        held: bool  # the mentions wait for a resume
        file: str | None = None  # a shared file the post carries (f3: the file store's number)

        def apply(self, b: Board) -> None:
            b.next += 1
            b.live.append(self.number)
            b.project_of[self.number] = self.project or WHOLE
            b.replies[self.number] = 0
            b._took_part(self.project, self.actor, self.mentions)
            if self.held and self.mentions:
                b.pending[self.number] = {"cids": list(self.mentions), "text": self.text, "by": self.actor}

    class Replied(PlazaAggregate.Event):
        post: str
        reply: int
        text: str
        mentions: list[int]
        held: bool

        def apply(self, b: Board) -> None:
            b.replies[self.post] = self.reply
            project = b.project_of.get(self.post) or None
            b._took_part(project, self.actor, self.mentions)
            if self.held and self.mentions:
                b.pending[f"{self.post}.r{self.reply}"] = {"cids": list(self.mentions), "text": self.text,
                                                           "by": self.actor}

    class Dropped(PlazaAggregate.Event):
        """The board was full: its oldest post (and that post's replies) is gone."""
        number: str

        def apply(self, b: Board) -> None:
            b.live.remove(self.number)
            b.project_of.pop(self.number, None)
            b.replies.pop(self.number, None)

    class Paused(PlazaAggregate.Event):
        project: str | None

        def apply(self, b: Board) -> None:
            b.paused.append(self.project or WHOLE)

    class Resumed(PlazaAggregate.Event):
        project: str | None
        released: list[str]  # the posts and replies (p3, p3.r1) whose mentions are delivered now

        def apply(self, b: Board) -> None:
            b.paused.remove(self.project or WHOLE)
            for key in self.released:
                b.pending.pop(key, None)

    def __init__(self) -> None:
        self.next = 1
        self.live: list[str] = []
        self.project_of: dict[str, str] = {}
        self.replies: dict[str, int] = {}
        self.paused: list[str] = []
        self.pending: dict[str, dict] = {}  # post or reply -> {"cids", "text", "by"}: mentions held
        self.members: dict[str, list[int]] = {}  # project -> the agents that took part in its board

    @classmethod
    def open(cls, ctx: Context) -> Board:
        return cls.start(ctx, id=BOARD_ID)

    def _took_part(self, project: str | None, actor: str, mentions: list[int]) -> None:
        if project is None:
            return
        seen = self.members.setdefault(project, [])
        for cid in [author_cid(actor), *mentions]:
            if cid is not None and cid not in seen:
                seen.append(cid)

    # -- what the board knows -------------------------------------------------------------------------
    def holds(self, number: str) -> bool:
        return number in self.live

    def is_paused(self, project: str | None) -> bool:
        return WHOLE in self.paused or (project is not None and project in self.paused)

    def members_of(self, project: str | None) -> list[int] | None:
        return None if project is None else list(self.members.get(project, ()))

    def project_of_post(self, number: str) -> str | None:
        return self.project_of.get(number) or None

    # -- decisions --------------------------------------------------------------------------------------
    def post(self, ctx: Context, text: str, project: str | None, task: str | None, mentions: list[int],
             file: str | None = None) -> str:
        """Post; its number. Past ``BOARD_CAPACITY`` the oldest post is dropped first."""
        check_text(text)
        check_project(project)
        number = f"{POST_PREFIX}{self.next}"
        while len(self.live) >= BOARD_CAPACITY:
            self.record(self.Dropped, ctx, number=self.live[0])
        self.record(self.Posted, ctx, number=number, text=text, project=project, task=task,
                    mentions=list(mentions), held=self.is_paused(project), file=file)
        return number

    def reply(self, ctx: Context, post: str, text: str, mentions: list[int]) -> int:
        """Reply to a post the board keeps; the reply's number within the post."""
        check_text(text, "a reply")
        if not self.holds(post):
            raise Refusal("no_post", f"no post {post} on the board (posts are numbered p1, p2 ...; the board "
                                     f"keeps the last {BOARD_CAPACITY})")
        n = self.replies[post] + 1
        self.record(self.Replied, ctx, post=post, reply=n, text=text, mentions=list(mentions),
                    held=self.is_paused(self.project_of_post(post)))
        return n

    def pause(self, ctx: Context, project: str | None) -> None:
        check_project(project)
        if (project or WHOLE) in self.paused:
            raise Refusal("no_change", f"deliveries for {_scope(project)} are already paused")
        self.record(self.Paused, ctx, project=project)

    def resume(self, ctx: Context, project: str | None) -> dict[str, dict]:
        """Resume; the waiting mentions it releases (post or reply -> {"cids", "text", "by"}), to deliver in
        this commit."""
        check_project(project)
        scope = project or WHOLE
        if scope not in self.paused:
            raise Refusal("no_change", f"deliveries for {_scope(project)} are not paused")
        still = [s for s in self.paused if s != scope]
        released = {key: held for key, held in self.pending.items()
                    if WHOLE not in still and (self.project_of.get(key.split(".")[0], WHOLE) not in still)}
        self.record(self.Resumed, ctx, project=project, released=list(released))
        return released


def _scope(project: str | None) -> str:
    return f"project {project}" if project else "the whole board"


class BoardMarker(PlazaAggregate):
    """One agent's read marker: the highest post number it has been shown."""

    family = "board"

    class Created(PlazaAggregate.Created):
        cid: int

    class Seen(PlazaAggregate.Event):
        upto: int

        def apply(self, m: BoardMarker) -> None:
            m.upto = self.upto

    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.upto = 0

    @classmethod
    def open(cls, ctx: Context, cid: int) -> BoardMarker:
        return cls.start(ctx, id=marker_id(cid), cid=cid)

    def seen(self, ctx: Context, upto: int) -> bool:
        """Move the marker forward (never back); whether it moved."""
        if upto <= self.upto:
            return False
        self.record(self.Seen, ctx, upto=upto)
        return True


def post_index(number: str) -> int:
    return int(number[len(POST_PREFIX):])
