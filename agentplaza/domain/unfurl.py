"""What a preview target names: a task (``#12``, ``task #12``, ``t12``), an agent (``@Builder``, ``@7``),
an approval (``a3``), or a link; and what a GitHub link is (pull request, issue, commit ...). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .base import Refusal
from .names import check_cid, short_number

#: The longest target the hub reads.
MAX_TARGET_CHARS = 2000
TASK, AGENT, APPROVAL, LINK = "task", "agent", "approval", "link"

_TASK = re.compile(r"(?:task\s*)?#\s*(\d+)|task\s+(t?\d+)|(t\d+)", re.I)
_APPROVAL = re.compile(r"(?:approval\s*)?(a\d+)", re.I)
#: GitHub's paths, each with the kind of thing it is (the guide's chips: pull requests, issues,
#: commits, repositories, files, releases and runs; gists count too).
_GITHUB = (
    (re.compile(r"/([^/]+)/([^/]+)/pull/(\d+)"), "pull request", "{0}/{1}#{2}"),
    (re.compile(r"/([^/]+)/([^/]+)/issues/(\d+)"), "issue", "{0}/{1}#{2}"),
    (re.compile(r"/([^/]+)/([^/]+)/commit/([0-9a-f]{7,40})"), "commit", "{0}/{1}@{2:.7}"),
    (re.compile(r"/([^/]+)/([^/]+)/releases/tag/([^/]+)"), "release", "{0}/{1} {2}"),
    (re.compile(r"/([^/]+)/([^/]+)/actions/runs/(\d+)"), "run", "{0}/{1} run {2}"),
    (re.compile(r"/([^/]+)/([^/]+)/(?:blob|tree)/([^/]+)/(.+)"), "file", "{0}/{1}:{3}"),
    (re.compile(r"/([^/]+)/([^/]+)/?"), "repository", "{0}/{1}"),
)


@dataclass(frozen=True)
class Target:
    kind: str  # task, agent, approval or link
    ref: str  # t12, the agent's name or cid, a3, or the link itself


def target(text: object) -> Target:
    """What ``text`` names; ``invalid_target`` when it names nothing a card can show."""
    if not isinstance(text, str) or not text.strip():
        raise Refusal("invalid_target", "name a target: #N or task #N, @Name, or a link")
    t = text.strip()
    if len(t) > MAX_TARGET_CHARS:
        raise Refusal("invalid_target", f"a target is at most {MAX_TARGET_CHARS} characters")
    m = _TASK.fullmatch(t)
    if m:
        number = short_number("t", next(g for g in m.groups() if g).lower())
        if number is None:
            raise Refusal("no_task", f"no task {t!r}; tasks are numbered t1, t2 ...")
        return Target(TASK, number)
    m = _APPROVAL.fullmatch(t)
    if m and short_number("a", m.group(1).lower()):
        return Target(APPROVAL, m.group(1).lower())
    if t.startswith("@"):
        return Target(AGENT, check_cid(t[1:].strip(), "an agent"))
    parts = urlsplit(t)
    if parts.scheme in ("http", "https") and parts.netloc:
        return Target(LINK, t)
    raise Refusal("invalid_target", f"{t[:80]!r} is not #N, task #N, @Name or an http(s) link")


def github(url: str) -> tuple[str, str] | None:
    """A GitHub (or gist) link's kind and short label, or None for any other link."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host == "gist.github.com":
        return "gist", "gist " + parts.path.strip("/").split("/")[-1]
    if host not in ("github.com", "www.github.com"):
        return None
    for pattern, kind, label in _GITHUB:
        m = pattern.fullmatch(parts.path)
        if m:
            return kind, label.format(*m.groups())
    return None
