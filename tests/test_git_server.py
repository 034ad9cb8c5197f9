"""The plaza's git server, black-box: a real hub, a real `git` client over smart HTTP, pull requests,
reviews and merges through the API and the CLI, and the read models rebuilt from event 1."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.hubproc import HubProcess, cli, ok


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    out = subprocess.run(["git", "-c", "user.name=Builder Bee", "-c", "user.email=bee@example.invalid",
                          "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def commit_file(repo: Path, name: str, text: str, message: str) -> None:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def demo(hub, tmp_path):
    with hub.client() as c:
        ok(c.post("/v1/git/repos", json={"name": "demo"}))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", f"{hub.url}/git/demo.git", str(work))
    return work


def test_the_owner_clones_pushes_a_branch_opens_reviews_and_merges_a_pull_request(hub, demo, tmp_path):
    git(demo, "checkout", "-q", "-b", "feature/hello")
    commit_file(demo, "hello.txt", "hello\n", "Add hello")
    push = git(demo, "push", "-q", "origin", "feature/hello")
    assert push.returncode == 0
    with hub.client() as c:
        branches = {b["branch"]: b for b in ok(c.get("/v1/git/repos/demo/branches"))["branches"]}
        assert set(branches) == {"main", "feature/hello"} and branches["main"]["default"]
        head = git(demo, "rev-parse", "HEAD").stdout.strip()
        assert branches["feature/hello"]["commit"] == head and branches["feature/hello"]["updated_by"] == "owner"
        log = ok(c.get("/v1/git/repos/demo/commits", params={"branch": "feature/hello"}))["commits"]
        assert log[0]["author"] == "Builder Bee" and log[0]["subject"] == "Add hello" and len(log) == 2
        f = ok(c.get("/v1/git/repos/demo/files/hello.txt", params={"ref": "feature/hello"}))
        assert f["type"] == "file" and f["content"] == "hello\n"
        folder = ok(c.get("/v1/git/repos/demo/files", params={"ref": "feature/hello"}))
        assert [e["name"] for e in folder["entries"]] == ["hello.txt"]

        pr = ok(c.post("/v1/git/prs", json={"repo": "demo", "source": "feature/hello", "title": "Say hello"}))["pr"]
        assert pr["number"] == "pr1" and pr["target"] == "main" and pr["state"] == "open" and pr["author"] == "owner"
        again = c.post("/v1/git/prs", json={"repo": "demo", "source": "feature/hello", "title": "Twice"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "pull_request_exists"
        d = ok(c.get("/v1/git/prs/pr1/diff"))
        assert d["files"] == [{"path": "hello.txt", "added": 1, "removed": 0}] and "+hello" in d["patch"]
        own = c.post("/v1/git/prs/pr1/review", json={"verdict": "approve"})
        assert own.status_code == 403 and own.json()["error"]["code"] == "own_work"
        ok(c.post("/v1/git/prs/pr1/comment", json={"text": "Looks small enough."}))
        merged = ok(c.post("/v1/git/prs/pr1/merge", json={}))["pr"]
        assert merged["state"] == "merged" and merged["merge_method"] == "ff" and merged["merge_commit"] == head
        assert [n["kind"] for n in merged["notes"]] == ["comment"]
        twice = c.post("/v1/git/prs/pr1/merge", json={})
        assert twice.status_code == 409 and twice.json()["error"]["code"] == "pull_request_closed"

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", f"{hub.url}/git/demo.git", str(fresh))
    assert (fresh / "hello.txt").read_text() == "hello\n"
    assert git(fresh, "log", "-1", "--format=%an %s").stdout.strip() == "Builder Bee Add hello"


def test_a_merge_commit_when_main_moved_and_a_conflict_is_refused_with_its_files(hub, demo):
    commit_file(demo, "base.txt", "one\n", "Base")
    git(demo, "push", "-q", "origin", "main")  # the owner may seed the default branch
    git(demo, "checkout", "-q", "-b", "left")
    commit_file(demo, "left.txt", "left\n", "Left")
    git(demo, "push", "-q", "origin", "left")
    git(demo, "checkout", "-q", "main")
    git(demo, "checkout", "-q", "-b", "clash")
    commit_file(demo, "base.txt", "clash\n", "Clash")
    git(demo, "push", "-q", "origin", "clash")
    git(demo, "checkout", "-q", "main")
    commit_file(demo, "base.txt", "two\n", "Main moves on")
    git(demo, "push", "-q", "origin", "main")
    with hub.client() as c:
        ok(c.post("/v1/git/prs", json={"repo": "demo", "source": "left", "title": "Left side"}))
        ok(c.post("/v1/git/prs", json={"repo": "demo", "source": "clash", "title": "Clash"}))
        ff = c.post("/v1/git/prs/pr1/merge", json={"method": "ff"})
        assert ff.status_code == 409 and ff.json()["error"]["code"] == "not_fast_forward"
        merged = ok(c.post("/v1/git/prs/pr1/merge", json={"method": "auto"}))["pr"]
        assert merged["merge_method"] == "merge"
        conflict = c.post("/v1/git/prs/pr2/merge", json={})
        err = conflict.json()["error"]
        assert conflict.status_code == 409 and err["code"] == "merge_conflict" and "base.txt" in err["message"]
        assert ok(c.get("/v1/git/prs/pr2"))["pr"]["state"] == "open"
        ok(c.post("/v1/git/prs/pr2/close", json={}))
        log = ok(c.get("/v1/git/repos/demo/commits"))["commits"]
        assert log[0]["subject"] == "Merge pr1: Left side" and len(log[0]["parents"]) == 2
        assert log[0]["author"] == "owner"


def test_names_paths_and_refs_cannot_lead_out_of_the_repository(hub, demo, tmp_path):
    with hub.client() as c:
        for name in ("../etc", "Demo", "a.git", "x/y", "", "-rf"):
            r = c.post("/v1/git/repos", json={"name": name})
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_repo", name
        r = c.get("/v1/git/repos/demo/files/..%2F..%2Fowner-token")
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_path"
        r = c.get("/v1/git/repos/demo/commits", params={"branch": "--output=/tmp/x"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_branch"
        for path in ("/git/demo.git/HEAD", "/git/demo.git/objects/info/packs", "/git/demo.git/config",
                     "/git/demo.git/info/refs?service=git-upload-archive", "/git/..%2Fdemo.git/info/refs"):
            r = c.get(path)
            assert r.status_code in (404, 422), (path, r.status_code)
        assert c.get("/git/nosuch.git/info/refs?service=git-upload-pack").status_code == 404
    git(demo, "checkout", "-q", "-b", "notes")
    commit_file(demo, "n.txt", "n\n", "n")
    out = git(demo, "push", "origin", "HEAD:refs/pull/1/head", check=False)
    assert out.returncode != 0 and "only branches" in out.stderr
    out = git(demo, "push", "origin", ":main", check=False)
    assert out.returncode != 0 and "never deleted" in out.stderr
    assert not any((Path(hub.folders.state) / "git" / "demo.git" / "hooks").glob("*"))


def test_without_loopback_trust_git_needs_the_owner_token_as_its_password(folders, tmp_path):
    h = HubProcess(folders, None, args=("--loopback-trust", "off")).start()
    try:
        token = (Path(folders.state) / "owner-token").read_text().strip()
        with h.client() as c:
            ok(c.post("/v1/git/repos", json={"name": "closed"}, headers={"Authorization": f"Bearer {token}"}))
        out = git(tmp_path, "clone", "-q", f"{h.url}/git/closed.git", str(tmp_path / "no"), check=False)
        assert out.returncode != 0
        url = h.url.replace("http://", f"http://owner:{token}@")
        git(tmp_path, "clone", "-q", f"{url}/git/closed.git", str(tmp_path / "yes"))
        out = git(tmp_path, "clone", "-q", h.url.replace("http://", "http://owner:wrong@") + "/git/closed.git",
                  str(tmp_path / "bad"), check=False)
        assert out.returncode != 0
    finally:
        h.stop()


def test_cli_git_and_the_read_models_rebuilt_from_event_one_equal_the_live_ones(hub, demo):
    git(demo, "checkout", "-q", "-b", "docs")
    commit_file(demo, "README.md", "# demo\n", "Docs")
    git(demo, "push", "-q", "origin", "docs")
    r = cli(hub, "git", "repos")
    assert r.returncode == 0 and "demo" in r.stdout
    r = cli(hub, "git", "branches", "demo")
    assert r.returncode == 0 and "docs" in r.stdout
    r = cli(hub, "git", "commits", "demo", "docs")
    assert r.returncode == 0 and "Docs" in r.stdout
    r = cli(hub, "git", "files", "demo", "--ref", "docs")
    assert r.returncode == 0 and "README.md" in r.stdout
    r = cli(hub, "git", "files", "demo", "README.md", "--ref", "docs")
    assert r.returncode == 0 and "# demo" in r.stdout
    with hub.client() as c:
        ok(c.post("/v1/git/prs", json={"repo": "demo", "source": "docs", "title": "Docs", "body": "Adds a readme"}))
    r = cli(hub, "git", "prs")
    assert r.returncode == 0 and "pr1" in r.stdout and "Docs" in r.stdout
    r = cli(hub, "git", "diff", "pr1")
    assert r.returncode == 0 and "+# demo" in r.stdout
    r = cli(hub, "git", "review", "pr1", "request-changes")
    assert r.returncode == 1 and "(own_work)" in r.stderr and "your own pull request" in r.stderr
    r = cli(hub, "git", "merge", "pr1")
    assert r.returncode == 1 and "--yes" in r.stderr
    r = cli(hub, "git", "merge", "pr1", "--yes")
    assert r.returncode == 0 and "merged" in r.stdout
    r = cli(hub, "git", "status")
    assert r.returncode == 0 and "repos" in r.stdout
    live = {p: json.loads(cli(hub, "--json", *p).stdout) for p in
            (("git", "repos"), ("git", "branches", "demo"), ("git", "prs"), ("git", "status"))}
    r = cli(hub, "replay", "--rebuild", "git")
    assert r.returncode == 0, r.stderr
    hub.stop()
    again = HubProcess(hub.folders, hub.env.get("APZ_DATABASE_URL")).start()
    try:
        for p, before in live.items():
            assert json.loads(cli(again, "--json", *p).stdout) == before, p
    finally:
        again.stop()


def test_a_push_larger_than_gits_post_buffer_goes_through_and_is_recorded(hub, demo):
    """git probes the server first (a lone flush packet) and then sends the pack chunked."""
    git(demo, "checkout", "-q", "-b", "big")
    (demo / "blob.bin").write_bytes(os.urandom(3 << 20))
    git(demo, "add", "blob.bin")
    git(demo, "commit", "-q", "-m", "A big file")
    git(demo, "push", "-q", "origin", "big")
    with hub.client() as c:
        f = ok(c.get("/v1/git/repos/demo/files/blob.bin", params={"ref": "big"}))
        assert f["size"] == 3 << 20 and f["binary"] and f["content"] is None
        assert ok(c.get("/v1/git/repos"))["repos"][0]["pushes"] == 1


# -- in process: what the plaza simulator found (issue 26) ---------------------------------------------

def _pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def _push_body(server_path: Path, work: Path, branch: str, text: str) -> tuple[bytes, str, str]:
    """A ``git push`` of one new commit on ``branch`` (from main) as the door hands it the server:
    the ref command and the pack. (the body, the old commit, the new one)"""
    git(work.parent, "clone", "-q", str(server_path), str(work))
    commit_file(work, "a.txt", text, "A change")
    new = git(work, "rev-parse", "HEAD").stdout.strip()
    base = git(work, "rev-parse", "HEAD~1").stdout.strip()
    pack = subprocess.run(["git", "pack-objects", "--stdout", "--revs", "-q"], cwd=work, input=f"{new}\n^{base}\n".encode(),
                          capture_output=True, check=True).stdout
    old = base if branch == "main" else "0" * 40
    return _pkt(f"{old} {new} refs/heads/{branch}\0 report-status\n".encode()) + b"0000" + pack, old, new


@pytest.fixture
def inproc(folders):
    from agentplaza.api.hub import Hub

    h = Hub.open(folders)
    yield h
    h.close()


def test_a_push_whose_record_the_log_refuses_moves_no_ref(inproc, tmp_path):
    """git had moved the ref when the log refused the push's record (a failed write): the ref must go
    back, or it is moved on disk and known to no event."""
    from agentplaza.runtime import forge, githttp
    from agentplaza.runtime.githttp import GitRequest

    server = forge.server_of(inproc)
    server.create(forge.OWNER, "demo")
    before = server.store.refs("demo")
    body, old, new = _push_body(server.store.path("demo"), tmp_path / "w1", "feature", "one\n")
    req = GitRequest("demo", "git-receive-pack", "POST", "", {"content-type": "application/x-git-receive-pack-request"},
                     body)

    def refused(moves):
        raise RuntimeError("the database is full")

    with pytest.raises(RuntimeError):
        githttp.serve(server.store, req, "owner", lambda moves: None, refused)
    assert server.store.refs("demo") == before
    recorded = []
    githttp.serve(server.store, req, "owner", lambda moves: None, recorded.extend)  # the same push, recorded
    assert recorded == [{"ref": "refs/heads/feature", "old": old, "new": new}]
    assert server.store.refs("demo")["refs/heads/feature"] == new


def test_a_merge_recorded_before_the_process_dies_keeps_its_branch_and_a_refused_one_goes_back(inproc, tmp_path,
                                                                                               monkeypatch):
    """A merge whose record the log refused puts the branch back; a process that dies after the record
    (a ``BaseException``: nothing of the process runs on) undoes nothing, so the branch stays where the
    log says."""
    from agentplaza.commands import git as gc
    from agentplaza.runtime import forge
    from agentplaza.runtime.githttp import GitRequest

    server = forge.server_of(inproc)
    server.create(forge.OWNER, "demo")
    body, _old, new = _push_body(server.store.path("demo"), tmp_path / "w1", "feature", "one\n")
    server.http(forge.OWNER, GitRequest("demo", "git-receive-pack", "POST", "",
                                        {"content-type": "application/x-git-receive-pack-request"}, body))
    pr = server.open_pr(forge.OWNER, "demo", "feature", None, "One", "").value
    main = server.store.resolve("demo", "main")
    real = gc.merged

    def refused(*a, **k):
        raise RuntimeError("the database is full")

    monkeypatch.setattr(gc, "merged", refused)
    with pytest.raises(RuntimeError):
        server.merge(forge.OWNER, pr, "ff")
    assert server.store.resolve("demo", "main") == main

    class Died(BaseException):
        pass

    def recorded_then_died(*a, **k):
        real(*a, **k)
        raise Died

    monkeypatch.setattr(gc, "merged", recorded_then_died)
    with pytest.raises(Died):
        server.merge(forge.OWNER, pr, "ff")
    assert server.store.resolve("demo", "main") == new
    merged = [e for e in inproc.commands.store.read() if e.kind == "PullRequest.Merged"]
    assert len(merged) == 1 and merged[0].data["commit"] == new


def test_the_commits_the_hub_makes_are_dated_by_its_clock(tmp_path):
    import datetime as dt

    from agentplaza.runtime.gitstore import GitStore

    at = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
    store = GitStore(tmp_path / "repos", clock=lambda: at)
    store.init("demo")
    old, new = store.commit_files("demo", "main", {"a.txt": b"a\n"}, ("owner", "owner@plaza.invalid"), "A")
    for commit in (old, new):
        stamps = store.text("demo", "log", "-1", "--format=%at %ct", commit).split()
        assert stamps == [str(int(at.timestamp()))] * 2
