"""The plaza's git server with agents in real microVMs, through a real ``apid`` with node n0 and the mock
provider scripted as the model (issue 20's acceptance): a builder clones a project repository with plain
``git`` inside its VM, commits on a branch, pushes and opens a pull request; a reviewer reviews it; the
owner merges it from the CLI; the hub's history shows the builder as the author; the builder's VM holds
no credential; a push to the default branch is refused by the owner's law and recorded as an
infraction; the owner clones the repository over HTTP and sees the merged commit."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.hubproc import cli
from test_typical_day import Scripted, day, image, ok, tool, wait_for  # noqa: F401 - the fixtures

from vmm.guest.contract import GIT_PORT

pytestmark = pytest.mark.vm

NO_MAIN = ('law no-main "Nobody pushes to the default branch" {\n  statement "Changes reach main by a merge."\n'
           '  forbid plaza_git\n  when args.op == push and args.protected == true\n}\n')
CLONE = f"http://127.0.0.1:{GIT_PORT}/git/demo.git"


def test_agents_clone_push_open_review_and_the_owner_merges_with_no_credential_in_the_vm(day, tmp_path):  # noqa: F811
    h, c = day

    step = Scripted(c).step

    def shell(cid, command):
        return step(cid, tool("vm.shell", command=command, timeout=300))

    ok(c.post("/v1/git/repos", json={"name": "demo"}))
    added = c.post("/v1/rules", json={"title": "no main", "source": NO_MAIN})
    assert added.status_code == 201, added.text
    (b,) = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "builder"}))["agents"]]
    (r,) = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "reviewer"}))["agents"]]
    for cid in (b, r):
        wait_for(f"agent {cid} idle", lambda cid=cid: ok(c.get(f"/v1/agents/{cid}"))["agent"]["status"] == "idle", 420)
    # The guest's git names the agent: its chosen name, or role-CID where it chose none (harness.git_identity).
    name = ok(c.get(f"/v1/agents/{b}"))["agent"]["name"] or f"builder-{b}"

    # The builder: clone, branch, commit, push, with ordinary git and no password or token anywhere.
    out = shell(b, f"cd /workspace && git clone -q {CLONE} demo && cd demo && git checkout -q -b feature && "
                   "echo hi > hello.txt && git add hello.txt && git commit -qm 'Say hi' && "
                   "git push -q origin feature 2>&1; echo pushed=$?")
    assert "pushed=0" in out, out
    opened = json.loads(step(b, tool("plaza_git", op="open_pr", repo="demo", source="feature", title="Say hi")))
    assert opened["opened"] is True
    number = opened["pr"]
    # The default branch: refused by the owner's law, an infraction on the builder's record.
    out = shell(b, "cd /workspace/demo && git push origin feature:main 2>&1; echo pushed=$?")
    assert "pushed=0" not in out and "no-main" in out, out
    infractions = ok(c.get("/v1/rules/infractions"))["infractions"]
    assert [(i["law_id"], str(i["agent"]), i["tool"]) for i in infractions] == [("no-main", str(b), "plaza_git")]
    # No credential in the VM: no plaza token (owner, gateway, MCP: all apz_...) in its environment, its git
    # configuration or its files, and no git credential store. (The owner's token never goes near the VM,
    # not even to look for it.)
    out = shell(b, "env; git config --list --show-origin; ls -a ~ /root; "
                   "grep -rlsI 'apz''_' /workspace /root /home /etc /tmp /run 2>/dev/null; echo scanned")
    assert "scanned" in out and "apz_" not in out, out
    assert "credential" not in out and ".git-credentials" not in out, out

    # The reviewer reviews; the owner merges from the command line.
    reviewed = json.loads(step(r, tool("plaza_git_review", pr=number, verdict="approve", text="Looks right")))
    assert reviewed["verdict"] == "approve"
    merged = cli(h, "git", "merge", number, "--yes")
    assert merged.returncode == 0, merged.stderr
    pr = ok(c.get(f"/v1/git/prs/{number}"))["pr"]
    assert pr["state"] == "merged" and pr["author"] == f"agent:{b}"
    assert [(n["verdict"], n["by"]) for n in pr["notes"] if n["kind"] == "review"] == [("approve", f"agent:{r}")]
    commits = ok(c.get("/v1/git/repos/demo/commits"))["commits"]
    assert any(x["subject"] == "Say hi" and x["author"] == name and x["email"] == f"agent-{b}@agents.plaza.invalid"
               for x in commits), (name, commits[:3])

    # The owner clones it over plain HTTP from this machine and sees the merged commit.
    copy = tmp_path / "copy"
    done = subprocess.run(["git", "clone", "-q", f"{h.url}/git/demo.git", str(copy)], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert (copy / "hello.txt").read_text() == "hi\n"
    shown = subprocess.run(["git", "-C", str(copy), "log", "--format=%an %s"], capture_output=True, text=True).stdout
    assert f"{name} Say hi" in shown
