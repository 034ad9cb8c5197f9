"""The governance tools through a harness session, under the laws: a goal goes Brief to Delivered
with each role's own tool (the orchestrator opens, a researcher researches, a planner proposes, a
reviewer critiques, the Mayor approves, the orchestrator links the tasks, a builder and a reviewer do
and pass the work, the reviewer delivers); the laws refuse the orchestrator's approval (S-021), an
author's critique of its own plan (S-019, the hub's ``own`` fact), a judge's council vote (S-034) and a
vote without a reason; the domain refuses a task linked before approval. Each refusal writes no
change to the project or the motion."""

from __future__ import annotations

import pytest

from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import projects as pc
from agentplaza.runtime.fleet import AgentRuntime
from agentplaza.runtime.session import HarnessSession


@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def session(hub, role):
    cid = ac.spawn(hub.commands, hub.commands.context("owner"), role, 1).value[0]
    s = HarnessSession(AgentRuntime(hub, node="off"), cid, None)
    assert "error" not in s.handle({"op": "hello"})
    return cid, s


def call(s, tool, **args):
    return s.handle({"op": "tool", "tool": tool, "args": args})


def result(s, tool, **args):
    r = call(s, tool, **args)
    assert "error" not in r, (tool, r)
    return r["result"]


def test_a_goal_goes_brief_to_delivered_through_each_roles_tools_under_the_laws(hub):
    _, orch = session(hub, "orchestrator")
    _, researcher = session(hub, "researcher")
    _, planner = session(hub, "planner")
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
    assert result(mayor, "plaza_project_approve", project=n)["stage"] == "implementation"

    task = result(orch, "plaza_task_create", title="Write the notes", acceptance="every change listed", budget=400,
                  role="builder", project=n)
    assert task["project"] == n
    result(builder, "plaza_task_claim", task=task["id"])
    result(builder, "plaza_task_submit", task=task["id"], summary="wrote them", files=["NOTES.md"], checks="read")
    result(reviewer, "plaza_task_claim", task=task["id"], review=True)
    result(reviewer, "plaza_task_submit", task=task["id"], verdict="pass", notes="complete")
    assert pc.load(hub.commands, n).stage == "review"
    assert result(reviewer, "plaza_project_deliver", project=n, title="Notes", text="NOTES.md")["stage"] == "delivered"

    m = result(seats["finance"], "plaza_council_propose", kind="priority", title="Docs first")["id"]
    sat = call(judge, "plaza_council_vote", motion=m, vote="yes", reason="I agree")
    assert sat["error"]["code"] == "refused" and "S-034" in sat["error"]["message"], sat
    bare = call(seats["counsel"], "plaza_council_vote", motion=m, vote="yes", reason=" ")
    assert "error" in bare, bare
    for seat, s in seats.items():
        out = result(s, "plaza_council_vote", motion=m, vote="yes", reason=f"{seat} agrees")
    assert out["status"] == "carried" and out["result"] == "yes"
    assert builder_cid
