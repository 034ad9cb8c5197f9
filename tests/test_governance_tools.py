"""The governance tools through a harness session, under the laws: a goal goes Brief to Delivered
with each role's own tool (the orchestrator opens, a researcher researches, a planner proposes, a
reviewer critiques, the Mayor approves, the orchestrator links the tasks, a builder and a reviewer do
and pass the work, the reviewer delivers); the laws refuse the orchestrator's approval (S-021), an
author's critique of its own plan (S-019, the hub's ``own`` fact), a judge's council vote (S-034) and a
vote without a reason; the domain refuses a task linked before approval. Each refusal writes no
change to the project or the motion."""

from __future__ import annotations

import base64

import pytest
from support.sessions import session

from agentplaza.api.hub import Hub
from agentplaza.commands import approvals as apc
from agentplaza.commands import council as cc
from agentplaza.commands import projects as pc
from agentplaza.runtime import forge, projectrepo


@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def call(s, tool, **args):
    return s.handle({"op": "tool", "tool": tool, "args": args})


def keep_in_git(hub) -> int:
    """The hub's pass that keeps the projects in git (``runtime.projectrepo``), on the log as it is now."""
    hub.read_models.catch_up()
    return projectrepo.reconcile(hub)


def hand_in(s, path: str, data: bytes, title: str, **more) -> str:
    """Share a file and hand it in to the Library (plaza_library_submit); the item's number."""
    shared = s.handle({"op": "share", "path": path, "content": base64.b64encode(data).decode()})
    return result(s, "plaza_library_submit", file=shared["name"], title=title, **more)["item"]


def result(s, tool, **args):
    r = call(s, tool, **args)
    assert "error" not in r, (tool, r)
    return r["result"]


def test_a_goal_goes_brief_to_delivered_through_each_roles_tools_under_the_laws(hub):
    _, orch = session(hub, "orchestrator")
    _, researcher = session(hub, "researcher")
    planner_cid, planner = session(hub, "planner")
    planner_name = forge.author_of(hub, forge.Caller(f"agent:{planner_cid}"))[0]
    _, critic = session(hub, "reviewer")
    _, mayor = session(hub, "mayor")
    builder_cid, builder = session(hub, "builder")
    _, reviewer = session(hub, "reviewer")
    _, judge = session(hub, "judge")
    seats = {r: session(hub, r)[1] for r in ("finance", "counsel", "incident")}
    seats["mayor"] = mayor

    n = result(orch, "plaza_project_open", title="Release notes", brief="Publish the notes for 0.9")["id"]
    assert call(researcher, "plaza_project_open", title="x", brief="y")["error"]["code"] == "refused"
    assert result(researcher, "plaza_project_research", project=n, text="a static page")["stage"] == "research"
    result(planner, "plaza_project_propose", project=n, proposal="one page", tasks="t: write the notes",
           spec="NOTES.md lists every change")
    before = pc.load(hub.commands, n).version
    own = call(planner, "plaza_project_critique", project=n, text="looks good to me")
    assert own["error"]["code"] == "refused" and "S-019" in own["error"]["message"], own
    assert result(critic, "plaza_project_critique", project=n, text="fine")["stage"] == "approval"
    no = call(orch, "plaza_project_approve", project=n)
    assert no["error"]["code"] == "refused" and "S-021" in no["error"]["message"], no
    early = call(orch, "plaza_task_create", title="Write", acceptance="written", project=n)
    assert early["error"]["code"] == "plan_not_approved", early
    assert pc.load(hub.commands, n).version == before + 3  # the critique and its two moves: nothing from the refusals
    waits = call(mayor, "plaza_project_approve", project=n)
    assert waits["error"]["code"] == "spec_not_committed", waits  # the spec is not in the repository yet
    keep_in_git(hub)
    p = pc.load(hub.commands, n)
    assert p.repo == n and p.specs[1]["path"] == "openspec/changes/pj1-release-notes"
    store = forge.server_of(hub).store
    (head,) = store.log(n, "main", 1)
    assert head["commit"] == p.specs[1]["commit"] and head["author"] == planner_name
    assert head["email"] == f"agent-{planner_cid}@agents.plaza.invalid" and head["committer"] == planner_name
    spec = store.files(n, "main", "openspec/changes/pj1-release-notes/specs/release-notes/spec.md")["content"]
    assert spec.startswith("## ADDED Requirements") and "NOTES.md lists every change" in spec
    assert "t: write the notes" in store.files(n, "main", "openspec/changes/pj1-release-notes/tasks.md")["content"]
    assert keep_in_git(hub) == 0, "a second pass makes nothing"
    assert result(mayor, "plaza_project_approve", project=n)["stage"] == "implementation"

    task = result(orch, "plaza_task_create", title="Write the notes", acceptance="every change listed", budget=400,
                  role="builder", project=n)
    assert task["project"] == n
    result(builder, "plaza_task_claim", task=task["id"])
    result(builder, "plaza_task_submit", task=task["id"], summary="wrote them", files=["NOTES.md"], checks="read")
    result(reviewer, "plaza_task_claim", task=task["id"], review=True)
    result(reviewer, "plaza_task_submit", task=task["id"], verdict="pass", notes="complete")
    assert pc.load(hub.commands, n).stage == "review"
    bare = call(reviewer, "plaza_project_deliver", project=n, title="Notes", text="NOTES.md")
    assert bare["error"]["code"] == "bad_request", bare  # the item is required
    other = hand_in(builder, "OTHER.md", b"not it\n", "Other", project="pj9")
    wrong = call(reviewer, "plaza_project_deliver", project=n, title="Notes", text="NOTES.md", item=other)
    assert wrong["error"]["code"] == "not_this_project", wrong
    missing = call(reviewer, "plaza_project_deliver", project=n, title="Notes", text="NOTES.md", item="d99")
    assert missing["error"]["code"] == "needs_deliverable", missing
    item = hand_in(builder, "NOTES.md", b"- every change\n", "Release notes", task=task["id"])
    out = result(reviewer, "plaza_project_deliver", project=n, title="Notes", text="NOTES.md", item=item)
    assert out["stage"] == "delivered" and pc.load(hub.commands, n).deliverable["item"] == item

    m = result(seats["finance"], "plaza_council_propose", kind="priority", title="Docs first")["id"]
    sat = call(judge, "plaza_council_vote", motion=m, vote="yes", reason="I agree")
    assert sat["error"]["code"] == "refused" and "S-034" in sat["error"]["message"], sat
    bare = call(seats["counsel"], "plaza_council_vote", motion=m, vote="yes", reason=" ")
    assert "error" in bare, bare
    for seat, s in seats.items():
        out = result(s, "plaza_council_vote", motion=m, vote="yes", reason=f"{seat} agrees")
    assert out["status"] == "carried" and out["result"] == "yes"
    assert builder_cid


def test_a_ruling_for_a_heavy_sanction_waits_for_the_owner_and_a_light_one_does_not(hub):
    """S-041: the ruling's ``sanction`` is the hub's fact (the heaviest step the schedule gives a
    violation of that law by that agent now); a lockout, demotion, retirement or owner review asks the
    owner, and the approved call runs once; a warning rules at once."""
    accused, _ = session(hub, "builder")
    _, prosecutor = session(hub, "prosecutor")
    _, judge = session(hub, "judge")
    light = result(prosecutor, "plaza_case_file", accused=accused, law="S-002", severity="low", charge="a path")["id"]
    heavy = result(prosecutor, "plaza_case_file", accused=accused, law="C-002a", severity="critical",
                   charge="asked for a key")["id"]
    assert result(judge, "plaza_case_rule", case=light, verdict="violation", text="it did")["ruling"]["verdict"] == \
        "violation"
    own = call(judge, "plaza_case_rule", case=heavy, verdict="violation", text="it did", sanction="none")
    assert own["error"]["code"] == "bad_request", own  # the sanction is the hub's fact, never the model's word
    waits = call(judge, "plaza_case_rule", case=heavy, verdict="violation", text="it asked for the vault key")
    assert waits["error"]["code"] == "awaiting_approval", waits
    number = waits["approval"]
    assert cc.case_of(hub.commands, heavy)["ruling"] is None, "the ruling waited: nothing was ruled"
    assert apc.load(hub.commands, number).status == "pending"
    apc.decide(hub.commands, hub.commands.context("owner", "checked the transcript"), number, True)
    ruled = result(judge, "plaza_case_rule", case=heavy, verdict="violation", text="it asked for the vault key")
    assert ruled["ruling"]["verdict"] == "violation"
    assert [s["step"] for s in ruled["sanction"]["done"]] == ["fine", "lockout", "owner_review"], ruled["sanction"]
    dismissed = result(prosecutor, "plaza_case_file", accused=accused, law="C-002a", severity="critical",
                       charge="again")["id"]
    assert result(judge, "plaza_case_rule", case=dismissed, verdict="dismissed", text="no")["ruling"]["verdict"] == \
        "dismissed"


def test_a_spec_commit_the_log_refuses_goes_back_and_one_recorded_before_the_process_died_stays(hub, monkeypatch):
    """The hub's pass commits a code plan's spec on the project's branch, then records the push: a
    record the log refused puts the branch back (the next pass commits it again); a process that died
    after the record (a ``BaseException``) undoes nothing, so the branch is where the log says."""
    from agentplaza.commands import git as gc

    _, orch = session(hub, "orchestrator")
    _, researcher = session(hub, "researcher")
    _, planner = session(hub, "planner")
    n = result(orch, "plaza_project_open", title="Release notes", brief="Publish the notes for 0.9")["id"]
    result(researcher, "plaza_project_research", project=n, text="a static page")
    result(planner, "plaza_project_propose", project=n, proposal="one page", tasks="t: write the notes",
           spec="NOTES.md lists every change")
    real = gc.pushed

    def refused(*a, **k):
        raise RuntimeError("the database is full")

    monkeypatch.setattr(gc, "pushed", refused)
    with pytest.raises(RuntimeError):
        keep_in_git(hub)  # the repository made, then the spec's commit, whose record fails
    p = pc.load(hub.commands, n)
    store = forge.server_of(hub).store
    created = next(e for e in hub.commands.store.read() if e.kind == "Repo.Created")
    assert store.resolve(p.repo, "main") == created.data["head"]

    class Died(BaseException):
        pass

    def recorded_then_died(*a, **k):
        done = real(*a, **k)
        raise Died(done)

    monkeypatch.setattr(gc, "pushed", recorded_then_died)
    with pytest.raises(Died):
        keep_in_git(hub)
    pushed = [e for e in hub.commands.store.read() if e.kind == "Repo.Pushed"]
    assert store.resolve(p.repo, "main") == pushed[-1].data["moves"][0]["new"] != created.data["head"]
