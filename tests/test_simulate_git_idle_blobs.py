"""The simulator's last areas (issue 26): agents push to the plaza's git server through its receive
path, open pull requests, a reviewer reviews and the owner merges; a code project's spec is committed
by the hub's pass, so the Mayor approves it and it reaches Delivered; idle agents sleep by the
policy's rule and work wakes them; the Library's and the file store's blobs torn on disk are never
served as good. Each from a fixed seed; each invariant shown at work by an injected bug."""

from __future__ import annotations

import random

import pytest

from agentplaza.sim import faults
from agentplaza.sim.invariants import INVARIANTS, Broken, Look
from agentplaza.sim.run import Options, execute, report
from agentplaza.sim.workload import Step, plan

AREAS = {
    "git": ("create_repo", "git_push", "open_pr", "review_pr", "merge_pr", "set_mode", "decide_approval",
            "change_law"),
    "delivery": ("open_project", "advance_project", "claim", "report", "take_review", "review", "decide_approval",
                 "project_repos"),
    "idle": ("create_task", "guest_connects", "time_passes", "set_idle_policy", "claim", "report", "stop_or_resume",
             "owner_tells"),
}


def _area_run(area: str, seed: int, steps: int):
    r = execute(Options(seed, steps=steps), plan(random.Random(f"{seed}:plan"), steps, {}, AREAS[area]))
    assert r.failure is None, report(r)
    return r, [line.split("->", 1)[1] for line in r.lines]


def _world():
    from agentplaza.sim.workload import setup
    from agentplaza.sim.world import World

    w = World(4)
    return w, setup(w, 9)


def _check_all(w, m) -> None:
    for f in INVARIANTS.values():
        f(Look(w, m))


# -- git ---------------------------------------------------------------------------------------------

def test_agents_push_branches_open_pull_requests_and_the_owner_merges_through_the_real_server():
    r, said = _area_run("git", 1, 60)
    assert sum("pushed b" in x and "accepted" in x for x in said) >= 3, r.lines
    assert any("opened pr" in x for x in said) and sum("the owner merged pr" in x for x in said) >= 2, r.lines
    assert any("owner pushed main" in x and "accepted" in x for x in said), r.lines
    assert any("rejected (plaza_git refused" in x for x in said), r.lines  # the laws, on the push itself
    assert any("refused: pull_request_closed" in x for x in said), r.lines  # a pull request merges once


def test_a_push_whose_record_fails_moves_no_ref():
    """The bug the simulator found: git had moved the ref when the log refused the push's record (a
    failed write), and the ref stayed moved, known to no event. ``githttp.serve`` now puts it back."""
    from agentplaza.sim.workload import create_repo, git_push

    w, m = _world()
    try:
        create_repo(w, m, (0, 0, 0, 0))
        faults.write_fails(w, m, (0, 0, 0, 0))
        with pytest.raises(faults.WriteFailed):
            git_push(w, m, (0, 0, 1, 1))  # the owner's commit on main (the third number 1 mod 7)
        _check_all(w, m)
        assert "owner pushed main of repo-0: accepted" in git_push(w, m, (0, 0, 1, 1))
        _check_all(w, m)
    finally:
        w.close()


def test_a_ref_moved_without_its_record_breaks_the_invariant(monkeypatch):
    from agentplaza.runtime import githttp
    from agentplaza.sim.workload import create_repo, git_push

    monkeypatch.setattr(githttp, "undo", lambda store, repo, moved: None)  # the bug, put back
    w, m = _world()
    try:
        create_repo(w, m, (0, 0, 0, 0))
        faults.write_fails(w, m, (0, 0, 0, 0))
        with pytest.raises(faults.WriteFailed):
            git_push(w, m, (0, 0, 1, 1))
        with pytest.raises(Broken) as e:
            INVARIANTS["refs_move_only_by_recorded_events"](Look(w, m))
        assert "refs/heads/main on disk" in e.value.message
    finally:
        w.close()


def test_a_pull_request_merged_twice_breaks_the_invariant(monkeypatch):
    """The injected bug: a merged or closed pull request still counts as open (reviewed, closed or
    merged again)."""
    from agentplaza.domain.git import PullRequest

    monkeypatch.setattr(PullRequest, "_open", lambda self: None)
    r = execute(Options(1, steps=60), plan(random.Random("1:plan"), 60, {}, AREAS["git"]))
    assert r.failure is not None and r.failure.invariant == "a_pull_request_merges_once", report(r)


# -- a code project approved and delivered -----------------------------------------------------------

#: A code project from its brief to Delivered: research, a plan with its spec, the hub's pass that
#: makes the repository and commits the spec, a critique, the Mayor's approval, a task linked, claimed,
#: reported, reviewed and passed, the deliverable handed in to the Library and attached.
DELIVERY = [("open_project", 0, 1, 0, 0), ("advance_project", 0, 1, 0, 3), ("advance_project", 0, 1, 1, 3),
            ("project_repos", 0, 0, 0, 0), ("advance_project", 0, 1, 1, 3), ("advance_project", 0, 1, 2, 3),
            ("advance_project", 0, 1, 0, 3), ("claim", 1, 0, 0, 0), ("report", 1, 0, 1, 0),
            ("take_review", 1, 0, 0, 0), ("review", 1, 0, 1, 1), ("advance_project", 0, 1, 1, 3),
            ("advance_project", 0, 1, 1, 3)]


def _delivery(without: set[int] = frozenset()):
    steps = [Step(n, tuple(a)) for i, (n, *a) in enumerate(DELIVERY) if i not in without]
    r = execute(Options(7), steps)
    assert r.failure is None, report(r)
    return r, [line.split("->", 1)[1] for line in r.lines]


def test_a_code_project_is_approved_once_its_spec_is_committed_and_reaches_delivered():
    r, said = _delivery()
    assert "opened pj1" in said[0] and "made 2 steps" in said[3]  # its repository, then the spec's commit
    assert "8 approved pj1" in said[5] and said[-1].strip() == "10 delivered pj1 (d1)", r.lines


def test_without_the_hubs_pass_the_mayor_is_refused_spec_not_committed():
    r, said = _delivery(without={3})
    assert "refused: spec_not_committed" in said[4], r.lines


def test_a_fixed_seed_of_the_projects_area_reaches_delivered():
    r, said = _area_run("delivery", 3, 93)
    assert any("delivered pj" in x for x in said), r.lines


# -- idle sleep ------------------------------------------------------------------------------------

def test_idle_agents_sleep_by_the_policys_rule_and_work_wakes_them():
    r, said = _area_run("idle", 3, 80)
    passes = [x for x in said if "asleep (" in x]
    assert any("(0 put to sleep" not in x for x in passes), r.lines
    assert any(" 0 woken" not in x for x in passes), r.lines


def test_an_agent_put_to_sleep_before_its_idle_time_breaks_the_invariant(monkeypatch):
    """The injected bug: the hub sleeps every idle agent at once, whatever the policy's minutes."""
    from agentplaza.commands import agents as ac
    from agentplaza.projections.agents import agents_table
    from agentplaza.runtime.fleet import AgentRuntime

    def eager(self, rows=None):
        for row in self.hub.read_models.rows(agents_table):
            if row["status"] == "idle" and row["run"] == "running" and self.awake_because(row) is None:
                self._safely(ac.sleep, self.cmds.context("hub", "eager"), row["cid"])
        return []

    monkeypatch.setattr(AgentRuntime, "idle_sleep", eager)
    r = execute(Options(3), [Step("guest_connects", (0, 0, 0, 0)), Step("time_passes", (0, 1, 0, 0))])
    assert r.failure is not None and r.failure.invariant == "idle_sleep_by_the_rule", report(r)
    assert "idle 0:01:00 only" in r.failure.message


def test_an_agent_put_to_sleep_with_work_queued_breaks_the_invariant(monkeypatch):
    """The injected bug: nothing keeps an idle agent awake (``awake_because`` always None, and the
    agent's own guard on its queue gone), so the hub sleeps a connected agent whose queue holds the
    owner's work (its harness has not asked for it)."""
    from agentplaza.domain.agents import Agent
    from agentplaza.runtime.fleet import AgentRuntime
    from agentplaza.sim import guests
    from agentplaza.sim.workload import owner_tells, set_idle_policy, time_passes

    def run() -> None:
        w, m = _world()
        try:
            cid = m.agents[0][0]
            w.guests[cid] = g = guests.Guest(w.runtime, cid)  # connected; it does not work its queue
            g.ask({"op": "hello"})
            set_idle_policy(w, m, (1, 1, 0, 0))  # 5 minutes, nobody never sleeps
            owner_tells(w, m, (0, 0, 0, 0))
            time_passes(w, m, (1, 0, 0, 0))  # seven hours
            INVARIANTS["idle_sleep_by_the_rule"](Look(w, m))
        finally:
            w.close()

    run()
    monkeypatch.setattr(AgentRuntime, "awake_because", lambda self, r: None)
    monkeypatch.setattr(Agent, "sleep", lambda self, ctx: self.record(Agent.Slept, ctx))
    with pytest.raises(Broken) as e:
        run()
    assert "work was queued for it" in e.value.message


def test_a_node_never_told_to_sleep_an_agent_the_plaza_put_to_sleep_breaks_the_invariant(monkeypatch):
    """The injected bug: the runtime records the sleep but never asks the node (its VM keeps running)."""
    from agentplaza.runtime.fleet import AgentRuntime

    monkeypatch.setattr(AgentRuntime, "_sleep_wake", lambda self, cid, how: None)
    r = execute(Options(3, steps=80), plan(random.Random("3:plan"), 80, {}, AREAS["idle"]))
    assert r.failure is not None and r.failure.invariant == "idle_sleep_by_the_rule", report(r)
    assert "the node runs" in r.failure.message


def test_an_agent_asleep_when_its_node_went_is_awake_once_its_harness_connects_again():
    """Seed 29's history, found by the longer run: an agent put to sleep, its node lost and back (its VM
    booted afresh, its harness says hello: ``Agent.Connected`` makes it idle), then work for it. The
    invariant took it for asleep still; a harness that connects is awake."""
    steps = [Step("guest_connects", (0, 0, 0, 0)), Step("time_passes", (1, 0, 0, 0)), Step("time_passes", (1, 0, 0, 0)),
             Step("fault:node_lost", (0, 0, 0, 0)), Step("time_passes", (1, 0, 0, 0))]
    r = execute(Options(29, steps=200), steps)
    assert r.failure is None, report(r)
    assert "(1 put to sleep" in r.lines[2] and "1 reconnected" in r.lines[3], r.lines


# -- torn blobs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", [3, 4])
def test_a_blob_torn_on_disk_is_never_served_as_good(which):
    from agentplaza.domain.base import Refusal
    from agentplaza.sim import blobs
    from agentplaza.sim.workload import share_file, submit_item

    w, m = _world()
    try:
        submit_item(w, m, (0, 1, 2, 3))
        share_file(w, m, (1, 1, 5, 3))
        for n in (0, 1):
            assert "crashed writing" in faults.torn_file(w, m, (which, n, 0, 0))
        _check_all(w, m)
        for kind, number in (("item", "d1"), ("file", "f1")):
            if which == 3:  # cut short: refused
                with pytest.raises(Refusal) as e:
                    blobs.served(w, kind, number)
                assert e.value.code == "item_corrupt"
            else:  # a half-written .part beside it: the blob itself is whole
                blobs.served(w, kind, number)
    finally:
        w.close()


def test_a_torn_blob_served_breaks_the_invariant(monkeypatch):
    """The injected bug: the Library's download forgets the digest."""
    from agentplaza.commands import library as lc
    from agentplaza.runtime.library import LibraryService
    from agentplaza.sim.workload import submit_item

    monkeypatch.setattr(LibraryService, "download",
                        lambda self, number: (i := lc.load(self.cmds, number), self.store.get(i.key)))
    w, m = _world()
    try:
        submit_item(w, m, (0, 1, 2, 3))
        faults.torn_file(w, m, (3, 0, 0, 0))
        with pytest.raises(Broken) as e:
            INVARIANTS["a_torn_blob_is_never_served"](Look(w, m))
        assert "not the ones its digest names" in e.value.message
    finally:
        w.close()


def test_a_working_harness_reconnects_working_after_a_crash_and_does_the_work_it_is_given():
    """After the hub dies, a harness that worked its queue reconnects and works it again: the work the
    owner gives it afterwards is done when time passes (and every invariant holds)."""
    from agentplaza.sim.workload import guest_connects, owner_tells, time_passes

    w, m = _world()
    try:
        said = guest_connects(w, m, (0, 0, 0, 0))
        cid = next(iter(w.guests))
        assert f"agent {cid}'s guest connected" in said and w.guests[cid].works
        w.crash()
        assert w.guests[cid].works and not w.guests[cid].ended
        before = w.store.max_position()
        assert owner_tells(w, m, ([c for c, _ in m.agents].index(cid), 0, 0, 0)) == f"the owner gave {cid} work"
        time_passes(w, m, (0, 0, 0, 0))
        told = [e.data["item"] for e in w.store.read(after=before) if e.kind == "Agent.Told"]
        finished = [e.data["item"] for e in w.store.read(after=before) if e.kind == "Agent.WorkFinished"]
        assert len(told) == 1 and finished == told
        _check_all(w, m)
    finally:
        w.close()


def test_the_docs_name_every_action_fault_and_invariant():
    from pathlib import Path

    from agentplaza.sim.faults import FAULTS
    from agentplaza.sim.invariants import STEP_INVARIANTS
    from agentplaza.sim.workload import ACTIONS

    text = (Path(__file__).parent.parent / "docs" / "simulate.md").read_text()
    missing = [n for n in (*ACTIONS, *FAULTS, *INVARIANTS, *STEP_INVARIANTS) if f"`{n}`" not in text]
    assert missing == []


def test_a_torn_audit_line_is_the_last_thing_the_dying_hub_wrote():
    """Seed 39's history, found by the longer run: a secret used (its use waits for its minute), then
    the hub dies inside an audit append. The simulator tore the line before the old vault's close wrote
    the pending uses after it, joining them to the torn half (which no crash does); the tear now comes
    last (``World.crash(dying)``), and the audit log's open cuts it back."""
    steps = [Step("set_secret", (1, 0, 0, 0)), Step("use_secret", (1, 0, 0, 0)), Step("fault:torn_file", (0, 0, 0, 0))]
    r = execute(Options(39, steps=200), steps)
    assert r.failure is None, report(r)


@pytest.mark.parametrize("variant", [1, 4])
def test_a_hub_that_dies_between_git_and_the_record_starts_with_the_refs_the_log_has(variant):
    """``crash_before_git_record``: the owner's push to main (1 mod 7) or an agent's to its own branch
    (4) is received by git and the hub dies before the record; the restart sets the ref back
    (``runtime.gitrepair``) and every invariant holds; the same push then goes through."""
    from agentplaza.sim.run import _one_step
    from agentplaza.sim.workload import create_repo

    w, m = _world()
    try:
        create_repo(w, m, (0, 0, 0, 0))
        before = w.store.max_position()
        assert "die before" in faults.crash_before_git_record(w, m, (0, 0, 0, 0))
        text = _one_step(w, m, Step("git_push", (0, 0, variant, 1)))
        assert "the hub died inside git_push" in text and w.crashes == 1, text
        assert not [e for e in w.store.read(after=before) if e.kind == "Repo.Pushed"]
        w.rm.catch_up()
        _check_all(w, m)
        assert "accepted" in _one_step(w, m, Step("git_push", (0, 0, variant, 1)))
        _check_all(w, m)
    finally:
        w.close()
