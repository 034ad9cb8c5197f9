"""Editors over ACP: one editor session on one agent, kept with the rest of the plaza state.

``AcpSession`` is a thread an editor (Zed, a JetBrains IDE, Neovim) opened on one agent through
``agentplaza acp``: who opened it (a hub MCP token or the owner), the agent, the ACP version it
speaks, its title (from its first prompt) and each prompt's work item.  It outlives the editor and
the hub: an editor lists, loads or resumes it later.

Rules (the guide's "Editors over ACP"):

1. A prompt's text reaches the agent; the text of the files it attaches goes too, up to
   ``MAX_ATTACHMENT_BYTES`` in all, and the rest is left out (said so in the prompt).  Images are
   not sent.
2. A line that starts with one of ``SLASH_COMMANDS`` runs on the agent at once instead of queuing as
   chat; ``/extend-turns <n>`` takes 1..``MAX_EXTEND_TURNS``, ``/steer <note>`` a note.
3. The title is the first prompt's first line, cut to ``MAX_TITLE_CHARS``.
4. The repository mirror (``agentplaza acp --repo NAME``): the CLI pushes the editor's committed branch to
   the plaza repository as ``editor/<branch>`` (``editor/detached-<sha>`` on a detached HEAD) before each
   session and prompt, and says so in the request's ``_meta`` under ``MIRROR_META``; the prompt told to
   the agent then says where the project is (``mirror_note``). The agent works on ``acp/<session>`` and
   opens a pull request into the editor's branch.
5. Write-back (``acp_write_back``): an editor that can write files is asked, once per pull request of
   the mirror, whether to apply it; unanswered after ``WRITE_BACK_WAIT_S``, nothing is written.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from ..wire import ACP_MIRROR_META
from .agents import MAX_TELL_CHARS
from .base import Context, PlazaAggregate, Refusal
from .git import branch_name, repo_name

#: The guide: "Their text goes to the agent up to 256 KiB in all, and the rest is left out."
MAX_ATTACHMENT_BYTES = 256 * 1024
#: What a prompt told to the agent may hold: its own text and its attachments (and their headers).
MAX_PROMPT_CHARS = MAX_TELL_CHARS + MAX_ATTACHMENT_BYTES + 4096
MAX_TITLE_CHARS = 80
MAX_CWD_CHARS = 1000
#: The plaza's slash commands an editor sees (name, what it does, its input's hint or None).
SLASH_COMMANDS = (
    ("compress", "summarise the conversation", None),
    ("steer", "steer the work in progress", "a note for the agent"),
    ("extend-turns", "allow more model calls", "how many more"),
    ("stop", "stop the work", None),
)
MAX_EXTEND_TURNS = 1000
MAX_STEER_CHARS = 2000
#: Where the CLI says what it pushed, in a request's ``_meta``.
MIRROR_META = ACP_MIRROR_META
#: The guide: "A denied ask, or one left unanswered for 10 minutes, writes nothing".
WRITE_BACK_WAIT_S = 600
#: The most files write-back writes for one pull request.
MAX_WRITE_BACK_FILES = 200
#: What a cut attachment says in its place.
CUT_NOTE = "[attachments cut at 256 KiB: the rest is left out]"


@dataclass(frozen=True)
class Slash:
    name: str
    arg: str | int | None


def slash_command(text: str) -> Slash | None:
    """The slash command a prompt is, or None (a prompt that is chat)."""
    t = text.strip()
    if not t.startswith("/"):
        return None
    word, _, rest = t[1:].partition(" ")
    rest = rest.strip()
    names = [n for n, _, _ in SLASH_COMMANDS]
    if word not in names:
        return None  # "/etc/hosts is odd": chat that happens to start with a slash
    if word == "extend-turns":
        if not rest.isdigit() or not 1 <= int(rest) <= MAX_EXTEND_TURNS:
            raise Refusal("invalid_count", f"/extend-turns takes a whole number from 1 to {MAX_EXTEND_TURNS}")
        return Slash(word, int(rest))
    if word == "steer":
        if not rest:
            raise Refusal("empty_message", "/steer takes a note: /steer <note>")
        if len(rest) > MAX_STEER_CHARS:
            raise Refusal("message_too_long", f"a /steer note is at most {MAX_STEER_CHARS} characters")
        return Slash(word, rest)
    if rest:
        raise Refusal("invalid_request", f"/{word} takes nothing after it")
    return Slash(word, None)


def prompt_text(blocks: list[dict]) -> tuple[str, dict]:
    """What a prompt's content blocks tell the agent, and what was left out.

    Text blocks are the prompt; an embedded text resource is an attachment (its text, under its
    URI); a resource link is named only; images, audio and binary resources are not sent."""
    said: list[str] = []
    files: list[tuple[str, str]] = []
    left = {"images": 0, "binary": 0, "cut_bytes": 0, "links": 0}
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            said.append(str(b.get("text") or ""))
        elif kind == "resource":
            r = b.get("resource") or {}
            if isinstance(r.get("text"), str):
                files.append((str(r.get("uri") or "attachment")[:300], r["text"]))
            else:
                left["binary"] += 1
        elif kind == "resource_link":
            said.append(f"[file: {str(b.get('uri') or '')[:300]}]")
            left["links"] += 1
        elif kind in ("image", "audio"):
            left["images"] += 1
    text = "\n".join(s for s in said if s)
    if len(text) > MAX_TELL_CHARS:
        raise Refusal("message_too_long", f"a prompt's own text is at most {MAX_TELL_CHARS} characters")
    budget = MAX_ATTACHMENT_BYTES
    parts = [text]
    for uri, body in files:
        data = body.encode()
        if len(data) > budget:
            left["cut_bytes"] += len(data) - budget
            data = data[:budget]
        budget -= len(data)
        if data:
            parts.append(f"--- attached: {uri} ---\n" + data.decode(errors="ignore"))
    if left["cut_bytes"]:
        parts.append(CUT_NOTE)
    return "\n\n".join(p for p in parts if p), left


def title_of(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:MAX_TITLE_CHARS]


class AcpSession(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        cid: int
        caller: str  # "owner" or "token:<id>"
        protocol: int
        cwd: str

    class Prompted(PlazaAggregate.Event):
        item: str
        title: str | None  # set by the first prompt

        def apply(self, s: AcpSession) -> None:
            s.items.append(self.item)
            if self.title is not None:
                s.title = self.title

    class Opened(PlazaAggregate.Event):
        """The session was loaded or resumed (by an editor, maybe after a hub restart)."""

        how: str  # load or resume
        caller: str

        def apply(self, s: AcpSession) -> None:
            pass

    def __init__(self, cid: int, caller: str, protocol: int, cwd: str) -> None:
        self.cid, self.caller, self.protocol, self.cwd = cid, caller, protocol, cwd
        self.title: str | None = None
        self.items: list[str] = []

    @classmethod
    def open_new(cls, ctx: Context, session_id, cid: int, caller: str, protocol: int, cwd: str) -> AcpSession:
        if len(cwd) > MAX_CWD_CHARS:
            raise Refusal("invalid_request", f"cwd is at most {MAX_CWD_CHARS} characters")
        return cls.start(ctx, id=session_id, cid=cid, caller=caller, protocol=protocol, cwd=cwd)

    def prompted(self, ctx: Context, item: str, text: str) -> None:
        self.record(self.Prompted, ctx, item=item, title=title_of(text) if self.title is None else None)

    def reopen(self, ctx: Context, how: str, caller: str) -> None:
        if how not in ("load", "resume"):
            raise Refusal("invalid_request", "a session is loaded or resumed")
        self.record(self.Opened, ctx, how=how, caller=caller)


@dataclass(frozen=True)
class Mirror:
    """What the CLI pushed for an editor's project: the plaza repository and branch, the commit, whether
    the project had uncommitted changes, or why the push failed."""

    repo: str
    branch: str | None
    commit: str | None
    dirty: bool
    failed: str | None


def mirror_of(meta: object) -> Mirror | None:
    """The mirror a request's ``_meta`` names, checked (None where it names none)."""
    m = meta.get(MIRROR_META) if isinstance(meta, dict) else None
    if m is None:
        return None
    if not isinstance(m, dict):
        raise Refusal("invalid_request", f"{MIRROR_META} is an object")
    failed = m.get("failed")
    branch, commit = m.get("branch"), m.get("commit")
    if failed is None and not (isinstance(commit, str) and len(commit) in (40, 64) and commit.isalnum()):
        raise Refusal("invalid_request", f"{MIRROR_META} names the commit it pushed")
    return Mirror(repo_name(m.get("repo")), branch_name(branch) if failed is None else None,
                  commit if failed is None else None, m.get("dirty") is True,
                  str(failed)[:300] if failed is not None else None)


def work_branch(session_id: str) -> str:
    return f"acp/{session_id}"


def mirror_note(m: Mirror, session_id: str, clone_url: str) -> str:
    """What the agent is told, under the prompt, about the editor's project."""
    if m.failed is not None:
        return (f"\n\n[The editor's project could not be pushed to the plaza repository {m.repo}: {m.failed}. "
                "You do not have it for this prompt.]")
    dirty = (" The project has uncommitted changes; they are not in the branch." if m.dirty else "")
    return (f"\n\n[The editor's project is the plaza repository {m.repo}, branch {m.branch} (commit "
            f"{m.commit[:12]}).{dirty} Clone it in your VM (git clone {clone_url}), work on the branch "
            f"{work_branch(session_id)}, push it, and open a pull request into {m.branch} with plaza_git "
            "(op open_pr). The editor is shown that pull request.]")


def project_path(root: str, path: object) -> str | None:
    """Where a file of an agent's pull request lies in the editor's project, or None where it would lie
    outside it (an absolute path, a ``..``, a NUL: the pull request is the agent's word, and write-back
    writes on the owner's machine)."""
    if not isinstance(path, str) or not path or "\0" in path or path.startswith("/"):
        return None
    base = posixpath.normpath(root)
    full = posixpath.normpath(posixpath.join(base, path))
    return full if full.startswith(base.rstrip("/") + "/") else None
