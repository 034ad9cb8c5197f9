"""The tool library in real microVMs, the mock provider scripted as each agent's model: a builder writes
a program in its workspace, shares it and packages it as version 1 of
``word_count``; the version is invisible to a tester (not in its toolbox; a call is refused) while the
builder can already try it; the owner approves it from the CLI; the tester's toolbox then holds
``x_word_count`` and the call runs in the tester's own VM (the program prints the boot id of the machine
it runs on: the tester's, not the builder's, not the hub's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.hubproc import cli
from test_governance_vm import image, ok, plaza, tool, wait_for  # noqa: F401 - the fixtures

pytestmark = pytest.mark.vm

PROGRAM = "#!/bin/sh\nwc -w | tr -d ' '\ncat /proc/sys/kernel/random/boot_id\necho \"args: $*\"\n"
BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def test_a_tool_version_is_invisible_until_approved_then_runs_in_each_callers_own_vm(plaza):  # noqa: F811
    h, c = plaza

    def log(cid):
        return ok(c.get(f"/v1/agents/{cid}/logs", params={"limit": 1000}))["transcript"]

    def count(cid, kind):
        return sum(e["kind"] == kind for e in log(cid))

    def settled(cid):
        wait_for(f"agent {cid} settled", lambda: count(cid, "done") == count(cid, "told"), 180,
                 diag=lambda: [(e["kind"], e["tool"], (e["text"] or "")[:100]) for e in log(cid)][-10:])

    def say(cid, text) -> list[dict]:
        """Tell the agent one directive; the transcript entries it added."""
        settled(cid)
        before = len(log(cid))
        ok(c.post(f"/v1/agents/{cid}/tell", json={"text": text}))
        wait_for("told", lambda: count(cid, "told") > count(cid, "done"), 30)
        settled(cid)
        return log(cid)[before:]

    def result(cid, text) -> str:
        out = [e for e in say(cid, text) if e["kind"] == "tool_result"]
        assert out and not (out[-1]["text"] or "").startswith("error"), out[-1:]
        return out[-1]["text"]

    def spawn(role):
        return ok(c.post("/v1/agents", json={"role": role}))["agents"][0]["cid"]

    builder, tester = spawn("builder"), spawn("tester")
    wait_for("two idle agents", lambda: all(ok(c.get(f"/v1/agents/{x}"))["agent"]["status"] == "idle"
                                            for x in (builder, tester)), 600)

    result(builder, tool("vm.write_file", path="tools/wc.sh", content=PROGRAM))
    # the mock's directive holds no ']', so no list: the file is public; the version is still private
    shared = result(builder, tool("vm.share_file", path="tools/wc.sh"))
    assert shared.endswith(" as f1"), shared
    package = {"name": "word_count", "file": "f1", "description": "Counts the words of its input."}
    packaged = json.loads(result(builder, f"[mock:tool plaza_tool_package {json.dumps(package)}]"))
    assert packaged == {"tool": "x_word_count", "version": 1, "approval": "a1", "status": "pending"}

    assert result(tester, tool("plaza_toolbox")).startswith('{"library": [], "vm": ')
    refused = say(tester, tool("x_word_count", input="one two"))
    assert [e["text"] for e in refused if e["kind"] == "error"] == ["no library tool x_word_count is offered to you"]
    assert not [e for e in refused if e["kind"] in ("tool_call", "tool_result")]  # never decided, never run
    tried = result(builder, tool("x_word_count", input="a b c"))  # its author may try it while it waits
    assert tried.startswith("exit 0\n3\n"), tried

    r = cli(h, "tools", "approve", "word_count", "1", "--reason", "read the program", "--yes")
    assert r.returncode == 0 and "approved x_word_count" in r.stdout, r.stderr
    box = result(tester, tool("plaza_toolbox"))
    assert box.startswith('{"library": [{"name": "x_word_count", "description": "Counts the words of its input.", '
                          '"version": 1}]'), box[:200]
    tester_boot = result(tester, tool("vm.shell", command=BOOT_ID)).split("\n")[1]
    builder_boot = result(builder, tool("vm.shell", command=BOOT_ID)).split("\n")[1]
    ran = result(tester, tool("x_word_count", input="one two three four"))
    assert ran.split("\n")[:4] == ["exit 0", "4", tester_boot, "args: "], ran
    assert tester_boot != builder_boot and tester_boot != Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    call = [e for e in log(tester) if e["kind"] == "tool_call" and e["tool"] == "x_word_count"][-1]
    assert call["detail"]["effect"] == "allow" and call["detail"]["law"] is None
