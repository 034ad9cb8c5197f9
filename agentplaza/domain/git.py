"""The plaza's git server, as the log sees it: repositories, the ref moves of accepted pushes, and pull
requests with their comments, reviews, merge and close.

The repositories' bytes are data on the hub's disk (``runtime.gitstore``), like the vault's files; what
matters to the plaza is an event here: a repository created, a push accepted with each ref it moved
(old and new commit), a pull request opened, a comment, a review, a merge (the commit it made and the
target's old and new commit), a close. The read models fold these; git is never asked for history the
log should hold.

Rules, in the order the commands apply them:

- A repository's name is ``REPO_PATTERN`` (lower-case letters, digits, ``-`` and ``_``: no dot, no
  slash, so no name leads out of the repositories' folder and none ends in ``.git``).
- A ref a push may move is a branch (``refs/heads/NAME``) or a tag (``refs/tags/NAME``), NAME of
  ``BRANCH_PATTERN`` with none of git's forbidden sequences; any other ref (``refs/pull/...``,
  ``refs/notes/...``, ``HEAD``) is refused, so nothing lands outside the repository's branches and tags.
- The default branch is protected: an agent's push to it, and anyone's deletion of it, are refused;
  changes reach it by a merge. The owner may push to it (the owner seeds a repository as on any host).
- A pull request goes from one existing branch to another of the same repository; one open pull
  request per source and target.
- Only an open pull request is commented, reviewed, merged or closed. Nobody reviews their own pull
  request (the laws say so for agents, S-024; the domain holds it for every caller).
"""

from __future__ import annotations

import re
import uuid

from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import short_number

#: The guide ("The repository mirror"): "a plaza repository name: lowercase letters, digits, ., _ and -, up
#: to 100 characters". Here it starts with a letter or digit, holds no "..", and does not end in ".git"
#: (the smart HTTP path adds that), ".lock" or ".".
MAX_REPO_CHARS = 100
REPO_PATTERN = re.compile(rf"[a-z0-9][a-z0-9._-]{{0,{MAX_REPO_CHARS - 1}}}")
REPO_FORBIDDEN_ENDS = (".git", ".lock", ".")
#: The longest branch or tag name (after refs/heads/ or refs/tags/).
MAX_BRANCH_CHARS = 200
BRANCH_PATTERN = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._/-]{{0,{MAX_BRANCH_CHARS - 1}}}")
#: What git's check-ref-format forbids inside a name that the pattern lets through.
BRANCH_FORBIDDEN = ("..", "//", "/.", ".lock/", "@{")
#: The branch every repository starts with, protected.
DEFAULT_BRANCH = "main"
BRANCH_PREFIX, TAG_PREFIX = "refs/heads/", "refs/tags/"
#: The all-zero object name git uses for "no commit" (a ref created or deleted).
ZERO = "0" * 40
OID_PATTERN = re.compile(r"[0-9a-f]{40}")
#: A pull request's title and body, and a comment's or a review's text, in characters.
MAX_TITLE_CHARS, MAX_BODY_CHARS, MAX_TEXT_CHARS = 200, 20_000, 20_000
#: Pull requests are numbered pr1, pr2 ...
PR_PREFIX = "pr"
#: A review's verdicts, and how a merge was made.
VERDICTS = ("approve", "request_changes")
MERGE_METHODS = ("auto", "ff", "merge")
PR_STATES = ("open", "merged", "closed")
#: The most ref moves one push records.
MAX_MOVES = 100

FORGE_ID = fixed_id("git-forge")


def repo_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:git-repo:{name}")


def pr_id(number: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"agentplaza:git-pr:{number}")


def repo_name(name: object) -> str:
    if (not isinstance(name, str) or REPO_PATTERN.fullmatch(name) is None or ".." in name
            or name.endswith(REPO_FORBIDDEN_ENDS)):
        raise Refusal("invalid_repo", f"a repository name is a lower-case letter or digit, then lower-case letters, "
                      f"digits, ., _ and - (at most {MAX_REPO_CHARS}, no '..', not ending in .git); "
                      f"{str(name)[:80]!r} is not one")
    return name


def branch_name(name: object) -> str:
    """A branch (or tag) name as git allows it, stricter: no leading ``-`` or ``.``, none of git's
    forbidden sequences, no trailing ``/``, ``.`` or ``.lock``."""
    ok = (isinstance(name, str) and BRANCH_PATTERN.fullmatch(name) is not None
          and not any(s in name + "/" for s in BRANCH_FORBIDDEN) and not name.endswith(("/", ".", ".lock")))
    if not ok:
        raise Refusal("invalid_branch", f"{str(name)[:80]!r} is not a branch name this server takes (letters, digits, "
                      f"., _, - and /, at most {MAX_BRANCH_CHARS}, no '..', '//' or '@{{')")
    return name  # type: ignore[return-value]


def pr_number(value: object) -> str:
    text = str(value).strip().lstrip("#") if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    number = short_number(PR_PREFIX, text)
    if number is None:
        raise Refusal("no_pull_request", f"no pull request {str(value).strip()[:40]!r}; they are numbered pr1, pr2 ...")
    return number


def is_agent(actor: str) -> bool:
    return actor.startswith("agent:")


def check_move(repo: Repo, actor: str, ref: str, old: str, new: str) -> None:
    """May ``actor`` move ``ref`` from ``old`` to ``new``? (A refusal names the ref.)"""
    if not (OID_PATTERN.fullmatch(old) and OID_PATTERN.fullmatch(new)):
        raise Refusal("invalid_ref", f"{ref[:80]!r}: an object name is 40 hexadecimal digits")
    if ref.startswith(BRANCH_PREFIX):
        branch = branch_name(ref[len(BRANCH_PREFIX):])
    elif ref.startswith(TAG_PREFIX):
        branch_name(ref[len(TAG_PREFIX):])
        branch = None
    else:
        raise Refusal("invalid_ref", f"only branches (refs/heads/...) and tags (refs/tags/...) are pushed here, "
                      f"not {ref[:80]!r}")
    if branch == repo.default_branch:
        if new == ZERO:
            raise Refusal("protected_branch", f"{repo.default_branch} is the default branch of {repo.name}; it is "
                          "never deleted")
        if is_agent(actor):
            raise Refusal("protected_branch", f"{repo.default_branch} is the default branch of {repo.name}: push to a "
                          "branch of your own and open a pull request; changes reach it by a merge")


class Forge(PlazaAggregate):
    """The server's counter of pull requests (numbers are the plaza's, across repositories)."""

    class Created(PlazaAggregate.Created):
        pass

    class Numbered(PlazaAggregate.Event):
        number: str

        def apply(self, f: Forge) -> None:
            f.count += 1

    def __init__(self) -> None:
        self.count = 0

    @classmethod
    def open(cls, ctx: Context) -> Forge:
        return cls.start(ctx, id=FORGE_ID)

    def next_number(self, ctx: Context) -> str:
        number = f"{PR_PREFIX}{self.count + 1}"
        self.record(self.Numbered, ctx, number=number)
        return number


class Repo(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        name: str
        default_branch: str
        head: str  # the default branch's first commit, made by the hub
        project: str | None = None

    class Pushed(PlazaAggregate.Event):
        repo: str
        moves: list  # [{"ref", "old", "new"}]: what the push moved, as git accepted it

        def apply(self, r: Repo) -> None:
            r.pushes += 1

    class PullIndexed(PlazaAggregate.Event):
        """An open pull request's source and target (one open pull request per pair), or its end."""
        key: str
        number: str | None

        def apply(self, r: Repo) -> None:
            if self.number is None:
                r.open_prs.pop(self.key, None)
            else:
                r.open_prs[self.key] = self.number

    def __init__(self, name: str, default_branch: str, head: str, project: str | None = None) -> None:
        self.name, self.default_branch, self.head, self.project = name, default_branch, head, project
        self.pushes = 0
        self.open_prs: dict[str, str] = {}

    @classmethod
    def create(cls, ctx: Context, name: str, head: str, project: str | None = None) -> Repo:
        repo_name(name)
        if OID_PATTERN.fullmatch(head) is None:
            raise Refusal("invalid_ref", "a repository starts from one commit")
        return cls.start(ctx, id=repo_id(name), name=name, default_branch=DEFAULT_BRANCH, head=head, project=project)

    def pushed(self, ctx: Context, moves: list[dict]) -> None:
        if not moves:
            raise Refusal("no_change", "the push moved no ref")
        if len(moves) > MAX_MOVES:
            raise Refusal("too_many_refs", f"one push moves at most {MAX_MOVES} refs")
        for m in moves:
            check_move(self, ctx.actor, m["ref"], m["old"], m["new"])
        self.record(self.Pushed, ctx, repo=self.name, moves=[{"ref": m["ref"], "old": m["old"], "new": m["new"]} for m in moves])

    def index(self, ctx: Context, source: str, target: str, number: str | None) -> None:
        key = f"{source}\n{target}"
        if number is not None and key in self.open_prs:
            raise Refusal("pull_request_exists", f"{self.open_prs[key]} is already open from {source} into {target}")
        self.record(self.PullIndexed, ctx, key=key, number=number)


class PullRequest(PlazaAggregate):
    class Created(PlazaAggregate.Created):
        number: str
        repo: str
        source: str
        target: str
        title: str
        body: str
        author: str
        head: str  # the source's commit when it was opened
        base: str  # the target's commit when it was opened

    class Commented(PlazaAggregate.Event):
        number: str
        text: str

        def apply(self, p: PullRequest) -> None:
            p.comments += 1

    class Reviewed(PlazaAggregate.Event):
        number: str
        verdict: str
        text: str
        head: str  # the source's commit the review saw

        def apply(self, p: PullRequest) -> None:
            p.reviews[self.actor] = self.verdict

    class Merged(PlazaAggregate.Event):
        number: str
        method: str  # ff or merge
        commit: str  # the target's new commit
        old: str  # the target's commit before
        head: str  # the source's commit merged

        def apply(self, p: PullRequest) -> None:
            p.state, p.head = "merged", self.head

    class Closed(PlazaAggregate.Event):
        number: str

        def apply(self, p: PullRequest) -> None:
            p.state = "closed"

    def __init__(self, number: str, repo: str, source: str, target: str, title: str, body: str, author: str,
                 head: str, base: str) -> None:
        self.number, self.repo, self.source, self.target = number, repo, source, target
        self.title, self.body, self.author, self.head, self.base = title, body, author, head, base
        self.state = "open"
        self.comments = 0
        self.reviews: dict[str, str] = {}

    @classmethod
    def open(cls, ctx: Context, number: str, repo: Repo, source: str, target: str, title: str, body: str,
             head: str, base: str) -> PullRequest:
        branch_name(source)
        branch_name(target)
        if source == target:
            raise Refusal("same_branch", "a pull request goes from one branch into another")
        title, body = title.strip(), body
        if not title or len(title) > MAX_TITLE_CHARS:
            raise Refusal("bad_title", f"a pull request's title is 1 to {MAX_TITLE_CHARS} characters")
        if len(body) > MAX_BODY_CHARS:
            raise Refusal("body_too_long", f"a pull request's body is at most {MAX_BODY_CHARS} characters")
        if head == base:
            raise Refusal("nothing_to_merge", f"{source} has nothing that {target} lacks")
        repo.index(ctx, source, target, number)
        return cls.start(ctx, id=pr_id(number), number=number, repo=repo.name, source=source, target=target,
                         title=title, body=body, author=ctx.actor, head=head, base=base)

    def _open(self) -> None:
        if self.state != "open":
            raise Refusal("pull_request_closed", f"{self.number} is {self.state}")

    def comment(self, ctx: Context, text: str) -> None:
        self._open()
        _text(text, "a comment")
        self.record(self.Commented, ctx, number=self.number, text=text)

    def review(self, ctx: Context, verdict: str, text: str, head: str) -> None:
        self._open()
        if verdict not in VERDICTS:
            raise Refusal("invalid_verdict", f"a review is {' or '.join(VERDICTS)}")
        if ctx.actor == self.author:
            raise Refusal("own_work", f"{self.number} is your own pull request; another agent or the owner reviews it")
        if verdict == "request_changes":
            _text(text, "a request for changes")
        elif len(text) > MAX_TEXT_CHARS:
            raise Refusal("body_too_long", f"a review's notes are at most {MAX_TEXT_CHARS} characters")
        self.record(self.Reviewed, ctx, number=self.number, verdict=verdict, text=text, head=head)

    def check_mergeable(self) -> None:
        self._open()

    def merged(self, ctx: Context, repo: Repo, method: str, commit: str, old: str, head: str) -> None:
        self._open()
        repo.index(ctx, self.source, self.target, None)
        self.record(self.Merged, ctx, number=self.number, method=method, commit=commit, old=old, head=head)

    def close(self, ctx: Context, repo: Repo) -> None:
        self._open()
        repo.index(ctx, self.source, self.target, None)
        self.record(self.Closed, ctx, number=self.number)


def _text(text: str, what: str) -> None:
    if not text.strip():
        raise Refusal("empty_message", f"{what} needs a text")
    if len(text) > MAX_TEXT_CHARS:
        raise Refusal("body_too_long", f"{what} is at most {MAX_TEXT_CHARS} characters")
