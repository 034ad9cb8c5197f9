"""The git server's start puts every repository's refs where the log says (``runtime.gitrepair``): a hub
that died between git moving a ref and the record of the move leaves the ref moved and no event; the
next start moves it back, deletes a ref the log never recorded, reports a ref whose commit git lacks,
and leaves a normal history (pushes, tags, merges, a deleted branch, the hub's own spec commits) alone."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest
from support.hubproc import HubProcess, ok
from test_git_server import _push_body, commit_file, git

from agentplaza.api.hub import Hub
from agentplaza.commands import git as gc
from agentplaza.runtime import forge, githttp
from agentplaza.runtime.githttp import GitRequest
from agentplaza.sim.invariants import git_refs_problem

RECEIVE = {"content-type": "application/x-git-receive-pack-request"}
ZERO = "0" * 40


class Died(BaseException):
    """The hub's process is gone: nothing of it runs on (no undo)."""


def push(server: forge.GitServer, body: bytes) -> None:
    server.http(forge.OWNER, GitRequest("demo", "git-receive-pack", "POST", "", RECEIVE, body))


def behind_the_logs_back(server: forge.GitServer, *args: str) -> None:
    """Plain git on the server's repository, as a hub that died before its record left it."""
    subprocess.run(["git", "--git-dir", str(server.store.path("demo")), *args], check=True, capture_output=True)


def logged(hub: Hub) -> dict[str, dict[str, str]]:
    """Each repository's refs by an independent fold of the whole log (the simulator's invariant's)."""
    refs, _prs = git_refs_problem(hub.commands.store.read())
    assert not isinstance(refs, str), refs
    return refs


def reopened(folders, hub: Hub) -> tuple[Hub, forge.GitServer]:
    hub.close()
    again = Hub.open(folders, database_url=hub.database_url or "")
    return again, forge.server_of(again)


@pytest.fixture
def demo(folders, database_url, tmp_path):
    hub = Hub.open(folders, database_url=database_url or "")
    server = forge.server_of(hub)
    server.create(forge.OWNER, "demo")
    body, _old, new = _push_body(server.store.path("demo"), tmp_path / "w1", "feature", "one\n")
    push(server, body)
    holder = {"hub": hub}
    yield hub, server, new, holder
    holder["hub"].close()


def test_a_ref_moved_behind_the_logs_back_goes_back_and_one_never_recorded_is_deleted(folders, demo, caplog):
    hub, server, feature, holder = demo
    main = server.store.resolve("demo", "main")
    behind_the_logs_back(server, "update-ref", "refs/heads/main", feature)
    behind_the_logs_back(server, "update-ref", "refs/heads/stray", feature)
    behind_the_logs_back(server, "update-ref", "refs/tags/v9", main)
    behind_the_logs_back(server, "update-ref", "-d", "refs/heads/feature")
    with caplog.at_level(logging.WARNING, logger="agentplaza.runtime.gitrepair"):
        hub, server = reopened(folders, hub)
    holder["hub"] = hub
    assert server.store.refs("demo") == logged(hub)["demo"] == {"refs/heads/main": main, "refs/heads/feature": feature}
    assert sorted((r.ref, r.old, r.new, r.done) for r in server.repaired) == [
        ("refs/heads/feature", ZERO, feature, True), ("refs/heads/main", feature, main, True),
        ("refs/heads/stray", feature, ZERO, True), ("refs/tags/v9", main, ZERO, True)]
    lines = [r.getMessage() for r in caplog.records]
    assert f"git repair: demo refs/heads/main {feature} -> {main} (as the log has it)" in lines
    assert f"git repair: demo refs/heads/stray {feature} -> none (as the log has it)" in lines
    assert len(lines) == 4
    assert server.store.run("demo", "cat-file", "-e", feature).returncode == 0  # objects are never deleted
    hub, server = reopened(folders, hub)
    holder["hub"] = hub
    assert server.repaired == []  # repaired once: the next start finds nothing


def test_a_push_whose_record_never_commits_is_undone_at_the_next_start(folders, demo, tmp_path):
    hub, server, feature, holder = demo
    before = server.store.refs("demo")
    body, _old, new = _push_body(server.store.path("demo"), tmp_path / "w2", "main", "two\n")
    req = GitRequest("demo", "git-receive-pack", "POST", "", RECEIVE, body)

    def died(moves):
        raise Died

    with pytest.raises(Died):
        githttp.serve(server.store, req, "owner", lambda moves: None, died)
    assert server.store.resolve("demo", "main") == new  # git moved it; the log never heard
    hub, server = reopened(folders, hub)
    holder["hub"] = hub
    assert server.store.refs("demo") == before == logged(hub)["demo"]
    assert [(r.ref, r.old, r.new) for r in server.repaired] == [("refs/heads/main", new, before["refs/heads/main"])]


def test_a_merge_whose_record_never_commits_is_undone_at_the_next_start(folders, demo, monkeypatch):
    hub, server, feature, holder = demo
    number = server.open_pr(forge.OWNER, "demo", "feature", None, "One", "").value
    main = server.store.resolve("demo", "main")

    def died(*a, **k):
        raise Died

    monkeypatch.setattr(gc, "merged", died)
    with pytest.raises(Died):
        server.merge(forge.OWNER, number, "ff")
    assert server.store.resolve("demo", "main") == feature
    monkeypatch.undo()
    hub, server = reopened(folders, hub)
    holder["hub"] = hub
    assert server.store.resolve("demo", "main") == main
    assert server.merge(forge.OWNER, number, "ff").value == feature  # the merge made again, recorded this time


def test_a_ref_whose_commit_the_repository_lacks_is_reported_and_left(folders, demo, tmp_path, caplog):
    hub, server, feature, holder = demo
    older = tmp_path / "older.git"
    shutil.copytree(server.store.path("demo"), older)  # a backup of the repository ...
    body, _old, new = _push_body(server.store.path("demo"), tmp_path / "w2", "main", "two\n")
    push(server, body)
    hub.close()
    shutil.rmtree(server.store.path("demo"))
    shutil.copytree(older, server.store.path("demo"))  # ... restored older than the log
    with caplog.at_level(logging.WARNING, logger="agentplaza.runtime.gitrepair"):
        hub = holder["hub"] = Hub.open(folders, database_url=hub.database_url or "")
        server = forge.server_of(hub)
    assert server.store.refs("demo")["refs/heads/main"] != new  # no object invented, the ref left
    assert [(r.ref, r.new, r.done) for r in server.repaired] == [("refs/heads/main", new, False)]
    assert any(f"the log has it at {new}" in r.getMessage() and "lacks" in r.getMessage() for r in caplog.records)


def test_a_normal_history_is_left_as_it_is(folders, demo, tmp_path):
    hub, server, feature, holder = demo
    work = tmp_path / "w2"
    git(tmp_path, "clone", "-q", str(server.store.path("demo")), str(work))
    git(work, "checkout", "-q", "-b", "other")
    commit_file(work, "b.txt", "b\n", "B")
    git(work, "tag", "-a", "v1", "-m", "one")
    other = git(work, "rev-parse", "HEAD").stdout.strip()
    tag = git(work, "rev-parse", "v1").stdout.strip()
    pack = subprocess.run(["git", "pack-objects", "--stdout", "--revs", "-q"], cwd=work,
                          input=f"{other}\n{tag}\n^{feature}\n".encode(), capture_output=True, check=True).stdout
    main = server.store.resolve("demo", "main")
    cmds = githttp._pkt(f"{ZERO} {other} refs/heads/other\0 report-status\n".encode()) + githttp._pkt(
        f"{ZERO} {tag} refs/tags/v1\n".encode())
    push(server, cmds + b"0000" + pack)  # a branch and an annotated tag, recorded
    first = server.open_pr(forge.OWNER, "demo", "feature", None, "Feature", "").value
    server.merge(forge.OWNER, first, "ff")
    second = server.open_pr(forge.OWNER, "demo", "other", None, "Other", "").value
    server.merge(forge.OWNER, second, "merge")  # a merge commit
    third = server.open_pr(forge.OWNER, "demo", "feature", "other", "Back", "").value
    server.close(forge.OWNER, third)
    old, new = server.store.commit_files("demo", "main", {"openspec/x.md": b"x\n"}, ("hub", "hub@plaza.invalid"),
                                         "a spec")  # as the project's pass commits a spec, then records it
    gc.pushed(server.cmds, server.cmds.context("hub"), "demo", [{"ref": "refs/heads/main", "old": old, "new": new}])
    push(server, githttp._pkt(f"{other} {ZERO} refs/heads/other\0 report-status delete-refs\n".encode()) + b"0000")
    assert main != new and "refs/heads/other" not in server.store.refs("demo")
    server.create(forge.OWNER, "second")
    before = {name: server.store.refs(name) for name in ("demo", "second")}
    assert before == logged(hub)
    hub, server = reopened(folders, hub)
    holder["hub"] = hub
    assert server.repaired == []
    assert {name: server.store.refs(name) for name in ("demo", "second")} == before


def test_apid_repairs_the_refs_before_it_listens_one_line_each(folders, database_url, tmp_path):
    h = HubProcess(folders, database_url).start()
    try:
        with h.client() as c:
            ok(c.post("/v1/git/repos", json={"name": "demo"}))
        work = tmp_path / "work"
        git(tmp_path, "clone", "-q", f"{h.url}/git/demo.git", str(work))
        main = git(work, "rev-parse", "HEAD").stdout.strip()
        commit_file(work, "a.txt", "a\n", "A")
        moved = git(work, "rev-parse", "HEAD").stdout.strip()
    finally:
        h.stop()
    repo = Path(folders.state) / "git" / "demo.git"
    subprocess.run(["git", "--git-dir", str(repo), "fetch", "-q", str(work / ".git"), "HEAD"], check=True,
                   capture_output=True)
    subprocess.run(["git", "--git-dir", str(repo), "update-ref", "refs/heads/main", moved], check=True)
    h = HubProcess(folders, database_url).start()
    try:
        assert f"git repair: demo refs/heads/main {moved} -> {main} (as the log has it)" in h.output
        served = git(work, "ls-remote", f"{h.url}/git/demo.git", "refs/heads/main").stdout.split()
        assert served == [main, "refs/heads/main"]
    finally:
        h.stop()
