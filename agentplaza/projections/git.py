"""Read models of the git server: repositories, their branches as the log last moved them, pull requests
and their comments and reviews. Folded from ``domain.git``'s events only (git is never asked here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.base import Refusal
from ..domain.git import BRANCH_PREFIX, ZERO
from ..events.records import EventRecord
from .framework import Projection, Rows, append_only, evictable, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

git_repos = sa.Table(
    "rm_git_repos", metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("default_branch", sa.String(200), nullable=False),
    sa.Column("project", sa.String(64)),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("created_by", sa.String(80), nullable=False),
    sa.Column("pushes", sa.Integer, nullable=False),
    sa.Column("last_push_at", sa.String(40)),
    sa.Column("last_push_by", sa.String(80)),
)
git_branches = sa.Table(
    "rm_git_branches", metadata,
    sa.Column("id", sa.String(280), primary_key=True),  # repo + "\n" + branch
    sa.Column("repo", sa.String(64), nullable=False, index=True),
    sa.Column("branch", sa.String(200), nullable=False),
    sa.Column("commit", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("updated_by", sa.String(80), nullable=False),
)
git_prs = evictable(sa.Table(
    "rm_git_prs", metadata,
    sa.Column("number", sa.String(24), primary_key=True),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("repo", sa.String(64), nullable=False, index=True),
    sa.Column("source", sa.String(200), nullable=False),
    sa.Column("target", sa.String(200), nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("author", sa.String(80), nullable=False),
    sa.Column("state", sa.String(10), nullable=False),
    sa.Column("head", sa.String(40), nullable=False),
    sa.Column("base", sa.String(40), nullable=False),
    sa.Column("opened_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("comments", sa.Integer, nullable=False),
    sa.Column("approvals", sa.Integer, nullable=False),
    sa.Column("changes_requested", sa.Integer, nullable=False),
    sa.Column("merge_method", sa.String(10)),
    sa.Column("merge_commit", sa.String(40)),
    sa.Column("ended_at", sa.String(40)),
    sa.Column("ended_by", sa.String(80)),
))
git_notes = append_only(sa.Table(  # the comments and reviews of pull requests, in order
    "rm_git_notes", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("pr", sa.String(24), nullable=False, index=True),
    sa.Column("kind", sa.String(10), nullable=False),  # comment or review
    sa.Column("verdict", sa.String(20)),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("by", sa.String(80), nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("head", sa.String(40)),
))

PR_COLUMNS = ("number", "repo", "source", "target", "title", "author", "state", "opened_at", "comments",
              "approvals", "changes_requested")


def _move(rows: Rows, repo: str, ref: str, new: str, e: EventRecord) -> None:
    if not ref.startswith(BRANCH_PREFIX):
        return
    branch = ref[len(BRANCH_PREFIX):]
    key = f"{repo}\n{branch}"
    if new == ZERO:
        rows.delete("rm_git_branches", key)
    else:
        rows.put("rm_git_branches", {"id": key, "repo": repo, "branch": branch, "commit": new, "updated_at": e.at,
                                     "updated_by": e.actor})


class GitProjection(Projection):
    name = "git"
    version = 1
    tables = (git_repos, git_branches, git_prs, git_notes)

    def on_Repo_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_git_repos", {"name": d["name"], "default_branch": d["default_branch"], "project": d.get("project"),
                                  "created_at": e.at, "created_by": e.actor, "pushes": 0, "last_push_at": None,
                                  "last_push_by": None})
        _move(rows, d["name"], BRANCH_PREFIX + d["default_branch"], d["head"], e)

    def on_Repo_Pushed(self, e: EventRecord, rows: Rows) -> None:
        name = e.data["repo"]
        repo = rows.get("rm_git_repos", name)
        if repo is None:
            return
        rows.put("rm_git_repos", dict(repo, pushes=repo["pushes"] + 1, last_push_at=e.at, last_push_by=e.actor))
        for m in e.data["moves"]:
            _move(rows, name, m["ref"], m["new"], e)

    def on_PullRequest_Created(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_git_prs", {"number": d["number"], "seq": int(d["number"][2:]), "repo": d["repo"],
                                "source": d["source"], "target": d["target"], "title": d["title"], "body": d["body"],
                                "author": d["author"], "state": "open", "head": d["head"], "base": d["base"],
                                "opened_at": e.at, "updated_at": e.at, "comments": 0, "approvals": 0,
                                "changes_requested": 0, "merge_method": None, "merge_commit": None, "ended_at": None,
                                "ended_by": None})

    def _pr(self, e: EventRecord, rows: Rows) -> dict | None:
        return rows.get("rm_git_prs", e.data["number"])

    def on_PullRequest_Commented(self, e: EventRecord, rows: Rows) -> None:
        pr = self._pr(e, rows)
        if pr is not None:
            rows.put("rm_git_prs", dict(pr, comments=pr["comments"] + 1, updated_at=e.at))
            rows.put("rm_git_notes", {"position": e.position, "pr": pr["number"], "kind": "comment", "verdict": None,
                                      "text": e.data["text"], "by": e.actor, "at": e.at, "head": None})

    def on_PullRequest_Reviewed(self, e: EventRecord, rows: Rows) -> None:
        pr = self._pr(e, rows)
        if pr is not None:
            v = e.data["verdict"]
            rows.put("rm_git_prs", dict(pr, updated_at=e.at, approvals=pr["approvals"] + (v == "approve"),
                                        changes_requested=pr["changes_requested"] + (v == "request_changes")))
            rows.put("rm_git_notes", {"position": e.position, "pr": pr["number"], "kind": "review", "verdict": v,
                                      "text": e.data["text"], "by": e.actor, "at": e.at, "head": e.data["head"]})

    def on_PullRequest_Merged(self, e: EventRecord, rows: Rows) -> None:
        pr = self._pr(e, rows)
        if pr is not None:
            d = e.data
            rows.put("rm_git_prs", dict(pr, state="merged", head=d["head"], merge_method=d["method"],
                                        merge_commit=d["commit"], ended_at=e.at, ended_by=e.actor, updated_at=e.at))
            _move(rows, pr["repo"], BRANCH_PREFIX + pr["target"], d["commit"], e)

    def on_PullRequest_Closed(self, e: EventRecord, rows: Rows) -> None:
        pr = self._pr(e, rows)
        if pr is not None:
            rows.put("rm_git_prs", dict(pr, state="closed", ended_at=e.at, ended_by=e.actor, updated_at=e.at))


# -- the queries of the Git screen and of `agentplaza git` ----------------------------------------------


def repo_rows(models: ReadModels) -> list[dict]:
    repos = models.rows(git_repos, order_by=git_repos.c.name)
    prs = models.rows(git_prs, git_prs.c.state == "open")
    branches = models.rows(git_branches)
    for r in repos:
        r["open_prs"] = sum(1 for p in prs if p["repo"] == r["name"])
        r["branches"] = sum(1 for b in branches if b["repo"] == r["name"])
    return repos


def repo_row(models: ReadModels, name: str) -> dict:
    rows = models.rows(git_repos, git_repos.c.name == name)
    if not rows:
        raise Refusal("no_repo", f"no repository {name!r} on this plaza's git server")
    return rows[0]


def branch_rows(models: ReadModels, name: str) -> list[dict]:
    repo = repo_row(models, name)
    rows = models.rows(git_branches, git_branches.c.repo == name, order_by=git_branches.c.branch)
    for r in rows:
        r["default"] = r["branch"] == repo["default_branch"]
        del r["id"]
    return rows


def pr_rows(models: ReadModels, repo: str | None, state: str | None, limit: int) -> list[dict]:
    where = [c for c in ((git_prs.c.repo == repo) if repo else None,
                         (git_prs.c.state == state) if state else None) if c is not None]
    rows = models.rows(git_prs, *where, order_by=git_prs.c.seq.desc(), limit=limit)
    for r in rows:
        del r["seq"]
    return rows


def pr_row(models: ReadModels, number: str) -> dict:
    rows = models.rows(git_prs, git_prs.c.number == number)
    if not rows:
        raise Refusal("no_pull_request", f"no pull request {number}")
    row = rows[0]
    del row["seq"]
    row["notes"] = [{k: n[k] for k in ("kind", "verdict", "text", "by", "at", "head")}
                    for n in models.rows(git_notes, git_notes.c.pr == number, order_by=git_notes.c.position)]
    return row


def status(models: ReadModels) -> dict:
    """The git server at a glance (``agentplaza git status``, the overview's line)."""
    prs = models.rows(git_prs)
    return {"repos": len(models.rows(git_repos)), "branches": len(models.rows(git_branches)),
            "prs_open": sum(1 for p in prs if p["state"] == "open"),
            "prs_merged": sum(1 for p in prs if p["state"] == "merged"),
            "prs_closed": sum(1 for p in prs if p["state"] == "closed")}
