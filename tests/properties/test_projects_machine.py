"""Random moves on projects by random roles (and the owner): research, proposals and revisions,
critiques that pass or ask for a revision, the Mayor's and the owner's approvals, vetoes, owner
flags, send-backs, tasks linked and passed, Library items handed in (for the project, for a linked
task, for another project, deleted) and deliverables, hub restarts. After every step, read from the
log alone: no project ever skips a stage or moves back except as ``BACK_MOVES`` allows; each stage
reached holds its rule; no task is linked before the plan is approved; a delivered project's
deliverable is a Library item of that project or of one of its linked tasks, not deleted when it
was named; the project's board thread holds one post or reply for each of its moves; a refusal
wrote nothing; the read model equals a fold from event 1."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import library as lc  # noqa: E402
from agentplaza.commands import projects as pc  # noqa: E402
from agentplaza.commands import tasks as tc  # noqa: E402
from agentplaza.domain import projects as d  # noqa: E402
from agentplaza.domain.base import Refusal  # noqa: E402
from agentplaza.domain.projects import Project, project_id  # noqa: E402

ROLES = ("orchestrator", "mayor", "researcher", "planner", "architect", "reviewer", "builder", "judge", "finance")


def role(*likely: str):
    """Any role, the step's own roles more often (so that projects get far and wrong roles are still tried)."""
    return st.one_of(st.sampled_from(likely), st.sampled_from(ROLES))


agent = st.integers(min_value=1, max_value=5)
which = st.integers(min_value=0, max_value=3)


class ProjectsMachine(RuleBasedStateMachine):
    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-projects."))
        self.clock = Clock()
        self.p = Plaza(self.dir, None, self.clock)
        self.projects: list[str] = []
        self.items: list[str] = []
        self.p.wallet("11"), self.p.wallet("12")  # the worker and the reviewer of the linked tasks

    def teardown(self):
        if hasattr(self, "p"):
            self.p.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def attempt(self, fn, *args, **kw):
        before = self.p.store.max_position()
        try:
            return fn(self.p.cmds, *args, **kw)
        except Refusal:
            assert self.p.store.max_position() == before, "a refusal changed something"
            return None

    def ctx(self, who: int | None, reason: str | None = None):
        return self.p.ctx("owner" if who is None else f"agent:{who}", reason)

    def pick(self, i: int) -> str:
        return self.projects[i % len(self.projects)] if self.projects else "pj1"

    @rule(kind=st.sampled_from(d.KINDS), r=role("orchestrator"), who=agent, flag=st.booleans())
    def open_project(self, kind, r, who, flag):
        out = self.attempt(pc.open_project, self.ctx(who), kind, "A goal", "The owner's goal", role=r, owner_flag=flag)
        if out is not None:
            self.projects.append(out.value["id"])

    @rule(i=which, r=role("researcher", "architect"), who=agent)
    def research(self, i, r, who):
        self.attempt(pc.research, self.ctx(who), self.pick(i), "approach", "found this", role=r)

    @rule(i=which, r=role("planner", "architect", "orchestrator"), who=agent, spec=st.booleans())
    def propose(self, i, r, who, spec):
        self.attempt(pc.propose, self.ctx(who), self.pick(i), "the plan", "t: do it", "the spec" if spec else None, role=r)

    @rule(i=which, r=role("reviewer", "builder", "tester"), who=agent, revise=st.booleans())
    def critique(self, i, r, who, revise):
        self.attempt(pc.critique, self.ctx(who), self.pick(i), "my view", revise, role=r)

    def keep_in_git(self, n: str) -> None:
        """What the hub's ``runtime.projectrepo`` does (with no git here): the repository recorded, each
        code revision's spec recorded as committed."""
        p = self.p.store.get(project_id(n))
        hub = self.p.ctx("hub")
        if p.repo is None:
            self.attempt(pc.repo_opened, hub, n, n)
        for revision in self.p.store.get(project_id(n)).specs_to_commit():
            self.attempt(pc.spec_committed, hub, n, revision, f"openspec/changes/{n}-a-goal", f"{revision:040x}")

    @rule(i=which)
    def the_hub_keeps_the_plan_in_git(self, i):
        if self.projects:
            self.keep_in_git(self.pick(i))

    @rule(i=which, r=role("mayor"), who=agent)
    def mayor_approves(self, i, r, who):
        self.attempt(pc.approve, self.ctx(who), self.pick(i), role=r)

    @rule(i=which)
    def owner_approves(self, i):
        self.attempt(pc.approve, self.ctx(None), self.pick(i))

    @rule(i=which, reason=st.sampled_from([None, "redo the costs"]))
    def owner_sends_back(self, i, reason):
        self.attempt(pc.send_back, self.ctx(None, reason), self.pick(i))

    @rule(i=which, on=st.booleans())
    def owner_flags(self, i, on):
        self.attempt(pc.flag, self.ctx(None), self.pick(i), on)

    @rule(i=which, veto=st.integers(min_value=0, max_value=4))
    def owner_vetoes(self, i, veto):
        if veto == 0:  # rarely, so that projects get far
            self.attempt(pc.veto, self.ctx(None), self.pick(i))

    @rule(i=which, r=role("orchestrator"), who=agent)
    def link_task(self, i, r, who):
        self.attempt(pc.link_task, self.ctx(who), self.pick(i), "a step", "it works", 200, role=r)

    @rule(i=which)
    def a_linked_task_passes(self, i):
        if not self.projects:
            return
        p = self.p.store.get(project_id(self.pick(i)))
        open_ = [t for t in p.tasks if t not in p.done]
        if not open_:
            return
        number, worker, reviewer = open_[0], "11", "12"
        tc.claim(self.p.cmds, self.ctx(11), number, worker, "builder")
        tc.report_done(self.p.cmds, self.ctx(11), number, worker, "did it", [], "ran it")
        tc.take_review(self.p.cmds, self.ctx(12), number, reviewer, "reviewer")
        tc.review(self.p.cmds, self.ctx(12), number, reviewer, True, "good")

    def hand_in(self, project: str | None, task: str | None) -> str:
        number = lc.submit(self.p.cmds, self.ctx(4), title="The result", description="", filename="result.md",
                           media_type="text/markdown", size=10, sha256="0" * 64, storage="local", key="k",
                           task=task, project=project).value
        self.items.append(number)
        return number

    @rule(i=which, whose=st.sampled_from(["project", "task", "other", "none"]), delete=st.booleans())
    def an_item_handed_in(self, i, whose, delete):
        p = self.p.store.get(project_id(self.pick(i))) if self.projects else None
        project = p.number if p is not None and whose == "project" else "pj99" if whose == "other" else None
        task = p.tasks[0] if p is not None and p.tasks and whose == "task" else None
        number = self.hand_in(project, task)
        if delete:
            lc.delete(self.p.cmds, self.ctx(None), number)

    @rule(i=which, r=role("reviewer", "builder"), who=agent, item=st.integers(min_value=0, max_value=5))
    def deliver(self, i, r, who, item):
        named = self.items[item % len(self.items)] if self.items else "d1"
        self.attempt(pc.deliver, self.ctx(who), self.pick(i), "The result", "what was built", named, role=r)

    @rule(i=which, times=st.integers(min_value=1, max_value=4))
    def the_right_next_moves(self, i, times):
        """The moves the stages wait for, by the right roles (so that projects get far between the random ones)."""
        for _ in range(times):
            self.the_right_next_move(i)

    def the_right_next_move(self, i):
        if not self.projects:
            return
        n = self.pick(i)
        p = self.p.store.get(project_id(n))
        author = int(p.author.split(":")[1]) if p.author else 3
        moves = {
            d.BRIEF: lambda: self.attempt(pc.research, self.ctx(2), n, "approach", "found", role="researcher"),
            d.RESEARCH: lambda: self.attempt(pc.propose, self.ctx(3), n, "plan", "t: it", "spec", role="planner"),
            d.PROPOSAL: lambda: self.attempt(pc.critique, self.ctx(author % 5 + 1), n, "ok", False, role="reviewer"),
            d.CRITIQUE: lambda: self.attempt(pc.propose, self.ctx(3), n, "plan v2", "t: it", "spec", role="planner"),
            d.APPROVAL: lambda: (self.keep_in_git(n), self.attempt(pc.approve, self.ctx(5), n, role="mayor")),
            d.IMPLEMENTATION: lambda: (self.a_linked_task_passes(i) if set(p.tasks) - set(p.done) else
                                       self.attempt(pc.link_task, self.ctx(1), n, "a step", "works", 200,
                                                    role="orchestrator")),
            d.REVIEW: lambda: self.attempt(pc.deliver, self.ctx(4), n, "Result", "built", self.hand_in(n, None),
                                           role="reviewer"),
        }
        if p.stage in moves:
            moves[p.stage]()
            if p.stage == d.CRITIQUE:  # the revision answers the blocking critique; now a clean one
                self.attempt(pc.critique, self.ctx(4 if author != 4 else 2), n, "better", False, role="reviewer")

    @rule()
    def restart(self):
        self.p.close()
        self.p = Plaza(self.dir, None, self.clock)

    @invariant()
    def note_how_far(self):
        if hasattr(self, "p") and self.projects:
            far = max(d.STAGES.index(self.p.store.get(project_id(n)).stage) for n in self.projects)
            event(f"furthest stage: {d.STAGES[far]}")

    @invariant()
    def no_stage_is_skipped_and_each_stage_reached_holds_its_rule(self):
        if not hasattr(self, "p"):
            return
        stage: dict[str, str] = {}
        deleted: set[str] = set()
        moves: dict[str, int] = {}
        thread_of: dict[str, str] = {}  # a thread's post -> its project's aggregate
        told: dict[str, int] = {}
        for e in self.p.store.read():
            key = e.originator_id
            if e.kind == "Item.Deleted":
                deleted.add(e.data["number"])
            elif e.kind == "Board.Replied" and " moved from " in e.data["text"]:
                owner = thread_of[e.data["post"]]
                told[owner] = told.get(owner, 0) + 1
            if not e.kind.startswith("Project."):
                continue
            if e.kind == "Project.DeliverableAttached":
                assert e.data["item"] not in deleted, "a deleted library item was delivered"
            elif e.kind == "Project.Threaded":
                thread_of[e.data["post"]] = key
            if e.kind == "Project.Moved":
                moves[key] = moves.get(key, 0) + 1
            if e.kind == "Project.Created":
                stage[key] = d.BRIEF
            elif e.kind == "Project.Moved":
                here, there = d.STAGES.index(stage[key]), d.STAGES.index(e.data["stage"])
                assert e.data["source"] == stage[key]
                assert there == here + 1 or (stage[key], e.data["stage"]) in d.BACK_MOVES, (stage[key], e.data)
                assert e.actor and e.data["why"], "a move says who and why"
                stage[key] = e.data["stage"]
            elif e.kind == "Project.TaskLinked":
                assert stage[key] == d.IMPLEMENTATION, "a task was linked before the plan was approved"
        assert told == moves, "each move of a project is a reply on its board thread"
        for number in self.projects:
            p: Project = self.p.store.get(project_id(number))
            at = d.STAGES.index(p.stage)
            assert stage[str(p.id).replace("-", "")] == p.stage or stage.get(str(p.id)) == p.stage
            if at >= d.STAGES.index(d.PROPOSAL):
                assert p.research and p.revisions
                assert p.kind == "other" or all(r["spec"] for r in p.revisions)
            if at >= d.STAGES.index(d.APPROVAL):
                assert p.critique_problem() is None, p.critique_problem()
            if at >= d.STAGES.index(d.IMPLEMENTATION):
                assert p.mayor_approved is not None or p.owner_approved
                if p.kind == "code" and p.mayor_approved is not None:
                    assert p.mayor_approved in p.specs, "the Mayor approved a spec not in the repository"
                assert not p.owner_flag or p.owner_approved, "a flagged project moved on without the owner"
            if at >= d.STAGES.index(d.REVIEW):
                assert p.tasks and set(p.tasks) <= set(p.done)
            if p.stage == d.DELIVERED:
                assert p.deliverable is not None
                item = lc.load_any(self.p.cmds, p.deliverable["item"])
                assert item.project == p.number or item.task in p.tasks, (item.project, item.task)

    @invariant()
    def the_read_model_equals_a_fold_from_event_one(self):
        if not hasattr(self, "p"):
            return
        self.p.rm.catch_up()
        assert self.p.rm.live(["governance"]) == self.p.rm.replay(names=["governance"])


TestProjects = ProjectsMachine.TestCase
TestProjects.settings = settings(max_examples=30, stateful_step_count=80, deadline=None,
                                 suppress_health_check=[HealthCheck.too_slow])
