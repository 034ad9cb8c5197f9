"""A code project from Brief to Delivered, end to end, through a real ``apid`` with node n0 and real
microVMs, the mock provider scripted as each agent's model (the owner's messages carry the mock's
directives, as in test_typical_day): the orchestrator opens the project from the owner's goal, a
researcher attaches research, a planner writes the proposal, tasks document and spec, a tester critiques
it, the hub commits the spec to the project's repository as the planner, the Mayor approves the plan, the
orchestrator links the plan's task, a builder does it and hands the file in to the Library, a reviewer
passes it and attaches the deliverable (the Library item); the project's board thread tells each move. The project is not flagged, so the owner is asked nothing: the
approvals queue stays empty of projects and motions. Seven guests (the first boots cold, the others
from its warm template)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support.hubproc import HubProcess, failed

pytestmark = pytest.mark.vm

IMAGES = os.environ.get("APZ_IMAGE_DIR") or str(
    Path(os.environ["APZ_DATA_DIR"]) / "images" if os.environ.get("APZ_DATA_DIR")
    else Path.home() / ".local/share/agentplaza/images")
MOCK = "mock/echo"
#: The owner's price of the mock (credits per million tokens in, out), as in test_typical_day.
PRICE = [50_000, 50_000]


def wait_for(what, fn, timeout=180.0, diag=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}" + (f": {diag()}" if diag else ""))


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()


def tool(name: str, **args) -> str:
    """The mock's directive to call a tool (its arguments may hold no ']')."""
    return f"[mock:tool {name.replace('.', '__')} {json.dumps(args)}]"


@pytest.fixture
def plaza(folders, image, tmp_path, request):
    os.chmod(tmp_path, 0o755)
    h = HubProcess(folders)
    h.env.update(APZ_NODE="local", APZ_IMAGE_DIR=IMAGES)
    h.start(timeout=120)
    try:
        with h.client() as c:
            ok(c.post("/v1/models/providers", json={"id": "mock"}))
            ok(c.patch("/v1/models/policy", json={"worker": [MOCK], "orchestrator": [MOCK], "default_model": MOCK,
                                                   "orchestrator_model": MOCK, "prices": {MOCK: PRICE}}))
            yield h, c
    finally:
        if failed(request):  # pytest shows what a fixture prints at teardown only for a test that failed
            h.stacks()  # every thread's stack, into the hub's output
            print(h.said_last())
        h.stop()


@pytest.fixture(scope="module")
def image():
    from vmm.image import ensure_image

    return ensure_image(IMAGES)


def test_a_code_project_goes_brief_to_delivered_with_each_agent_scripted(plaza):
    _h, c = plaza

    def log(cid):
        return ok(c.get(f"/v1/agents/{cid}/logs", params={"limit": 1000}))["transcript"]

    def count(cid, kind):
        return sum(e["kind"] == kind for e in log(cid))

    def settled(cid):
        wait_for(f"agent {cid} settled", lambda: count(cid, "done") == count(cid, "told"), 180,
                 diag=lambda: [(e["kind"], e["tool"], (e["text"] or "")[:100]) for e in log(cid)][-10:])

    def step(cid, text):
        settled(cid)
        ok(c.post(f"/v1/agents/{cid}/tell", json={"text": text}))
        wait_for("told", lambda: count(cid, "told") > count(cid, "done"), 30)
        settled(cid)
        results = [e for e in log(cid) if e["kind"] == "tool_result"]
        assert results and not (results[-1]["text"] or "").startswith("error"), results[-1:]
        assert (results[-1]["detail"] or {}).get("ok") is not False, results[-1:]  # a refused host tool
        return results[-1]

    def project():
        return ok(c.get("/v1/projects/pj1"))

    def spawn(role):
        return ok(c.post("/v1/agents", json={"role": role}))["agents"][0]["cid"]

    orch, researcher, planner, critic, mayor, builder, reviewer = (
        spawn(r) for r in ("orchestrator", "researcher", "planner", "tester", "mayor", "builder", "reviewer"))
    everyone = (orch, researcher, planner, critic, mayor, builder, reviewer)
    wait_for("seven idle agents", lambda: all(ok(c.get(f"/v1/agents/{x}"))["agent"]["status"] == "idle"
                                               for x in everyone), 600)

    step(orch, "Publish release notes for 0.9. " + tool("plaza_project_open", title="Release notes 0.9",
                                                       brief="A notes file listing every change", kind="code"))
    assert project()["stage"] == "brief"
    step(researcher, tool("plaza_project_research", project="pj1", title="format", text="Keep a Changelog"))
    step(planner, tool("plaza_project_propose", project="pj1", proposal="One NOTES.md",
                       tasks="t: write NOTES.md", spec="NOTES.md lists every change since 0.8"))
    step(critic, tool("plaza_project_critique", project="pj1", text="Clear and small enough"))
    assert project()["stage"] == "approval"
    # the hub keeps the plan in the project's repository as an OpenSpec change, committed by the planner
    wait_for("the spec in pj1's repository", lambda: project()["specs"] == 1, 60)
    (head, *_) = ok(c.get("/v1/git/repos/pj1/commits"))["commits"]
    assert head["email"] == f"agent-{planner}@agents.plaza.invalid", head
    step(mayor, tool("plaza_project_approve", project="pj1"))
    assert project()["stage"] == "implementation"

    step(orch, tool("plaza_task_create", title="Write NOTES.md", acceptance="NOTES.md lists the changes",
                    budget=400, role="builder", project="pj1"))
    wait_for("the builder given the task", lambda: ok(c.get("/v1/tasks/t1"))["worker"] == str(builder), 120)
    wait_for("the builder told", lambda: any("You were given task" in (e["text"] or "") for e in log(builder)), 60)
    notes = "- every change\n"
    step(builder, tool("vm.write_file", path="NOTES.md", content=notes))
    shared = step(builder, tool("vm.share_file", path="NOTES.md"))["text"].rsplit(" as ", 1)[1].strip()
    assert shared == "f1", shared  # the file store's number (docs/library.md)
    step(builder, tool("plaza_library_submit", file=shared, title="Release notes 0.9", task="t1"))
    step(builder, tool("plaza_task_submit", task="t1", summary="wrote NOTES.md", files="NOTES.md", checks="read it"))
    wait_for("the review given", lambda: ok(c.get("/v1/tasks/t1"))["reviewer"] == str(reviewer), 120)
    wait_for("the reviewer told", lambda: any("Review task t1" in (e["text"] or "") for e in log(reviewer)), 60)
    step(reviewer, tool("plaza_task_submit", task="t1", verdict="pass", notes="complete"))
    assert ok(c.get("/v1/tasks/t1"))["state"] == "done" and project()["stage"] == "review"
    step(reviewer, tool("plaza_project_deliver", project="pj1", title="NOTES.md", text="the notes, passed in t1",
                        item="d1"))

    shown = project()
    assert shown["stage"] == "delivered" and shown["tasks"] == ["t1"]
    actors = {h["what"]: h["actor"] for h in shown["history"] if h["what"] not in ("move", "repo", "spec")}
    assert actors == {"brief": f"agent:{orch}", "research": f"agent:{researcher}", "proposal": f"agent:{planner}",
                      "critique": f"agent:{critic}", "mayor": f"agent:{mayor}", "task": f"agent:{orch}",
                      "task_done": f"agent:{reviewer}", "deliverable": f"agent:{reviewer}"}
    thread = ok(c.get(f"/v1/board/{shown['thread']}"))["thread"]
    assert sum(" moved from " in r["text"] for r in thread) == 7
    asked = ok(c.get("/v1/approvals", params={"status": "all"}))["approvals"]
    assert not [a for a in asked if a["kind"] in ("project", "motion")], asked  # the owner is asked nothing
