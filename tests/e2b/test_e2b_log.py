"""The E2B sandboxes, snapshots and templates are the log's: each change an event made by a command, the
read model a fold of them that a rebuild from event 1 gives back the same, refusals that change nothing,
CIDs never given twice, the sandbox's transcript under its CID, and no secret in any event."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from support.storeplaza import open_plaza as open_store_plaza

from agentplaza.commands import e2b as cmd
from agentplaza.commands import plaza as plaza_commands
from agentplaza.domain.agents import transcript_id
from agentplaza.domain.base import Refusal
from agentplaza.domain.e2b import FIRST_SANDBOX_CID, sandbox_agg_id
from agentplaza.projections import e2b as q
from agentplaza.projections.agents import entries

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def open_plaza(folders, database_url):
    return open_store_plaza(folders, database_url, T0)


@pytest.fixture
def plaza(folders, database_url):
    store, rm, cmds = open_plaza(folders, database_url)
    yield store, rm, cmds
    store.close()
    rm.engine.dispose()


def new_sandbox(cmds, sid, **kw) -> int:
    args = dict(sandbox_id=sid, template_id="base", alias="base", client_id="k1", metadata={"suite": "a"},
                timeout_s=300, auto_pause=False, network={"allowOut": [], "denyOut": ["0.0.0.0/0"]}, source="")
    args.update(kw)
    return cmd.create(cmds, cmds.context("token:k1"), **args).value


def test_a_sandboxs_life_is_in_the_log_and_its_read_model(plaza):
    store, rm, cmds = plaza
    ctx = cmds.context
    a = new_sandbox(cmds, "ia")
    b = new_sandbox(cmds, "ib", metadata={"suite": "b"})
    assert (a, b) == (FIRST_SANDBOX_CID, FIRST_SANDBOX_CID + 1)  # one CID each, in order
    rm.catch_up()
    assert q.sandbox_rows(rm) == []  # starting: not listed yet
    cmd.started(cmds, ctx("hub"), "ia", 1.5)
    cmd.started(cmds, ctx("hub"), "ib", 1.5)
    cmd.set_timeout(cmds, ctx("token:k1"), "ia", 1200)
    cmd.paused(cmds, ctx("token:k1"), "ia")
    with pytest.raises(Refusal) as again:
        cmd.paused(cmds, ctx("token:k1"), "ia")
    assert again.value.code == "e2b_sandbox_paused"
    cmd.resumed(cmds, ctx("token:k1"), "ia", None)
    cmd.set_network(cmds, ctx("token:k1"), "ia", {"allowOut": ["1.0.0.1"], "denyOut": []})
    cmd.ended(cmds, ctx("owner"), "ib", "killed")
    with pytest.raises(Refusal) as gone:
        cmd.paused(cmds, ctx("owner"), "ib")
    assert gone.value.code == "e2b_sandbox_not_found"
    rm.catch_up()
    listed = q.sandbox_rows(rm)
    assert [r["sandbox_id"] for r in listed] == ["ia"]
    row = listed[0]
    assert row["state"] == "running" and row["cid"] == a and row["timeout_s"] == 1200
    assert (row["allow_out"], row["deny_out"]) == (["1.0.0.1"], [])
    assert q.sandbox_row(rm, "ib")["ended_reason"] == "killed"
    assert q.sandbox_rows(rm, metadata={"suite": "b"}) == []
    assert q.sandbox_of_cid(rm, a)["sandbox_id"] == "ia" and q.sandbox_of_cid(rm, b) is None
    # the sandbox's transcript, under its CID
    texts = [r["text"] for r in entries(store, transcript_id(sandbox_agg_id("ia")), limit=10_000)]
    assert texts[0] == "sandbox ia: created from base" and texts[-1].startswith("sandbox ia: network")
    assert "sandbox ia: paused" in texts and "sandbox ia: resumed" in texts


def test_a_cold_pause_is_in_the_log_and_a_resume_clears_it(plaza):
    """autoPauseMemory false is kept with the sandbox; a pause without memory reads as cold until resumed;
    an old log's events (no such fields) read as pauses with memory."""
    store, rm, cmds = plaza
    ctx = cmds.context
    new_sandbox(cmds, "ic", auto_pause=True, auto_pause_memory=False)
    new_sandbox(cmds, "iw", auto_pause=True)
    for sid in ("ic", "iw"):
        cmd.started(cmds, ctx("hub"), sid, 1.0)
    cmd.paused(cmds, ctx("token:k1"), "ic", memory=False)
    cmd.paused(cmds, ctx("token:k1"), "iw")
    rm.catch_up()
    rows = {r["sandbox_id"]: r for r in q.sandbox_rows(rm)}
    assert (rows["ic"]["auto_pause_memory"], rows["ic"]["cold"]) == (False, True)
    assert (rows["iw"]["auto_pause_memory"], rows["iw"]["cold"]) == (True, False)
    cmd.resumed(cmds, ctx("token:k1"), "ic", None)
    rm.catch_up()
    assert q.sandbox_row(rm, "ic")["cold"] is False
    texts = [r["text"] for r in entries(store, transcript_id(sandbox_agg_id("ic")), limit=10_000)]
    assert "sandbox ic: paused (disk only: a resume boots it cold)" in texts


def test_creates_are_refused_while_the_plaza_is_held_and_nothing_is_written(plaza):
    store, rm, cmds = plaza
    plaza_commands.stop_all(cmds, cmds.context("owner", "e2b"))
    before = store.max_position()
    with pytest.raises(Refusal) as held:
        new_sandbox(cmds, "ix")
    assert held.value.code == "plaza_held" and store.max_position() == before
    with pytest.raises(Refusal) as bad:
        plaza_commands.resume(cmds, cmds.context("owner"))
        new_sandbox(cmds, "iy", timeout_s=0)
    assert bad.value.code == "invalid_request"


def test_templates_builds_tags_cache_and_clean_up(plaza):
    store, rm, cmds = plaza
    ctx = cmds.context
    tid = cmd.request_build(cmds, ctx("token:k1"), "web", "tweb", "b1", ["default"]).value
    assert tid == "tweb"
    cid, drop = cmd.start_build(cmds, ctx("hub"), "web", "b1", "plan-1", False, [{"message": "Build cached"}]).value
    assert drop == [] and cid >= FIRST_SANDBOX_CID
    cmd.build_logged(cmds, ctx("hub"), "web", "b1", [{"message": f"line {i}"} for i in range(450)])
    assert cmd.build_ready(cmds, ctx("hub"), "web", "b1", "cp1", "/app").value == []
    # the same plan: cached, sharing b1's VM; b1 loses its tag and goes, but its VM is b2's too
    assert cmd.request_build(cmds, ctx("token:k1"), "web", "tnew", "b2", ["default"]).value == "tweb"
    assert cmd.start_build(cmds, ctx("hub"), "web", "b2", "plan-1", False, [{"message": "Build cached"}]).value == \
        (None, [])
    # a new plan, forced: b2 goes with the VM it shared
    cmd.request_build(cmds, ctx("token:k1"), "web", "tnew", "b3", ["default"])
    cid3, _ = cmd.start_build(cmds, ctx("hub"), "web", "b3", "plan-2", True, []).value
    assert cid3 == cid + 1
    assert cmd.build_ready(cmds, ctx("hub"), "web", "b3", "cp3", None).value == [cid]
    rm.catch_up()
    t = q.template_row(rm, "web")
    assert t == q.template_row(rm, "tweb") and t["tags"] == {"default": "b3"}
    assert [b["build_id"] for b in q.build_rows(rm, "tweb")] == ["b3"]
    with pytest.raises(Refusal) as started:
        cmd.start_build(cmds, ctx("hub"), "web", "b3", "plan-2", False, [])
    assert started.value.code == "e2b_build_started"
    # a failed build, its log; then the template deleted, and its name made again with a new id
    cmd.request_build(cmds, ctx("token:k1"), "bad", "tbad", "b4", ["default"])
    cid4, _ = cmd.start_build(cmds, ctx("hub"), "bad", "b4", "plan-x", False, []).value
    assert cmd.build_failed(cmds, ctx("hub"), "bad", "b4", "step 1 (exit 4) exited 4", "1").value == [cid4]
    assert cmd.delete_template(cmds, ctx("owner"), "web").value == [cid3]
    assert cmd.request_build(cmds, ctx("token:k1"), "web", "tweb2", "b5", ["v1"]).value == "tweb2"
    rm.catch_up()
    assert [t["name"] for t in q.template_rows(rm)] == ["bad", "web"]
    assert q.template_row(rm, "web")["template_id"] == "tweb2"
    (failed,) = q.build_rows(rm, "tbad")
    assert failed["status"] == "error" and failed["reason"] == {"message": "step 1 (exit 4) exited 4", "step": "1"}
    assert [e["message"] for e in q.build_log(rm, "b1", 440, 100)] == [f"line {i}" for i in range(440, 450)]


def test_snapshots_by_id_or_a_name_exactly_one_has(plaza):
    store, rm, cmds = plaza
    new_sandbox(cmds, "ia")
    cmd.started(cmds, cmds.context("hub"), "ia", 1.0)
    for sid, name in (("s1", "one"), ("s2", "two"), ("s3", "two")):
        cmd.snapshot(cmds, cmds.context("token:k1"), snapshot_id=sid, name=name, sandbox_id="ia", checkpoint=f"c{sid}",
                     memory=True)
    with pytest.raises(Refusal):
        cmd.snapshot(cmds, cmds.context("token:k1"), snapshot_id="s9", name="x", sandbox_id="nope", checkpoint="c",
                     memory=True)
    rm.catch_up()
    assert [r["snapshot_id"] for r in q.snapshots_named(rm, "one")] == ["s1"]
    assert len(q.snapshots_named(rm, "two")) == 2 and q.snapshots_named(rm, "s3")[0]["names"] == ["two"]
    assert q.cids_held_by_snapshots(rm) == {FIRST_SANDBOX_CID}


def test_rebuilt_from_event_one_the_e2b_read_model_equals_the_live_one_and_no_secret_is_logged(plaza):
    store, rm, cmds = plaza
    test_a_sandboxs_life_is_in_the_log_and_its_read_model(plaza)
    test_templates_builds_tags_cache_and_clean_up(plaza)
    rm.catch_up()
    live = rm.live(["e2b", "transcript"])
    assert live["e2b"]["rm_e2b_sandboxes"] and live["e2b"]["rm_e2b_build_logs"]
    assert rm.replay(names=["e2b", "transcript"]) == live
    rm.rebuild("e2b")
    assert rm.live(["e2b", "transcript"]) == live
    events = json.dumps([r.data for r in store.read(0, 100_000)])
    assert "envVars" not in events and "access" not in events.lower()


def test_a_second_hub_process_reads_what_the_first_wrote(folders, database_url):
    store, rm, cmds = open_plaza(folders, database_url)
    new_sandbox(cmds, "ia")
    cmd.started(cmds, cmds.context("hub"), "ia", 1.0)
    store.close()
    rm.engine.dispose()
    store, rm, cmds = open_plaza(folders, database_url)  # as a hub that starts again
    try:
        rm.catch_up()
        assert [r["sandbox_id"] for r in q.sandbox_rows(rm)] == ["ia"]
        assert new_sandbox(cmds, "ib") == FIRST_SANDBOX_CID + 1  # the CIDs go on: none is given twice
    finally:
        store.close()
        rm.engine.dispose()
