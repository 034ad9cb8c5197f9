"""Each project's repository on the plaza's git server, and a code project's plan kept there as an
OpenSpec change (the guide: "Each project gets a repository when it is opened"; "A code project also
needs a spec: an OpenSpec change in the project's repository").

The hub follows the log: a pass (``reconcile``) every ``PASS_INTERVAL_S`` asks the projects' read
model which projects lack their repository or have a code revision not yet kept in it, and for each:

1. **The repository.** Named as the project (``pj1``; ``pj1-2`` ... when that name is another's), made
   by the hub on the git server (``forge.GitServer.create``, with the project named) and recorded on
   the project (``Project.RepoOpened``). A repository the server already holds for this project (a hub
   that stopped between the two) is taken as it is.
2. **The spec.** Each revision of a code project's plan is one commit on the default branch, authored
   and committed by the agent that wrote the revision (its name and ``agent-CID@agents.plaza.invalid``,
   as the agents' own commits are), writing the OpenSpec change ``openspec/changes/<pj1-title>/``:
   ``proposal.md`` (the brief and the proposal), ``tasks.md`` (the tasks document) and
   ``specs/<title>/spec.md`` (the spec). The branch's move is recorded as the git server records a
   push (``Repo.Pushed``, by the hub), then the commit on the project (``Project.SpecCommitted``),
   which the Mayor's approval of a code project waits for. The commit message carries
   ``Plaza-Revision: pj1 r2``: a pass that finds it in the branch records that commit instead of
   making another.

A pass that fails (the plaza held, git missing, a conflict) is tried again at the next; nothing is
half made: each step is recorded only after git holds it.
"""

from __future__ import annotations

import logging
import re
import shutil
from typing import Any

import anyio

from ..commands import git as gc
from ..commands import projects as pc
from ..domain.base import Refusal
from ..domain.git import BRANCH_PREFIX, MAX_REPO_CHARS
from ..domain.projects import Project
from ..projections import governance as rm
from . import forge

log = logging.getLogger(__name__)

#: How often the hub looks for projects to keep in git.
PASS_INTERVAL_S = 1.0
#: The most names tried for a project's repository (``pj1``, ``pj1-2`` ...).
MAX_NAME_TRIES = 20
#: Where OpenSpec keeps its changes, and the longest slug of a change's or a capability's name.
CHANGES_DIR = "openspec/changes"
MAX_SLUG_CHARS = 40
#: The actor that makes the repositories and moves the branches.
HUB = forge.Caller("hub")


def slug(text: str) -> str:
    """Kebab case, as OpenSpec names changes and capabilities (``release-notes-site``)."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:MAX_SLUG_CHARS].strip("-")
    return out or "plan"


def change_path(p: Project) -> str:
    return f"{CHANGES_DIR}/{p.number}-{slug(p.title)}"


def marker(p: Project, revision: int) -> str:
    return f"Plaza-Revision: {p.number} r{revision}"


def change_files(p: Project, revision: int) -> dict[str, bytes]:
    """The OpenSpec change of one revision: its proposal, its tasks and its spec delta."""
    r = p.revisions[revision - 1]
    root, capability = change_path(p), slug(p.title)
    proposal = (f"# Change: {p.title}\n\nProject {p.number}, revision {revision} of the plan.\n\n## Why\n\n"
                f"{p.brief.strip()}\n\n## What Changes\n\n{r['proposal'].strip()}\n")
    tasks = f"# Tasks\n\n{r['tasks'].strip()}\n"
    spec = r["spec"].strip()
    if not re.match(r"##\s+(ADDED|MODIFIED|REMOVED|RENAMED)\s+Requirements", spec):
        spec = f"## ADDED Requirements\n\n### Requirement: {p.title}\n\n{spec}"
    return {f"{root}/proposal.md": proposal.encode(), f"{root}/tasks.md": tasks.encode(),
            f"{root}/specs/{capability}/spec.md": (spec + "\n").encode()}


def author(hub: Any, actor: str) -> tuple[str, str]:
    """The commit's author: the agent that wrote the revision, by name (a deleted one by its number)."""
    caller = forge.Caller(actor)
    try:
        return forge.author_of(hub, caller)
    except Refusal:
        return (f"agent-{caller.cid}", f"agent-{caller.cid}@agents.plaza.invalid")


def open_repo(hub: Any, p: Project) -> str:
    server = forge.server_of(hub)
    for i in range(1, MAX_NAME_TRIES + 1):
        name = p.number if i == 1 else f"{p.number}-{i}"[:MAX_REPO_CHARS]
        try:
            held = gc.repo_of(hub.commands, name)
        except Refusal:
            held = None
        if held is None:
            server.create(HUB, name, project=p.number)
        elif held.project != p.number:
            continue
        pc.repo_opened(hub.commands, hub.commands.context(HUB.actor), p.number, name)
        return name
    raise Refusal("repo_exists", f"no free name for project {p.number}'s repository")


def commit_spec(hub: Any, p: Project, revision: int) -> str:
    """Revision ``revision`` of a code project's plan, committed by its author; the commit."""
    server, repo = forge.server_of(hub), p.repo
    assert repo is not None
    branch = gc.repo_of(hub.commands, repo).default_branch
    with server.store.lock(repo):
        found = server.store.text(repo, "log", "-F", f"--grep={marker(p, revision)}", "--format=%H", "-n", "1",
                                  server.store.resolve(repo, branch), "--").strip()
        if found:
            commit = found
        else:
            message = (f"{p.number}: revision {revision} of the plan, as an OpenSpec change\n\n"
                       f"{p.title}\n\n{marker(p, revision)}\n")
            old, commit = server.store.commit_files(repo, branch, change_files(p, revision),
                                                    author(hub, p.revisions[revision - 1]["by"]), message)
            try:
                gc.pushed(hub.commands, hub.commands.context(HUB.actor), repo,
                          [{"ref": BRANCH_PREFIX + branch, "old": old, "new": commit}])
            except Exception:  # the log refused it: the branch goes back (a dying process undoes nothing)
                server.store.run(repo, "update-ref", BRANCH_PREFIX + branch, old, commit)
                raise
    pc.spec_committed(hub.commands, hub.commands.context(HUB.actor), p.number, revision, change_path(p), commit)
    return commit


def reconcile(hub: Any) -> int:
    """One pass: every project's repository made and every code revision kept in it; the steps made."""
    made = 0
    for number in rm.projects_for_git(hub.read_models):
        p = pc.load(hub.commands, number)
        if p.repo is None and not p.ended:
            open_repo(hub, p)
            p = pc.load(hub.commands, number)
            made += 1
        for revision in p.specs_to_commit():
            commit_spec(hub, p, revision)
            p = pc.load(hub.commands, number)
            made += 1
    return made


async def follow(hub: Any) -> None:
    """The hub's loop: a pass every ``PASS_INTERVAL_S`` (none without git); a failed pass is tried again."""
    if shutil.which("git") is None:
        log.warning("git is not installed: projects get no repository and code plans cannot be approved")
        return
    while True:
        await anyio.sleep(PASS_INTERVAL_S)
        try:
            await anyio.to_thread.run_sync(reconcile, hub)
        except Exception:  # noqa: BLE001 - the next pass tries again
            log.debug("a project repository pass failed", exc_info=True)
