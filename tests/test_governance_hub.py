"""Projects, the council and the courts against a real hub (SQLite and PostgreSQL): a code project
goes Brief to Delivered with the owner asked only because it was flagged; a blocking critique stops
the Mayor, linking before approval is refused, and each refusal changes nothing; the council's tie
and a large budget move come to the owner, a carried budget move moves the credits; a judge's
ruling of violation is recorded on the agent's conduct. The hub keeps a code project's revisions in
its repository as OpenSpec changes committed by their author, and the Mayor waits for them; the
project is delivered only with its deliverable in the Library; its thread on the board tells every
move. The CLI's projects, council and courts tables."""

from __future__ import annotations

import types

import pytest
from support.agentside import AgentSide
from support.deadline import until
from support.hubproc import cli, ok

from agentplaza.commands import council as cc
from agentplaza.commands import projects as pc
from agentplaza.domain.base import Refusal
from agentplaza.runtime.library import LibraryService


def at(c) -> int:
    return c.get("/v1/hub").json()["projections_at"]


def kept_in_git(side, c) -> None:
    """Wait until the hub has kept every project in git (its repository, each code revision's spec)
    and its read models show the whole log: the hub writes nothing more until the next change."""
    def idle() -> bool:
        rows = ok(c.get("/v1/projects"))["projects"]
        return at(c) == side.store.max_position() and all(
            r["repo"] and (r["kind"] != "code" or r["specs"] == r["revision"]) for r in rows if not r["vetoed"])

    until("the hub kept every project in git", idle, 60)


def refused(side, c, code, fn, *args, **kw):
    kept_in_git(side, c)
    before = at(c)
    with pytest.raises(Refusal) as e:
        fn(side.cmds, *args, **kw)
    assert e.value.code == code, e.value.message
    assert at(c) == before and side.store.max_position() == before, "a refusal changed something"
    return e.value


def test_a_code_project_from_brief_to_delivered_asks_the_owner_only_where_flagged(hub):
    with hub.client() as c, AgentSide(hub) as side:
        orch, researcher, planner, critic, mayor = 91, 92, 93, 94, 95
        builder, reviewer = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "builder", "count": 2}))["agents"]]
        s = side._settled
        n = s(pc.open_project(side.cmds, side.ctx(orch), "code", "Release notes site", "Publish the notes",
                              role="orchestrator"))["id"]
        assert ok(c.post(f"/v1/projects/{n}/flag", json={"on": True}))["owner_flag"] is True
        refused(side, c, "needs_research", pc.propose, side.ctx(planner), n, "plan", "t", "spec", role="planner")
        s(pc.research(side.cmds, side.ctx(researcher), n, "generators", "mkdocs or plain HTML", role="researcher"))
        refused(side, c, "needs_spec", pc.propose, side.ctx(planner), n, "plan", "tasks", None, role="planner")
        s(pc.propose(side.cmds, side.ctx(planner), n, "one page", "t: write, t: publish", "spec v1", role="planner"))
        refused(side, c, "own_proposal", pc.critique, side.ctx(planner), n, "fine", False, role="planner")
        assert s(pc.critique(side.cmds, side.ctx(critic), n, "no rollback plan", True, role="reviewer"))["stage"] == "critique"
        e = refused(side, c, "critique_blocks", pc.approve, side.ctx(mayor), n, role="mayor")
        assert "asks for a revision" in e.message
        refused(side, c, "wrong_role", pc.approve, side.ctx(orch), n, role="orchestrator")
        refused(side, c, "plan_not_approved", pc.link_task, side.ctx(orch), n, "write", "written", role="orchestrator")
        s(pc.propose(side.cmds, side.ctx(planner), n, "one page, with rollback", "t: write", "spec v2", role="planner"))
        assert s(pc.critique(side.cmds, side.ctx(critic), n, "good now", False, role="reviewer"))["stage"] == "approval"
        # the hub keeps each revision in the project's repository, committed by its author (the planner)
        specs = until("both revisions in the repository", lambda: ok(c.get(f"/v1/projects/{n}"))["specs"] == 2
                      and ok(c.get(f"/v1/projects/{n}")), 60)
        assert specs["repo"] == n and specs["thread"]
        commits = ok(c.get(f"/v1/git/repos/{n}/commits"))["commits"]
        assert [x["email"] for x in commits[:2]] == [f"agent-{planner}@agents.plaza.invalid"] * 2
        assert "revision 2" in commits[0]["subject"] and commits[-1]["author"] == "AgentPlaza"
        change = "openspec/changes/pj1-release-notes-site"
        got = ok(c.get(f"/v1/git/repos/{n}/files/{change}/specs/release-notes-site/spec.md"))
        assert "spec v2" in got["content"] and got["commit"] == commits[0]["commit"]
        assert ok(c.get(f"/v1/git/repos/{n}"))["repo"]["project"] == n
        asked = s(pc.approve(side.cmds, side.ctx(mayor), n, role="mayor"))
        assert asked["stage"] == "approval" and asked["waits_for_owner"] and asked["asked"]
        pending = ok(c.get("/v1/approvals", params={"status": "pending"}))["approvals"]
        assert [(a["id"], a["kind"]) for a in pending] == [(asked["asked"], "project")]

        r = cli(hub, "projects", "approve", n, "--reason", "within the plan")
        assert r.returncode == 0, r.stderr
        shown = ok(c.get(f"/v1/projects/{n}"))
        assert shown["stage"] == "implementation" and shown["owner_approved"] and shown["revision"] == 2
        assert ok(c.get(f"/v1/approvals/{asked['asked']}"))["status"] == "approved"

        task = s(pc.link_task(side.cmds, side.ctx(orch), n, "Write the notes", "every change listed", 500,
                              role="orchestrator"))["task"]["id"]
        side.claim(task, builder, "builder")
        side.report(task, builder, "wrote them", ["NOTES.md"], "read them")
        side.take_review(task, reviewer, "reviewer")
        side.review(task, reviewer, True, "complete")
        assert ok(c.get(f"/v1/projects/{n}"))["stage"] == "review"
        e = refused(side, c, "needs_deliverable", pc.deliver, side.ctx(reviewer), n, "Release notes", "the page",
                    "d1", role="reviewer")
        assert "Library" in e.message
        lib = LibraryService(types.SimpleNamespace(commands=side.cmds, folders=hub.folders))
        other = s(lib.submit(side.ctx(builder), b"other\n", "OTHER.md", "Other", project="pj7"))
        refused(side, c, "not_this_project", pc.deliver, side.ctx(reviewer), n, "Release notes", "the page", other,
                role="reviewer")
        item = s(lib.submit(side.ctx(builder), b"- every change\n", "NOTES.md", "Release notes", task=task))
        s(pc.deliver(side.cmds, side.ctx(reviewer), n, "Release notes", "the published page", item, role="reviewer"))
        shown = ok(c.get(f"/v1/projects/{n}"))
        assert shown["stage"] == "delivered"
        moves = [(h["detail"]["from"], h["detail"]["to"]) for h in shown["history"] if h["what"] == "move"]
        assert moves == [("brief", "research"), ("research", "proposal"), ("proposal", "critique"),
                         ("critique", "approval"), ("approval", "implementation"), ("implementation", "review"),
                         ("review", "delivered")]
        assert all(h["actor"] for h in shown["history"])
        before = at(c)
        for path, body, status, code in ((f"/v1/projects/{n}/veto", {}, 409, "project_ended"),
                                         (f"/v1/projects/{n}/send-back", {"reason": "x"}, 409, "project_ended"),
                                         ("/v1/projects/pj99", None, 404, "no_project"),
                                         ("/v1/projects/zz/approve", {}, 404, "no_project"),
                                         ("/v1/projects?stage=nowhere", None, 422, "invalid_request")):
            r = c.post(path, json=body) if body is not None else c.get(path)
            assert r.status_code == status and r.json()["error"]["code"] == code, r.text
        assert at(c) == before
        r = cli(hub, "projects", "send-back", n)
        assert r.returncode != 0  # --reason is required
        table = cli(hub, "projects")
        assert table.returncode == 0 and n in table.stdout and "delivered" in table.stdout, table.stdout
        show = cli(hub, "projects", "show", n)
        assert show.returncode == 0 and "deliverable" in show.stdout, show.stdout
        # the project's thread on the board: its opening the post, each move and document a reply by who made it
        board = ok(c.get("/v1/board", params={"project": n}))["posts"]
        assert [p["id"] for p in board] == [shown["thread"]] and board[0]["author"] == f"agent:{orch}"
        thread = ok(c.get(f"/v1/board/{shown['thread']}"))["thread"]
        lines = [r["text"] for r in thread]
        assert sum(" moved from " in x for x in lines) == len(moves) == 7
        assert any(x.startswith("Revision 2 of pj1's plan") for x in lines)
        assert any("spec is in pj1 at openspec/changes/pj1-release-notes-site" in x for x in lines)
        assert any(f"library item {item}" in x for x in lines)
        assert {r["author"] for r in thread} >= {f"agent:{researcher}", f"agent:{planner}", f"agent:{critic}", "owner"}
        exported = cli(hub, "board", "export", "--project", n)
        assert exported.returncode == 0 and "Release notes site" in exported.stdout, exported.stdout
        over = ok(c.get("/v1/overview"))["governance"]
        assert over == {"projects": 1, "delivered": 1, "motions_waiting": 0}


def test_the_council_ties_and_large_budget_moves_come_to_the_owner_and_a_carried_move_moves_credits(hub):
    with hub.client() as c, AgentSide(hub) as side:
        s = side._settled
        (cid,) = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "builder", "count": 1}))["agents"]]
        refused(side, c, "courts_never_sit", cc.propose, side.ctx(40), "priority", "Ship faster", role="judge")
        refused(side, c, "not_a_seat", cc.propose, side.ctx(41), "priority", "Ship faster", role="builder")
        m = s(cc.propose(side.cmds, side.ctx(30), "priority", "Docs first this week", role="finance"))["id"]
        refused(side, c, "not_a_seat", cc.vote, side.ctx(41), m, "yes", "sure", role="builder")
        refused(side, c, "courts_never_sit", cc.vote, side.ctx(42), m, "yes", "sure", role="prosecutor")
        seats = {"finance": 30, "counsel": 31, "incident": 32, "mayor": 33}
        s(cc.vote(side.cmds, side.ctx(30), m, "no", "first thought", role="finance"))
        for seat, vote in (("finance", "yes"), ("counsel", "yes"), ("incident", "no")):
            assert s(cc.vote(side.cmds, side.ctx(seats[seat]), m, vote, "because", role=seat))["status"] == "open"
        r = c.post(f"/v1/council/motions/{m}/decide", json={"decision": "approve"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "motion_not_yours", r.text
        tie = s(cc.vote(side.cmds, side.ctx(33), m, "no", "not now", role="mayor"))
        assert (tie["status"], tie["result"]) == ("waiting", "tie") and tie["votes"]["finance"]["vote"] == "yes"
        r = cli(hub, "council", "decide", m, "approve", "--reason", "Within the Q4 plan")
        assert r.returncode == 0, r.stderr
        shown = ok(c.get(f"/v1/council/motions/{m}"))
        assert shown["status"] == "carried" and shown["owner"] == {"approve": True, "note": "Within the Q4 plan"}
        r = c.post(f"/v1/council/motions/{m}/decide", json={"decision": "reject"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "motion_decided"

        big = s(cc.propose(side.cmds, side.ctx(30), "budget_move", "Fund the builder", role="finance",
                           amount=10_001, to=str(cid)))
        assert big["decider"] == "ratify"
        for seat, voter in seats.items():
            out = s(cc.vote(side.cmds, side.ctx(voter), big["id"], "yes", "needed", role=seat))
        assert out["status"] == "waiting" and out["approval"]
        r = cli(hub, "approvals", "approve", out["approval"], "--reason", "yes")
        assert r.returncode == 0, r.stderr
        moved = ok(c.get(f"/v1/council/motions/{big['id']}"))
        assert moved["status"] == "carried" and moved["moved"]["entry"]
        small = s(cc.propose(side.cmds, side.ctx(30), "budget_move", "A little more", role="finance", amount=500,
                             to=str(cid)))
        for seat, voter in seats.items():
            out = s(cc.vote(side.cmds, side.ctx(voter), small["id"], "yes", "small", role=seat))
        assert out["status"] == "carried" and out["decider"] == "council" and out["moved"]["entry"]
        wallets = {w["cid"]: w for w in ok(c.get("/v1/treasury/wallets"))["wallets"]}
        assert wallets[str(cid)]["balance"] == 10_501
        table = cli(hub, "council", "list")
        assert table.returncode == 0 and table.stdout.count("carried") == 3, table.stdout
        assert cli(hub, "council", "show", m).returncode == 0


def test_a_case_filed_defended_and_ruled_a_violation_is_on_the_agents_conduct(hub):
    with hub.client() as c, AgentSide(hub) as side:
        s = side._settled
        (cid,) = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "builder", "count": 1}))["agents"]]
        inc = s(cc.open_incident(side.cmds, side.ctx(50), "Leaked a path", "it posted a home path", str(cid),
                                 role="incident"))["id"]
        refused(side, c, "wrong_role", cc.open_incident, side.ctx(51), "x", "y", role="judge")
        case = s(cc.file_case(side.cmds, side.ctx(52), str(cid), "S-002", "low", "posted a private path", inc,
                              role="prosecutor"))["id"]
        s(cc.defend(side.cmds, side.ctx(53), case, "it was a test path", role="counsel"))
        refused(side, c, "own_case", cc.rule, side.ctx(52), case, "violation", "guilty", role="judge")
        ruled = s(cc.rule(side.cmds, side.ctx(54), case, "violation", "the path was private", role="judge"))
        assert ruled["sanction"]["law"] == "S-002" and ruled["sanction"]["count"] == 1
        refused(side, c, "case_ruled", cc.rule, side.ctx(54), case, "dismissed", "again", role="judge")
        courts = ok(c.get("/v1/courts"))
        assert [(x["id"], x["verdict"], x["defences"]) for x in courts["cases"]] == [(case, "violation", 1)]
        assert [x["id"] for x in courts["incidents"]] == [inc]
        one = ok(c.get(f"/v1/courts/cases/{case}"))
        assert [d["text"] for d in one["defended"]] == ["it was a test path"] and one["judge"] == "agent:54"
        assert one["incident_of"]["title"] == "Leaked a path"
        assert [x["id"] for x in ok(c.get(f"/v1/courts/incidents/{inc}"))["cases"]] == [case]
        for path, code in (("/v1/courts/cases/c99", "no_case"), ("/v1/courts/cases/zz", "no_case"),
                           ("/v1/courts/incidents/i9", "no_incident")):
            r = c.get(path)
            assert r.status_code == 404 and r.json()["error"]["code"] == code, r.text
        listed = cli(hub, "courts")
        assert listed.returncode == 0 and case in listed.stdout and "Leaked a path" in listed.stdout, listed.stdout
        shown = cli(hub, "courts", "show", case)
        assert shown.returncode == 0 and "it was a test path" in shown.stdout and "violation" in shown.stdout
        assert "posted a private path" in cli(hub, "courts", "show", inc).stdout
        bad = cli(hub, "courts", "show", "x1")
        assert bad.returncode == 1 and "no case or incident" in bad.stderr
        conduct = ok(c.get(f"/v1/conduct/{cid}"))
        assert "S-002" in str(conduct)
