"""The plaza's git server in the simulator: the hub's real server (``runtime.forge.GitServer`` on the
simulated hub, its bare repositories in the state folder) and the agents' side of it.

An agent's side is a repository of its own outside the hub (under the run's folder, as its microVM's
disk would be): it fetches the server's branches from the repository's folder (the fetch itself is
not through the smart-HTTP door: what the log must hold is a push), commits with git's plumbing, and
pushes through the server's receive path exactly as the door hands it a push: a ``git-receive-pack``
request (the ref command and the pack ``git pack-objects`` makes) to ``GitServer.http``, which asks
the laws about each ref, lets ``git http-backend`` receive it and records the refs it moved
(``Repo.Pushed``). Pull requests, reviews, merges and closes go through the server's own methods
(``open_pr``, ``review``, ``merge``, ``close``); a project's repository and a code project's spec
commit through the hub's own pass (``runtime.projectrepo.reconcile``).

Every commit is dated by the simulated clock (the server's store takes the hub's clock; the agents'
commits take the same), so the commits, and the log that names them, are the same in every run.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..commands import git as gc
from ..commands.unit import Done
from ..domain.base import Refusal
from ..domain.git import BRANCH_PREFIX, ZERO
from ..runtime import forge, projectrepo
from ..runtime.githttp import GitRequest
from ..runtime.gitstore import GIT, GitStore, author_env, date_env
from .memory import Memory, of_role, pick

if TYPE_CHECKING:
    from .world import World

#: Where the agents' own repositories are, under the run's folder.
CLIENTS_DIR = "agents-git"
RECEIVE = {"content-type": "application/x-git-receive-pack-request"}


def server(w: World) -> forge.GitServer:
    return forge.server_of(w.runtime.hub)


def store_of(w: World) -> GitStore:
    return server(w).store


def _env(w: World) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(w.dir), "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
            **date_env(w.clock())}


def _git(w: World, path: Path, *args: str, input: bytes | None = None, env: dict | None = None) -> str:
    out = subprocess.run([GIT, "--git-dir", str(path), "-c", "pack.threads=1", *args], input=input,
                         capture_output=True, env={**_env(w), **(env or {})}, check=False, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"the agent's git {args[0]} failed: {out.stderr.decode(errors='replace')[:300]}")
    return out.stdout.decode(errors="replace")


def clone(w: World, who: str, repo: str) -> tuple[Path, dict[str, str]]:
    """The agent's (or the owner's) own copy of ``repo``, fetched now; the server's branches as it sees them."""
    path = w.dir / CLIENTS_DIR / who / f"{repo}.git"
    if not (path / "HEAD").is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([GIT, "init", "--bare", "-q", str(path)], env=_env(w), check=True, capture_output=True)
    _git(w, path, "fetch", "-q", "--prune", str(store_of(w).path(repo)), "+refs/heads/*:refs/remotes/origin/*")
    out = _git(w, path, "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes/origin/")
    prefix = "refs/remotes/origin/"
    return path, {ref[len(prefix):]: oid for oid, ref in (line.split(" ", 1) for line in out.splitlines())}


def commit(w: World, path: Path, base: str, files: dict[str, bytes], who: tuple[str, str], message: str) -> str:
    """A commit on top of ``base`` that writes ``files`` (the rest of ``base``'s tree kept)."""
    with tempfile.TemporaryDirectory(dir=w.dir) as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(w, path, "read-tree", base, env=env)
        for name, data in sorted(files.items()):
            blob = _git(w, path, "hash-object", "-w", "--stdin", input=data).strip()
            _git(w, path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=env)
        tree = _git(w, path, "write-tree", env=env).strip()
    return _git(w, path, "commit-tree", tree, "-p", base, "-m", message, env=author_env(*who)).strip()


def _pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def push(w: World, caller: forge.Caller, path: Path, repo: str, branch: str, old: str, new: str,
         base: str) -> tuple[bool, str]:
    """``new`` pushed to ``branch`` (the server has it at ``old``) through the server's receive path, as a
    ``git push`` through the door: (accepted, git's word on the ref)."""
    ref = BRANCH_PREFIX + branch
    pack = subprocess.run([GIT, "--git-dir", str(path), "-c", "pack.threads=1", "pack-objects", "--stdout", "--revs",
                           "-q"], input=f"{new}\n^{base}\n".encode(), capture_output=True, env=_env(w),
                          check=True, timeout=120).stdout
    body = _pkt(f"{old} {new} {ref}\0 report-status\n".encode()) + b"0000" + pack
    answer = server(w).http(caller, GitRequest(repo, "git-receive-pack", "POST", "", RECEIVE, body)).value
    text = answer.body.decode(errors="replace")
    if f"ok {ref}" in text:
        return True, "ok"
    for line in text.splitlines():
        if f"ng {ref} " in line:
            return False, line.split(f"ng {ref} ", 1)[1].strip()
    return False, f"git answered {answer.status}"


def repos(w: World, m: Memory) -> list[str]:
    """Every repository the log holds, by name (the owner's and the projects')."""
    return sorted({e.data["name"] for e in w.store.read() if e.kind == "Repo.Created"})


def open_prs(w: World, m: Memory) -> list[str]:
    return [n for n in m.prs if gc.pr_of(w.cmds, n).state == "open"]


def after_the_laws(w: World, m: Memory, before: int, call: Any) -> Any:
    """Run an agent's git call; a refusal (or a failed write) that came after the laws decided the call
    (the decision is recorded in the agent's transcript, a commit) is an answer, not a silent refusal:
    it is raised only when the log did not move, else given back. The approvals the call asked for or
    used are remembered as the tool calls' are (not when the hub died in it: the runner counts those)."""
    try:
        out = call()
    except (Refusal, OSError) as r:
        _remember(w, m, before)
        if w.store.max_position() == before:
            raise
        return r
    _remember(w, m, before)
    return out


def _remember(w: World, m: Memory, before: int) -> None:
    for e in w.store.read(after=before):
        if e.kind == "Approval.Requested" and e.data["number"] not in m.approvals:
            m.approvals.append(e.data["number"])
        elif e.kind == "Approval.Used":
            key = f"git:{e.originator_id}"
            m.call_runs[key] = m.call_runs.get(key, 0) + 1


def said(out: Any, done: str) -> str:
    """What a call that may have been refused after the laws did."""
    if isinstance(out, Refusal):
        return f"refused after the laws decided: {out.code}"
    if isinstance(out, OSError):
        return "the write failed after the laws decided; the rest was not stored"
    return done


def project_repos(w: World) -> str:
    """The hub's pass that keeps every project's repository and each code revision's spec in git
    (``runtime.projectrepo.reconcile``, as the hub's loop runs it every second); a pass stopped by a
    refusal after some of its steps is tried again at the next, as on the hub."""
    before = w.store.max_position()
    w.rm.catch_up()
    try:
        made = projectrepo.reconcile(w.runtime.hub)
    except (Refusal, OSError) as r:  # (a failed write: the pass's git change was undone; tried again)
        if w.store.max_position() == before:
            raise
        return f"the project repository pass stopped ({getattr(r, 'code', 'write failed')}); the next pass goes on"
    return f"the project repository pass made {made} steps"


# -- the actions (``workload.ACTIONS`` draws them) ---------------------------------------------------

def create_repo(w: World, m: Memory, a: tuple) -> str:
    """The owner makes a repository on the plaza's git server (git's first commit, then the record)."""
    name = f"repo-{a[0] % 4}"
    server(w).create(forge.OWNER, name)
    return f"made {name}"


def git_push(w: World, m: Memory, a: tuple) -> str:
    """An agent (mostly a builder) commits on a branch of its own and pushes it through the server's
    receive path; now and then to the protected default branch (refused), a push that is not a
    fast-forward (refused by git), or the owner's own commit on the default branch (allowed)."""
    repo = pick(repos(w, m), a[0])
    if repo is None:
        return create_repo(w, m, a)
    variant = a[2] % 7
    cid = of_role(m, "builder", a[1]) if a[3] % 3 else pick([c for c, _ in m.agents], a[1])
    caller = forge.OWNER if variant == 1 else forge.Caller(f"agent:{cid}")
    who = "owner" if variant == 1 else str(cid)
    path, heads = clone(w, who, repo)
    branch = "main" if variant in (0, 1) else f"b{cid}-{a[1] % 3}"
    old = heads.get(branch, ZERO)
    base = heads["main"] if variant == 2 or branch not in heads else heads[branch]  # 2: not a fast-forward
    shared = a[3] % 4 == 0  # the same file as other branches: their merges may conflict
    name = "shared.txt" if shared else f"work/{who}-{a[1] % 3}.txt"
    author = forge.OWNER_AUTHOR if variant == 1 else (f"agent-{cid}", f"agent-{cid}@agents.plaza.invalid")
    new = commit(w, path, base, {name: f"{who} at {a[3] % 997}\n".encode()}, author, f"{who}: {name}")
    before = w.store.max_position()
    out = after_the_laws(w, m, before, lambda: push(w, caller, path, repo, branch, old, new, base))
    if isinstance(out, tuple):
        accepted, word = out
        return f"{who} pushed {branch} of {repo}: " + ("accepted" if accepted else f"rejected ({word})")
    return said(out, "")


def open_pr(w: World, m: Memory, a: tuple) -> str:
    """An agent opens a pull request from one of its branches into the default branch."""
    repo = pick(repos(w, m), a[0])
    if repo is None:
        return create_repo(w, m, a)
    heads = store_of(w).heads(repo)
    mine = sorted(b for b in heads if b.startswith("b"))
    branch = pick(mine, a[1]) if mine and a[2] % 5 else f"b0-{a[1] % 3}"  # now and then no such branch
    cid = int(branch[1:].split("-")[0]) if branch[1:].split("-")[0].isdigit() else of_role(m, "builder", 0)
    if cid not in dict(m.agents):
        cid = of_role(m, "builder", 0)
    before = w.store.max_position()
    out = after_the_laws(w, m, before, lambda: server(w).open_pr(
        forge.Caller(f"agent:{cid}"), repo, branch, None, f"{branch} into main", "what it changes"))
    if isinstance(out, Done):
        m.prs.append(out.value)
        return f"{cid} opened {out.value}: {branch} of {repo}"
    return said(out, "")


def review_pr(w: World, m: Memory, a: tuple) -> str:
    """A reviewer reviews an open pull request (approve, two draws in three); now and then its author
    reviews its own (refused)."""
    number = pick(open_prs(w, m) if a[3] % 3 else m.prs, a[0])
    if number is None:
        return "no pull request to review"
    pr = gc.pr_of(w.cmds, number)
    cid = int(pr.author.split(":")[1]) if a[2] % 6 == 0 else of_role(m, "reviewer", a[1])
    verdict = ("approve", "approve", "request_changes")[a[1] % 3]
    before = w.store.max_position()
    out = after_the_laws(w, m, before, lambda: server(w).review(
        forge.Caller(f"agent:{cid}"), number, verdict, "looked at it"))
    return said(out, f"{cid} reviewed {number}: {verdict}")


def merge_pr(w: World, m: Memory, a: tuple) -> str:
    """The owner merges an open pull request (mostly one a reviewer approved; fast-forward, a merge
    commit, or either), now and then closes one, or tries one merged already (refused)."""
    open_ = open_prs(w, m)
    approved = [n for n in open_ if "approve" in gc.pr_of(w.cmds, n).reviews.values()]
    number = pick(approved if approved and a[3] % 3 else open_ if open_ and a[3] % 4 else m.prs, a[0])
    if number is None:
        return "no pull request to merge"
    if a[2] % 9 == 0:
        server(w).close(forge.OWNER, number)
        return f"the owner closed {number}"
    method = ("auto", "auto", "merge", "ff")[a[1] % 4]
    commit = server(w).merge(forge.OWNER, number, method).value
    return f"the owner merged {number} ({method}) as {commit[:12]}"


def project_repos_step(w: World, m: Memory, a: tuple) -> str:
    return project_repos(w)
