"""Agents on the git server: a real `git` client through the agents' door (the channel service `git`,
``runtime.gitdoor``), with no token anywhere: the hub knows the agent from the pipe, as it knows it from
the agent's channel. Each fetch, push, review and merge is decided by the laws as a tool call."""

from __future__ import annotations

import socket
import threading

import pytest
from test_git_server import commit_file, git

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import laws as law_commands
from agentplaza.domain.base import Refusal
from agentplaza.projections import git as rm
from agentplaza.projections.laws import infraction_rows
from agentplaza.runtime import gitdoor
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.forge import OWNER, Caller, server_of
from agentplaza.runtime.session import HarnessSession

NO_MAIN = ('law no-main "Nobody pushes to the default branch" {\n  statement "Changes reach main by a merge."\n'
           '  forbid plaza_git\n  when args.op == push and args.protected == true\n}\n')


@pytest.fixture
def hub(folders, database_url):
    h = Hub.open(folders, database_url=database_url)
    yield h
    h.close()


class Door:
    """A TCP port that hands each connection to the git door as one agent: the test's stand-in for the
    VM's forwarder and its channel (a byte pipe the hub knows is that agent's)."""

    def __init__(self, hub, who: int | Caller):
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}/git"
        self.hub, self.caller = hub, who if isinstance(who, Caller) else Caller(f"agent:{who}")
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self) -> None:
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(conn,), daemon=True).start()

    def one(self, conn: socket.socket) -> None:
        with conn:
            gitdoor.answer_as(self.hub, self.caller, conn.recv, conn.sendall)

    def close(self) -> None:
        self.srv.close()


def spawn(hub, role: str) -> int:
    return ac.spawn(hub.commands, hub.commands.context("owner"), role, 1).value[0]


def test_a_builder_pushes_a_branch_opens_a_pr_a_reviewer_reviews_and_the_owner_merges(hub, tmp_path):
    builder, reviewer = spawn(hub, "builder"), spawn(hub, "reviewer")
    server = server_of(hub)
    server.create(OWNER, "proj")
    door = Door(hub, builder)
    try:
        work = tmp_path / "w"
        git(tmp_path, "clone", "-q", f"{door.url}/proj.git", str(work))
        git(work, "checkout", "-q", "-b", "feature")
        commit_file(work, "app.py", "print('hi')\n", "App")
        git(work, "push", "-q", "origin", "feature")
        out = git(work, "push", "origin", "feature:main", check=False)
        assert out.returncode != 0 and "default branch" in out.stderr and "pull request" in out.stderr
        out = git(work, "push", "origin", ":feature", check=False)  # an agent does not delete branches
        assert out.returncode != 0
    finally:
        door.close()
    hub.read_models.catch_up()
    branches = {b["branch"]: b for b in rm.branch_rows(hub.read_models, "proj")}
    assert branches["feature"]["updated_by"] == f"agent:{builder}" and branches["main"]["updated_by"] == "owner"

    ctx_b = Caller(f"agent:{builder}")
    number = server.open_pr(ctx_b, "proj", "feature", None, "Add the app", "It prints hi").value
    with pytest.raises(Refusal) as own:
        server.review(ctx_b, number, "approve", "")
    assert own.value.code == "not_allowed" and "S-024" in own.value.message  # the law, before the domain
    server.review(Caller(f"agent:{reviewer}"), number, "request_changes", "Say hello properly")
    server.merge(OWNER, number)
    hub.read_models.catch_up()
    pr = rm.pr_row(hub.read_models, number)
    assert pr["state"] == "merged" and pr["author"] == f"agent:{builder}"
    assert [(n["kind"], n["verdict"], n["by"]) for n in pr["notes"]] == [("review", "request_changes", f"agent:{reviewer}")]
    log = server.store.log("proj", "main")
    assert log[0]["author"] == "Builder Bee" and log[0]["subject"] == "App"


def test_a_push_to_main_refused_by_an_owners_rule_is_an_infraction(hub, tmp_path):
    builder = spawn(hub, "builder")
    law_commands.change(hub.commands, hub.commands.context("owner"), "add", title="no main", source=NO_MAIN)
    server_of(hub).create(OWNER, "proj")
    door = Door(hub, builder)
    try:
        work = tmp_path / "w"
        git(tmp_path, "clone", "-q", f"{door.url}/proj.git", str(work))
        commit_file(work, "x.txt", "x\n", "x")
        out = git(work, "push", "origin", "main", check=False)
        assert out.returncode != 0 and "no-main" in out.stderr
    finally:
        door.close()
    hub.read_models.catch_up()
    rows = infraction_rows(hub.read_models, 10)
    assert [(r["law_id"], r["agent"], r["tool"]) for r in rows] == [("no-main", str(builder), "plaza_git")]
    assert server_of(hub).store.heads("proj")["main"] == rm.branch_rows(hub.read_models, "proj")[0]["commit"]


def test_the_forge_is_not_for_judges_and_merges_follow_the_laws(hub, tmp_path):
    judge, builder, mayor = spawn(hub, "judge"), spawn(hub, "builder"), spawn(hub, "mayor")
    server = server_of(hub)
    server.create(OWNER, "proj")
    door = Door(hub, judge)
    try:
        out = git(tmp_path, "clone", "-q", f"{door.url}/proj.git", str(tmp_path / "j"), check=False)
        assert out.returncode != 0 and "T-004" in out.stderr
    finally:
        door.close()
    owner = Door(hub, OWNER)
    try:
        work = tmp_path / "o"
        git(tmp_path, "clone", "-q", f"{owner.url}/proj.git", str(work))
        git(work, "checkout", "-q", "-b", "b1")
        commit_file(work, "b.txt", "b\n", "b")
        git(work, "push", "-q", "origin", "b1")
    finally:
        owner.close()
    number = server.open_pr(OWNER, "proj", "b1", "main", "B", "").value
    with pytest.raises(Refusal) as r:
        server.merge(Caller(f"agent:{builder}"), number)
    assert r.value.code == "not_allowed"  # S-025: reviewers, architects and the Mayor merge
    server.merge(Caller(f"agent:{mayor}"), number)
    hub.read_models.catch_up()
    assert rm.pr_row(hub.read_models, number)["ended_by"] == f"agent:{mayor}"
    assert server.store.log("proj", "main")[0]["subject"] == "b"


def session(hub, role: str):
    cid = spawn(hub, role)
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    s.handle({"op": "hello"})
    ac.tell(hub.commands, hub.commands.context("owner"), cid, "work")
    s.handle({"op": "next", "wait": 0})
    return cid, s


def tool(s, name: str, **args) -> dict:
    return s.handle({"op": "tool", "tool": name, "args": args})


def test_the_git_host_tools_open_review_and_merge_with_the_hubs_own_facts(hub, tmp_path):
    builder, b = session(hub, "builder")
    reviewer, r = session(hub, "reviewer")
    server_of(hub).create(OWNER, "proj")
    door = Door(hub, builder)
    try:
        work = tmp_path / "w"
        git(tmp_path, "clone", "-q", f"{door.url}/proj.git", str(work))
        git(work, "checkout", "-q", "-b", "feature")
        commit_file(work, "a.txt", "a\n", "A")
        git(work, "push", "-q", "origin", "feature")
    finally:
        door.close()
    hub.read_models.catch_up()  # the hub's follower does this in apid
    status = tool(b, "plaza_git", op="status")["result"]
    assert [x["name"] for x in status["repos"]] == ["proj"] and status["clone"].endswith("/git/NAME.git")
    assert set(tool(b, "plaza_git", op="branches", repo="proj")["result"]) == {"main", "feature"}
    opened = tool(b, "plaza_git", op="open_pr", repo="proj", source="feature", title="Add a", body="a file")["result"]
    pr = opened["pr"]
    assert "+a" in tool(r, "plaza_git", op="diff", pr=pr)["result"]["patch"]
    own = tool(b, "plaza_git_review", pr=pr, verdict="approve", own=False)  # the model's word is not taken
    assert own["error"]["code"] == "bad_request"
    own = tool(b, "plaza_git_review", pr=pr, verdict="approve")
    assert own["error"]["code"] == "refused" and "S-024" in own["error"]["message"]
    assert tool(r, "plaza_git_review", pr=pr, verdict="approve", text="fine")["result"]["verdict"] == "approve"
    refused = tool(b, "plaza_git_merge", pr=pr)
    assert refused["error"]["code"] == "refused"  # builders do not merge (S-025)
    merged = tool(r, "plaza_git_merge", pr=pr)["result"]
    assert merged["merged"] and server_of(hub).store.heads("proj")["main"] == merged["commit"]
    hub.read_models.catch_up()
    row = rm.pr_row(hub.read_models, pr)
    assert row["state"] == "merged" and row["approvals"] == 1 and row["ended_by"] == f"agent:{reviewer}"
