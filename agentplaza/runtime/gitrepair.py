"""At the git server's start, every repository's refs put back where the log says they are.

Each writer of a ref moves it with git first and records the move after (a push: ``githttp.serve``,
``Repo.Pushed``; a merge: ``forge.GitServer.merge``, ``PullRequest.Merged``; a code project's spec commit:
``projectrepo.commit_spec``, ``Repo.Pushed`` by the hub). When the log refuses the record, the writer
puts the ref back; a hub that dies between the two cannot, and leaves a ref moved that no event names.
The log is the plaza's truth, so at the next start (``forge.GitServer``, made before apid listens and
before the agents' git door serves) this module makes git agree with it. The rule, in one place:

1. What the log says of a repository is folded from its own events and its pull requests', read from the
   store (never from a read model, which may lag the log at start): ``Repo.Created`` puts its first commit
   on the default branch; each ``Repo.Pushed`` move sets its ref to ``new`` (all zeros: deleted); a merge
   sets the pull request's target to the commit it made. A merge is recorded in one commit with the
   repository's ``PullIndexed`` that ends its pull request (``domain.git.PullRequest.merged``), so the
   repository's own event order places it exactly among the pushes.
2. A ref git holds at another commit than the log's is set to the log's (``update-ref NEW OLD``, only if it
   is still where it was read). A ref git holds that the log never recorded (or recorded deleted) is
   deleted. A ref the log names whose object git lacks (a repository restored older than the log) is
   left as it is and reported: git's objects are never invented.
3. Objects are never deleted (what no ref reaches any more is left for ``git gc``), a repository on disk
   that the log never recorded is left for the next ``create`` of it, and a repository whose events
   cannot be read is left untouched. Each repaired ref is one warning line in the hub's log: repository,
   ref, from, to.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..domain.base import Refusal
from ..domain.git import BRANCH_PREFIX, ZERO, PullRequest, Repo, pr_id, repo_id, repo_name
from .gitstore import GIT, GitStore

log = logging.getLogger(__name__)

#: How a repository's folder is named on disk (``NAME.git``).
REPO_SUFFIX = ".git"


@dataclass(frozen=True)
class Repaired:
    """One ref git held otherwise than the log: ``old`` where git had it, ``new`` where the log has it
    (all zeros: absent); ``done`` False when it was left (the log's object is missing), with why."""
    repo: str
    ref: str
    old: str
    new: str
    done: bool = True
    why: str = ""

    def line(self) -> str:
        if not self.done:
            return (f"git repair: {self.repo} {self.ref} left at {_shown(self.old)}: the log has it at "
                    f"{_shown(self.new)}, {self.why}")
        return f"git repair: {self.repo} {self.ref} {_shown(self.old)} -> {_shown(self.new)} (as the log has it)"


def _shown(oid: str) -> str:
    return "none" if oid == ZERO else oid


def _named(name: str) -> bool:
    try:
        repo_name(name)
    except Refusal:
        return False
    return True


def refs_of(repo_events: Iterable[Any], merges: Callable[[str], Any]) -> dict[str, str]:
    """The refs the log gives one repository: a fold of its own events in order; ``merges(number)`` is a
    pull request's ``Merged`` event (None when it never merged), read where its ``PullIndexed`` ends it."""
    refs: dict[str, str] = {}
    open_prs: dict[str, str] = {}
    for e in repo_events:
        if isinstance(e, Repo.Created):
            refs[BRANCH_PREFIX + e.default_branch] = e.head
        elif isinstance(e, Repo.Pushed):
            for m in e.moves:
                refs[m["ref"]] = m["new"]
        elif isinstance(e, Repo.PullIndexed):
            if e.number is not None:
                open_prs[e.key] = e.number
            elif e.key in open_prs:
                merged = merges(open_prs.pop(e.key))
                if merged is not None:
                    refs[BRANCH_PREFIX + e.key.split("\n", 1)[1]] = merged.commit
    return {ref: oid for ref, oid in refs.items() if oid != ZERO}


def logged_refs(events: Any, name: str) -> dict[str, str] | None:
    """The refs the store's log gives repository ``name``; None when the log never recorded it."""
    repo_events = events.events_of(repo_id(name))
    if not repo_events:
        return None

    def merges(number: str) -> Any:
        return next((e for e in events.events_of(pr_id(number)) if isinstance(e, PullRequest.Merged)), None)

    return refs_of(repo_events, merges)


def repair_repo(store: GitStore, name: str, logged: dict[str, str]) -> list[Repaired]:
    """Repository ``name``'s refs set to ``logged`` (the rule in the module's docstring); what it found."""
    held = store.refs(name)
    out: list[Repaired] = []
    for ref in sorted(set(held) | set(logged)):
        old, new = held.get(ref, ZERO), logged.get(ref, ZERO)
        if old == new:
            continue
        if new != ZERO and store.run(name, "cat-file", "-e", new, ok=(0, 1, 128)).returncode != 0:
            out.append(Repaired(name, ref, old, new, False, "an object this repository lacks (push it again "
                                "from a clone that has it)"))
            continue
        if new == ZERO:
            store.run(name, "update-ref", "-d", ref, old)
        else:
            store.run(name, "update-ref", ref, new, old)
        out.append(Repaired(name, ref, old, new))
    return out


def repair(store: GitStore, events: Any) -> list[Repaired]:
    """Every repository on disk repaired to the log held by ``events`` (the hub's ``EventStore``), each
    under its lock; every repaired or left ref, each logged as one line."""
    names = sorted(n for n in (p.name[: -len(REPO_SUFFIX)] for p in store.root.glob(f"*{REPO_SUFFIX}"))
                   if _named(n) and store.exists(n))
    if not names or shutil.which(GIT) is None:
        return []
    found: list[Repaired] = []
    for name in names:
        try:
            logged = logged_refs(events, name)
            if logged is None:
                log.info("git repair: %s is on disk but not in the log; left for its next create", name)
                continue
            with store.lock(name):
                fixed = repair_repo(store, name, logged)
        except Exception as e:  # noqa: BLE001 - one repository's failure leaves the others to repair
            log.warning("git repair: %s could not be checked against the log, left as it is: %s", name, e)
            continue
        for r in fixed:
            log.warning(r.line())
        found.extend(fixed)
    return found
