"""The repositories' bytes: bare git repositories in the state folder, driven by the system's ``git``.

Every git program runs as a list of arguments (never a shell), in a scrubbed environment: no system or
global git configuration, ``HOME`` the repositories' own folder, no terminal prompt, and
``core.hooksPath`` pointing at nothing, so no hook runs on the hub, whatever a repository holds (a push
never carries hooks anyway; repositories are made with no template). Every name that reaches git was
checked by ``domain.git`` first (a repository's name cannot lead out of the folder; a branch name
cannot start with ``-``), and refs are passed after ``--`` where git takes them so.

Repositories are made with ``--shared=0600``: git writes their files 0600 and their folders 0700.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from ..domain.base import Refusal
from ..domain.git import BRANCH_PREFIX, DEFAULT_BRANCH, ZERO, branch_name, repo_name

#: The git program (the distribution's ``git`` package).
GIT = "git"
#: Where the repositories live, under the state folder.
REPOS_DIR = "git"
#: The most commits a log answers with, and the most bytes of a diff or a file shown.
MAX_LOG = 500
MAX_SHOWN_BYTES = 1 << 20
#: How long one git program may run, in seconds.
GIT_TIMEOUT_S = 300
#: Configuration every git program on the hub runs with (never a hook; objects checked on receive).
SERVER_CONFIG = (("core.hooksPath", "/dev/null"), ("receive.fsckObjects", "true"),
                 ("transfer.fsckObjects", "true"), ("receive.denyDeletes", "false"),
                 ("uploadpack.allowAnySHA1InWant", "false"), ("core.symlinks", "false"),
                 ("protocol.file.allow", "never"))
#: The hub's own name on the commits it makes (a repository's first commit).
HUB_AUTHOR = ("AgentPlaza", "hub@plaza.invalid")


def git_env(root: Path, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    config = SERVER_CONFIG + extra
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
           "GIT_CONFIG_COUNT": str(len(config))}
    for i, (k, v) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
    return env


def author_env(name: str, email: str) -> dict[str, str]:
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email}


def date_env(at: datetime) -> dict[str, str]:
    """A commit's author and committer date (git's own form: seconds since the epoch and the zone)."""
    stamp = f"{int(at.timestamp())} +0000"
    return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}


class GitStore:
    """The bare repositories under ``root`` (0700), one ``NAME.git`` each. ``clock``: the time the commits
    the hub makes are dated (author and committer), the hub's own clock; None: git's (the system's)."""

    def __init__(self, root: Path, clock: Callable[[], datetime] | None = None):
        self.root = root
        self.clock = clock
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, name: str) -> threading.Lock:
        """One writer at a time per repository (a push, a merge) on this hub."""
        with self._guard:
            return self._locks.setdefault(name, threading.Lock())

    def path(self, name: str) -> Path:
        return self.root / f"{repo_name(name)}.git"

    def exists(self, name: str) -> bool:
        return (self.path(name) / "HEAD").is_file()

    def run(self, name: str | None, *args: str, input: bytes | None = None, env: dict | None = None,
            ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        cmd = [GIT] + (["--git-dir", str(self.path(name))] if name is not None else []) + list(args)
        dated = date_env(self.clock()) if self.clock is not None else {}
        out = subprocess.run(cmd, input=input, capture_output=True, env={**git_env(self.root), **dated, **(env or {})},
                             timeout=GIT_TIMEOUT_S, check=False)
        if out.returncode not in ok:
            raise Refusal("git_failed", f"git {args[0]} failed: {out.stderr.decode(errors='replace').strip()[:300]}")
        return out

    def text(self, name: str, *args: str) -> str:
        return self.run(name, *args).stdout.decode(errors="replace")

    # -- making a repository ------------------------------------------------------------------------
    def init(self, name: str) -> str:
        """A new bare repository with one empty commit on the default branch; that commit's name."""
        path = self.path(name)
        if path.exists():
            raise Refusal("repo_exists", f"the repository {name} exists already")
        self.run(None, "init", "--bare", "--quiet", "--template=", "--shared=0600", f"--initial-branch={DEFAULT_BRANCH}",
                 str(path))
        tree = self.run(name, "mktree", input=b"").stdout.decode().strip()  # the empty tree
        commit = self.run(name, "commit-tree", tree, "-m", f"{name}: repository created",
                          env=author_env(*HUB_AUTHOR)).stdout.decode().strip()
        self.run(name, "update-ref", BRANCH_PREFIX + DEFAULT_BRANCH, commit, ZERO)
        return commit

    def commit_files(self, name: str, branch: str, files: dict[str, bytes], who: tuple[str, str],
                     message: str) -> tuple[str, str]:
        """A commit on ``branch`` that writes ``files`` (path -> bytes; every other file kept) by ``who``
        (author and committer), made with git's plumbing in a private index (a bare repository has no
        work tree). (the branch's old commit, its new one); the branch moves only if it is still where
        it was read."""
        ref = BRANCH_PREFIX + branch_name(branch)
        old = self.resolve(name, branch)
        with tempfile.TemporaryDirectory(dir=self.root) as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run(name, "read-tree", old, env=env)
            for path, data in sorted(files.items()):
                blob = self.run(name, "hash-object", "-w", "--stdin", input=data).stdout.decode().strip()
                self.run(name, "update-index", "--add", "--cacheinfo", f"100644,{blob},{_tree_path(path)}", env=env)
            tree = self.run(name, "write-tree", env=env).stdout.decode().strip()
        new = self.run(name, "commit-tree", tree, "-p", old, "-m", message, env=author_env(*who)).stdout.decode().strip()
        self.run(name, "update-ref", ref, new, old)
        return old, new

    # -- reading ---------------------------------------------------------------------------------------
    def refs(self, name: str) -> dict[str, str]:
        """Every ref and its commit."""
        out = self.text(name, "for-each-ref", "--format=%(objectname) %(refname)")
        return {ref: oid for oid, ref in (line.split(" ", 1) for line in out.splitlines() if " " in line)}

    def heads(self, name: str) -> dict[str, str]:
        return {r[len(BRANCH_PREFIX):]: oid for r, oid in self.refs(name).items() if r.startswith(BRANCH_PREFIX)}

    def resolve(self, name: str, ref: str) -> str:
        """A branch, tag or commit as a commit name (refused ``no_branch`` when there is none)."""
        rev = ref if len(ref) == 40 and all(c in "0123456789abcdef" for c in ref) else branch_name(ref)
        out = self.run(name, "rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}", ok=(0, 1))
        if out.returncode != 0:
            raise Refusal("no_branch", f"{name} has no branch or commit {ref!r}")
        return out.stdout.decode().strip()

    def log(self, name: str, ref: str, limit: int = 100) -> list[dict]:
        sep = "\x1f"
        fmt = sep.join(("%H", "%P", "%an", "%ae", "%aI", "%cn", "%s")) + "\x1e"
        out = self.text(name, "log", f"--max-count={min(limit, MAX_LOG)}", f"--format={fmt}",
                        self.resolve(name, ref), "--")
        commits = []
        for rec in out.split("\x1e"):
            rec = rec.strip("\n")
            if not rec:
                continue
            h, parents, an, ae, at, cn, subject = rec.split(sep)
            commits.append({"commit": h, "parents": parents.split(), "author": an, "email": ae, "at": at,
                            "committer": cn, "subject": subject})
        return commits

    def files(self, name: str, ref: str, path: str = "") -> dict:
        """A folder's entries or a file's content (cut to MAX_SHOWN_BYTES) at ``ref``."""
        commit = self.resolve(name, ref)
        clean = _tree_path(path)
        spec = f"{commit}:{clean}" if clean else f"{commit}^{{tree}}"
        kind = self.run(name, "cat-file", "-t", spec, ok=(0, 128))
        if kind.returncode != 0:
            raise Refusal("no_file", f"{name} has no {clean or '/'} at {ref}")
        if kind.stdout.strip() == b"tree":
            out = self.text(name, "ls-tree", "-l", "-z", spec)
            entries = []
            for item in out.split("\0"):
                if not item:
                    continue
                meta, fname = item.split("\t", 1)
                _mode, typ, oid, size = meta.split(None, 3)
                entries.append({"name": fname, "type": "folder" if typ == "tree" else "file", "object": oid,
                                "size": int(size) if size.strip().isdigit() else None})
            return {"ref": ref, "commit": commit, "path": clean, "type": "folder", "entries": entries}
        data = self.run(name, "cat-file", "blob", spec).stdout
        shown = data[:MAX_SHOWN_BYTES]
        binary = b"\0" in shown[:8000]
        return {"ref": ref, "commit": commit, "path": clean, "type": "file", "size": len(data), "binary": binary,
                "truncated": len(data) > MAX_SHOWN_BYTES, "content": None if binary else shown.decode(errors="replace")}

    def diff(self, name: str, base: str, head: str) -> dict:
        """What ``head`` has that ``base`` lacks (git's three-dot diff), with its files."""
        mb = self.run(name, "merge-base", base, head, ok=(0, 1)).stdout.decode().strip() or base
        stat = self.text(name, "diff", "--numstat", "-z", mb, head, "--")
        files = []
        parts = stat.split("\0")
        for p in parts:
            if p.count("\t") == 2:
                added, removed, fname = p.split("\t")
                files.append({"path": fname, "added": None if added == "-" else int(added),
                              "removed": None if removed == "-" else int(removed)})
        patch = self.run(name, "diff", "--no-color", "--no-ext-diff", mb, head, "--").stdout
        return {"base": mb, "head": head, "files": files, "truncated": len(patch) > MAX_SHOWN_BYTES,
                "patch": patch[:MAX_SHOWN_BYTES].decode(errors="replace")}

    def is_ancestor(self, name: str, old: str, new: str) -> bool:
        return self.run(name, "merge-base", "--is-ancestor", old, new, ok=(0, 1)).returncode == 0

    # -- merging -------------------------------------------------------------------------------------
    def merge(self, name: str, target: str, source_commit: str, method: str, who: tuple[str, str],
              message: str) -> tuple[str, str, str]:
        """Merge ``source_commit`` into branch ``target``: fast-forward when it can (``auto``/``ff``), else a
        merge commit (``auto``/``merge``). (method used, the target's new commit, its old one). The target
        moves only if it still is where it was read (``update-ref`` with the old value)."""
        ref = BRANCH_PREFIX + branch_name(target)
        old = self.resolve(name, target)
        if self.is_ancestor(name, source_commit, old):
            raise Refusal("nothing_to_merge", f"{target} already has every commit of this pull request")
        can_ff = self.is_ancestor(name, old, source_commit)
        if method == "ff" and not can_ff:
            raise Refusal("not_fast_forward", f"{target} has moved on; it cannot be fast-forwarded (merge it with "
                          "a merge commit, or update the branch and push again)")
        if can_ff and method in ("auto", "ff"):
            self.run(name, "update-ref", ref, source_commit, old)
            return "ff", source_commit, old
        out = self.run(name, "merge-tree", "--write-tree", "--name-only", "--no-messages", old, source_commit,
                       ok=(0, 1))
        lines = out.stdout.decode(errors="replace").splitlines()
        if out.returncode == 1:
            conflicts = ", ".join(x for x in lines[1:] if x)[:400]
            raise Refusal("merge_conflict", f"the pull request conflicts with {target} in {conflicts or 'some files'}; "
                          f"merge {target} into the branch, resolve, and push again")
        tree = lines[0].strip()
        commit = self.run(name, "commit-tree", tree, "-p", old, "-p", source_commit, "-m", message,
                          env=author_env(*who)).stdout.decode().strip()
        self.run(name, "update-ref", ref, commit, old)
        return "merge", commit, old


def _tree_path(path: str) -> str:
    """A path inside a tree: relative, no ``..`` or empty parts, no NUL."""
    clean = path.strip("/")
    if not clean:
        return ""
    parts = clean.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\0" in clean or len(clean) > 4096:
        raise Refusal("invalid_path", f"{path[:80]!r} is not a path inside the repository")
    return clean
