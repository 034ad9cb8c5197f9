"""Automatic checkpoints in a real microVM, through a real ``apid`` with node n0 and the mock provider
scripted as the model: with ``vm_auto_checkpoints`` on (the default) each high-risk call (a shell
command here) is preceded by a checkpoint named after it; a rollback to the one before a destructive
command brings back the files and the running process it destroyed. Off, no checkpoint is taken."""

from __future__ import annotations

import pytest
from test_typical_day import MOCK, PRICE, Scripted, day, image, ok, tool, wait_for  # noqa: F401 - the fixtures

from agentplaza.runtime.fleet import auto_name

pytestmark = pytest.mark.vm


def test_a_high_risk_call_is_preceded_by_a_checkpoint_and_a_rollback_undoes_it(day):  # noqa: F811
    _h, c = day

    agents = Scripted(c)
    log, step = agents.log, agents.step

    def checkpoints(cid):
        return {k["name"]: k for k in ok(c.get(f"/v1/agents/{cid}/checkpoints"))["checkpoints"]}

    def autos(cid):
        return [e["detail"] for e in log(cid) if e["kind"] == "note" and e["detail"].get("action") == "auto_checkpoint"]

    assert ok(c.get("/v1/models/policy"))["policy"]["vm_auto_checkpoints"] is True  # on by default
    (b,) = [a["cid"] for a in ok(c.post("/v1/agents", json={"role": "builder"}))["agents"]]
    wait_for("the builder idle", lambda: ok(c.get(f"/v1/agents/{b}"))["agent"]["status"] == "idle", 300)

    # A write is not high-risk: no checkpoint.
    step(b, tool("vm.write_file", path="keep.txt", content="kept\n"))
    assert autos(b) == [] and checkpoints(b) == {}
    # A shell command is: one before it, named after it.
    assert "started" in step(b, tool("vm.shell", command="sleep 3600 >/dev/null 2>&1 & echo $! > sleep.pid; echo started"))
    assert [a["name"] for a in autos(b)] == [auto_name(1, "vm.shell")] == ["auto-1-vm-shell"]
    # The destructive step: its checkpoint holds the file and the running process.
    assert "gone" in step(b, tool("vm.shell", command="rm keep.txt; kill $(cat sleep.pid); echo gone"))
    guard = autos(b)[-1]
    assert guard["name"] == "auto-2-vm-shell" and guard["tool"] == "vm.shell"
    saved = checkpoints(b)
    assert set(saved) == {"auto-1-vm-shell", "auto-2-vm-shell"} and saved["auto-2-vm-shell"]["label"].startswith("before vm.shell")
    assert saved["auto-2-vm-shell"]["memory"]

    # Rolling back to it undoes the step: the file is back, and the process runs again.
    assert ok(c.post(f"/v1/agents/{b}/rollback", json={"name": "auto-2-vm-shell"}))["safety"]
    wait_for("idle after the rollback", lambda: ok(c.get(f"/v1/agents/{b}"))["agent"]["status"] == "idle", 120)
    out = step(b, tool("vm.shell", command="cat keep.txt; kill -0 $(cat sleep.pid) && echo alive"))
    assert "kept" in out and "alive" in out, out

    # Off: a high-risk call runs with no checkpoint before it.
    ok(c.patch("/v1/models/policy", json={"vm_auto_checkpoints": False}))
    before = len(autos(b))
    step(b, tool("vm.shell", command="echo unguarded"))
    assert len(autos(b)) == before
