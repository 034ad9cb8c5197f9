"""agentplaza git status | repos | create NAME | branches REPO | commits REPO [BRANCH] | files REPO [PATH]
[--ref R] | prs [REPO] | pr PR | diff PR | comment PR --text T | review PR approve|request-changes [--text T]
| merge PR [--yes] | close PR [--yes]."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import pairs, table

REPO_COLUMNS = ["name", "default_branch", "branches", "open_prs", "pushes", "last_push_at", "project"]
BRANCH_COLUMNS = ["branch", "commit", "default", "updated_at", "updated_by"]
COMMIT_COLUMNS = ["commit", "author", "at", "subject"]
PR_COLUMNS = ["number", "repo", "source", "target", "title", "author", "state", "approvals", "changes_requested"]
#: The review verdicts as the command line spells them, and as the hub does.
VERDICTS = {"approve": "approve", "request-changes": "request_changes"}


def render_files(d: dict) -> str:
    if d["type"] == "file":
        if d["content"] is None:
            return f"{d['path']}: a binary file of {d['size']} bytes"
        return d["content"] + ("\n[cut]" if d["truncated"] else "")
    return table(d["entries"], ["name", "type", "size"])


def render_commits(d: dict) -> str:
    return table([dict(c, commit=c["commit"][:12]) for c in d["commits"]], COMMIT_COLUMNS)


def render_pr(d: dict) -> str:
    p = d["pr"]
    lines = [pairs({"pull request": p["number"], "repo": p["repo"], "from": p["source"], "into": p["target"],
                    "title": p["title"], "author": p["author"], "state": p["state"], "opened": p["opened_at"],
                    "approvals": p["approvals"], "changes requested": p["changes_requested"],
                    "merged as": f"{p['merge_commit']} ({p['merge_method']})" if p.get("merge_commit") else None,
                    "ended": f"{p['ended_at']} by {p['ended_by']}" if p.get("ended_at") else None})]
    if p.get("body"):
        lines += ["", p["body"]]
    for n in p.get("notes") or []:
        verdict = f" {n['verdict']}" if n.get("verdict") else ""
        lines.append(f"\n{n['at']} {n['by']} {n['kind']}{verdict}: {n['text']}")
    return "\n".join(lines)


def render_diff(d: dict) -> str:
    files = "\n".join(f"  {f['path']} +{f['added']} -{f['removed']}" for f in d["files"])
    return f"{d['pr']}: {len(d['files'])} files\n{files}\n\n{d['patch']}" + ("\n[cut]" if d["truncated"] else "")


_PR = arg("pr", metavar="PR", help="the pull request's number, like pr3")

AREA = Area("git", "the plaza's git server: repositories, branches, commits, files, pull requests, reviews, merges", (
    Action("status", "the git server at a glance", "GET", "/v1/git/status", render=pairs),
    Action("repos", "the repositories", "GET", "/v1/git/repos", render=lambda d: table(d["repos"], REPO_COLUMNS),
           default=True),
    Action("create", "make a repository (a project's is made when it opens)", "POST", "/v1/git/repos",
           args=(arg("name", metavar="NAME"), arg("--project")),
           body=lambda a: {"name": a.name, **({"project": a.project} if a.project else {})},
           render=lambda d: pairs(d["repo"])),
    Action("branches", "a repository's branches", "GET", "/v1/git/repos/{repo}/branches",
           args=(arg("repo", metavar="REPO"),), render=lambda d: table(d["branches"], BRANCH_COLUMNS)),
    Action("commits", "a branch's commits, newest first (default: the default branch)", "GET",
           "/v1/git/repos/{repo}/commits",
           args=(arg("repo", metavar="REPO"), arg("branch", metavar="BRANCH", nargs="?"),
                 arg("--limit", type=int, default=50)),
           query=lambda a: {"branch": a.branch, "limit": a.limit}, render=render_commits),
    Action("files", "a folder's entries or a file's content", "GET", "/v1/git/repos/{repo}/files/{path}",
           args=(arg("repo", metavar="REPO"), arg("path", metavar="PATH", nargs="?", default=""),
                 arg("--ref", metavar="R")),
           query=lambda a: {"ref": a.ref}, render=render_files),
    Action("prs", "pull requests, newest first", "GET", "/v1/git/prs",
           args=(arg("repo", metavar="REPO", nargs="?"), arg("--state", choices=["open", "merged", "closed", "all"]),
                 arg("--limit", type=int, default=100)),
           query=lambda a: {"repo": a.repo, "state": a.state, "limit": a.limit},
           render=lambda d: table(d["prs"], PR_COLUMNS)),
    Action("pr", "one pull request with its comments and reviews", "GET", "/v1/git/prs/{pr}", args=(_PR,),
           render=render_pr),
    Action("diff", "what a pull request changes", "GET", "/v1/git/prs/{pr}/diff", args=(_PR,), render=render_diff),
    Action("comment", "comment on a pull request", "POST", "/v1/git/prs/{pr}/comment",
           args=(_PR, arg("--text", required=True)), body=lambda a: {"text": a.text}, render=render_pr),
    Action("review", "approve a pull request, or request changes (with --text)", "POST", "/v1/git/prs/{pr}/review",
           args=(_PR, arg("verdict", choices=list(VERDICTS)), arg("--text", default="")),
           body=lambda a: {"verdict": VERDICTS[a.verdict], "text": a.text}, render=render_pr),
    Action("merge", "merge a pull request (fast-forward when it can, else a merge commit)", "POST",
           "/v1/git/prs/{pr}/merge", args=(_PR, arg("--method", choices=["auto", "ff", "merge"], default="auto")),
           body=lambda a: {"method": a.method}, confirm=lambda a: f"Merge {a.pr}?", render=render_pr),
    Action("close", "close a pull request without merging it", "POST", "/v1/git/prs/{pr}/close", args=(_PR,),
           body=lambda a: {}, confirm=lambda a: f"Close {a.pr} without merging it?", render=render_pr),
))
