"""The tool library: an agent packages a program it shared as the next version of a named tool
(``plaza_tool_package``); the version is private to its author until the owner approves its approval
(kind tool_version: in ``/v1/approvals`` and on ``/v1/tools``); an approved version is offered to every
agent as ``x_<name>`` (at hello, in each model turn's tools, in ``plaza_toolbox``) and its program goes
with the laws' allow to the calling agent's own VM, where the harness runs it. Over the API, the CLI
(``agentplaza tools``) and a real ``apid``; the read model rebuilt from event 1 equals the live one."""

from __future__ import annotations

import base64
import hashlib
import json
import types

import pytest
from starlette.testclient import TestClient
from support.hubproc import HubProcess, cli
from support.sessions import at_work

from agentplaza.api.app import create_app
from agentplaza.api.hub import Hub
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Context, Refusal
from agentplaza.domain.toollib import APPROVED, PENDING, REJECTED, LibraryTool, tool_name, version_for
from agentplaza.events.store import EventStore
from agentplaza.runtime import modelrelay, toollib
from vmm.guest import harness

WC = b"#!/bin/sh\n# word count of the input, then the arguments\nwc -w | tr -d ' '\necho \"$@\"\n"
WC2 = b"#!/bin/sh\necho v2\n"


@pytest.fixture
def api(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    with TestClient(create_app(hub), base_url="http://127.0.0.1:7700", client=("127.0.0.1", 5000)) as c:
        c.hub = hub
        yield c
    hub.close()


def package(s, name: str, program: bytes, path: str = "tools/wc.sh") -> dict:
    shared = s.handle({"op": "share", "path": path, "content": base64.b64encode(program).decode(),
                       "agents": [s.cid]})  # shared with nobody but its author
    return s.handle({"op": "tool", "tool": "plaza_tool_package",
                     "args": {"name": name, "file": shared["name"], "description": "Counts the words of its input."}})


def offered(hub, s) -> list[str]:
    hub.read_models.catch_up()
    box = s.handle({"op": "tool", "tool": "plaza_toolbox", "args": {}})["result"]
    hello = s.handle({"op": "hello"})["tools"]
    names = [t["name"] for t in box["library"]]
    assert [n for n in hello if n.startswith("x_")] == names  # the same list at hello and in the toolbox
    return names


def test_a_version_is_private_to_its_author_until_the_owner_approves_it(api):
    hub = api.hub
    (a, sa), (b, sb) = at_work(hub, "builder", "tester")
    r = package(sa, "word_count", WC)["result"]
    assert r == {"tool": "x_word_count", "version": 1, "approval": "a1", "status": "pending"}
    hub.read_models.catch_up()
    queued = api.get("/v1/approvals", params={"pending": "1"}).json()["approvals"]
    assert [(q["id"], q["kind"], q["agent"]) for q in queued] == [("a1", "tool_version", str(a))]
    assert offered(hub, sa) == ["x_word_count"]  # its author may try it
    assert offered(hub, sb) == []  # nobody else sees it
    refused = sb.handle({"op": "decide", "tool": "x_word_count", "args": {}})
    assert refused["error"]["code"] == "no_library_tool"
    tried = sa.handle({"op": "decide", "tool": "x_word_count", "args": {"input": "a b"}})
    assert tried["effect"] == "allow" and tried["program"]["version"] == 1

    shown = api.get("/v1/tools/word_count").json()["tool"]
    assert shown["approved"] is None and shown["pending"] == [1] and shown["versions"][0]["author"] == a
    program = api.get("/v1/tools/x_word_count/versions/1/program")
    assert program.content == WC and program.headers["content-type"].startswith("text/plain")
    assert "sandbox" in program.headers["content-security-policy"]
    done = api.post("/v1/tools/word_count/versions/1/approve", json={"reason": "read it"}).json()
    assert done["approval"]["status"] == "approved" and done["tool"]["approved"] == 1
    hub.read_models.catch_up()
    assert offered(hub, sb) == ["x_word_count"]
    d = sb.handle({"op": "decide", "tool": "x_word_count", "args": {"input": "one two three", "args": ["hi"]}})
    assert d["effect"] == "allow" and d["law"] is None and base64.b64decode(d["program"]["content"]) == WC
    assert d["program"]["sha256"] == hashlib.sha256(WC).hexdigest()
    assert api.post("/v1/tools/word_count/versions/1/reject", json={}).json()["error"]["code"] == "approval_decided"


def test_a_program_torn_on_disk_is_refused_item_corrupt_never_shown(api):
    """A version's program is read back against the digest the log holds (``librarystore.read_checked``):
    a blob cut short on disk (a hub that died writing it) is refused, never shown as the program."""
    hub = api.hub
    ((_a, sa),) = at_work(hub, "builder")
    package(sa, "word_count", WC)
    hub.read_models.catch_up()
    blobs = [f for f in (hub.folders.data / "library").iterdir() if f.read_bytes() == WC]
    assert blobs
    for f in blobs:
        f.write_bytes(WC[: len(WC) // 2])
    got = api.get("/v1/tools/x_word_count/versions/1/program")
    assert got.json()["error"]["code"] == "item_corrupt" and WC[:10] not in got.content


def test_a_versions_key_comes_from_the_commands_ids(api):
    """A version's key in the store: its digest and the commands' own id (random on a hub; a run that
    gives the commands its ids, as the simulator does, gets the same key every time)."""
    import itertools

    hub = api.hub
    ((_a, sa),) = at_work(hub, "builder")
    counter = itertools.count()
    hub.commands.new_id = lambda: f"{next(counter):032x}"
    package(sa, "word_count", WC)
    key = next(e.data["key"] for e in hub.commands.store.read() if "key" in e.data and e.data.get("sha256")
               and e.kind.startswith("LibraryTool"))
    assert key.startswith(toollib.KEY_PREFIX + hashlib.sha256(WC).hexdigest()[:32] + "-0000000000")


def test_the_author_tries_its_newer_version_while_every_other_agent_keeps_the_approved_one(api):
    hub = api.hub
    (a, sa), (b, sb) = at_work(hub, "builder", "tester")
    package(sa, "word_count", WC)
    api.post("/v1/approvals/a1/approve", json={"reason": "fine"})  # the approvals queue decides it too
    assert package(sa, "word_count", WC2, "tools/wc2.sh")["result"]["version"] == 2
    program = lambda s: s.handle({"op": "decide", "tool": "x_word_count", "args": {}})["program"]["version"]  # noqa: E731
    assert (program(sa), program(sb)) == (2, 1)
    out = api.post("/v1/tools/word_count/versions/2/reject", json={"reason": "prints the wrong thing"}).json()
    assert out["approval"]["status"] == "denied"
    assert (program(sa), program(sb)) == (1, 1)
    hub.read_models.catch_up()
    listed = api.get("/v1/tools").json()["tools"]
    assert [(t["tool"], t["versions"], t["approved"], t["pending"]) for t in listed] == [("x_word_count", 2, 1, [])]
    statuses = [v["status"] for v in api.get("/v1/tools/word_count").json()["tool"]["versions"]]
    assert statuses == [REJECTED, APPROVED]


def test_each_model_turn_carries_the_library_tools_offered_now():
    spec = toollib.spec({"name": "x_word_count", "version": 3, "description": "Counts words.", "status": "approved"})
    _msgs, specs = modelrelay.to_anthropic([], ["vm.shell", "x_word_count", "x_gone"], {"x_word_count": spec})
    assert [s["name"] for s in specs] == ["vm__shell", "x_word_count"]  # a tool no longer offered is dropped
    assert specs[1]["input_schema"] == toollib.INPUT_SCHEMA and "version 3" in specs[1]["description"]


def test_the_harness_runs_a_library_program_in_its_own_workspace(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "TOOLS_DIR", str(tmp_path / "tools"))
    program = {"version": 1, "filename": "wc.sh", "sha256": hashlib.sha256(WC).hexdigest(),
               "content": base64.b64encode(WC).decode()}
    out = harness.tool_library("x_word_count", {"input": "one two three", "args": ["a", "b"]}, program, str(tmp_path))
    assert out == "exit 0\n3\na b\n"
    tampered = dict(program, content=base64.b64encode(WC + b"rm -rf /\n").decode())
    with pytest.raises(harness.ToolError, match="digest"):
        harness.tool_library("x_word_count", {}, tampered, str(tmp_path))
    py = b"import sys\nprint(sys.stdin.read().upper())\n"
    out = harness.tool_library("x_shout", {"input": "hey"}, {"version": 1, "filename": "shout.py",
                               "sha256": hashlib.sha256(py).hexdigest(), "content": base64.b64encode(py).decode()},
                               str(tmp_path))
    assert out == "exit 0\nHEY\n"


def test_bad_input_is_refused_and_changes_nothing(api):
    hub = api.hub
    (a, sa), (b, sb) = at_work(hub, "builder", "tester")
    theirs = sb.handle({"op": "share", "path": "t.sh", "content": base64.b64encode(WC).decode()})["name"]
    before = hub.commands.store.max_position()
    for name, why in (("Word", "invalid_name"), ("a__b", "invalid_name"), ("x" * 41, "invalid_name")):
        r = sa.handle({"op": "tool", "tool": "plaza_tool_package", "args": {"name": name, "file": theirs,
                                                                            "description": "d"}})
        assert r["error"]["code"] == why, (name, r)
    r = sa.handle({"op": "tool", "tool": "plaza_tool_package", "args": {"name": "wc", "file": theirs, "description": "d"}})
    assert r["error"]["code"] == "not_shared_with_you"  # another's file, even a public one
    r = sa.handle({"op": "tool", "tool": "plaza_tool_package", "args": {"name": "wc", "file": "f9", "description": "d"}})
    assert r["error"]["code"] == "no_shared_file"
    hub.read_models.catch_up()
    assert api.get("/v1/tools").json()["tools"] == [] and api.get("/v1/approvals").json()["approvals"] == []
    # the calls and their refusals are in the transcripts (the laws allowed each); no tool, no approval, no bytes
    kept = [p.name for p in (hub.folders.data / "library").iterdir()]
    assert all(not k.startswith("x-") for k in kept) and hub.commands.store.max_position() > before
    assert api.get("/v1/tools/nothing").json()["error"]["code"] == "no_library_tool"
    assert api.get("/v1/tools/Bad!").json()["error"]["code"] == "invalid_name"
    assert api.get("/v1/tools/wc/versions/x/program").json()["error"]["code"] == "unknown_version"
    bad = sb.handle({"op": "decide", "tool": "x_wc", "args": {"args": "not a list"}})
    assert bad["error"]["code"] == "bad_request"


def test_the_one_rule_of_which_version_an_agent_is_offered():
    v = lambda n, status, author: {"version": n, "status": status, "author": author}  # noqa: E731
    assert version_for([v(1, PENDING, 3)], 4) is None and version_for([v(1, PENDING, 3)], 3)["version"] == 1
    both = [v(1, APPROVED, 3), v(2, PENDING, 3), v(3, PENDING, 5)]
    assert [version_for(both, c)["version"] for c in (3, 4, 5)] == [2, 1, 3]
    assert version_for([v(1, REJECTED, 3)], 3) is None
    assert tool_name("x_word_count") == "word_count"
    t = LibraryTool.open(_ctx(), "wc")
    with pytest.raises(Refusal) as e:
        t.package(_ctx(), author=3, description="", filename="a", size=1, sha256="0" * 64, storage="local", key="k",
                  approval="a1")
    assert e.value.code == "invalid_request"


def _ctx():
    from datetime import UTC, datetime

    return Context("agent:3", datetime(2026, 1, 1, tzinfo=UTC), "c")


def second_writer(hub: HubProcess):
    store = EventStore.open(state_dir=hub.folders.state, database_url=hub.env.get("APZ_DATABASE_URL"))
    cmds = Commands(store)
    return store, types.SimpleNamespace(commands=cmds, folders=hub.folders)


def shared_program(plaza, cid: int, data: bytes) -> str:
    from agentplaza.runtime.files import files_of

    return files_of(plaza).share(plaza.commands.context(f"agent:{cid}"), cid, "tools/wc.sh", data, [cid]).value


def test_the_owner_lists_shows_approves_and_rejects_from_the_cli_and_the_rebuild_equals_the_live_model(hub):
    store, plaza = second_writer(hub)
    try:
        ctx = plaza.commands.context("agent:7")
        toollib.package(plaza, ctx, 7, "word_count", shared_program(plaza, 7, WC), "Counts the words of its input.")
        toollib.package(plaza, ctx, 7, "word_count", shared_program(plaza, 7, WC2), "Counts, faster.")
    finally:
        store.close()
    from support.deadline import until

    until("the hub lists the tool", lambda: "x_word_count" in cli(hub, "tools", "list").stdout, 30)
    r = cli(hub, "tools", "show", "word_count")
    assert r.returncode == 0 and "pending" in r.stdout and "Counts, faster." in r.stdout
    r = cli(hub, "tools", "program", "word_count", "1")
    assert r.returncode == 0 and r.stdout.encode() == WC
    r = cli(hub, "tools", "approve", "word_count", "1")
    assert r.returncode == 1 and "--yes" in r.stderr
    r = cli(hub, "tools", "approve", "word_count", "1", "--reason", "read it", "--yes")
    assert r.returncode == 0 and "approved x_word_count" in r.stdout, r.stderr
    r = cli(hub, "tools", "reject", "word_count", "2", "--yes")
    assert r.returncode == 0 and "denied" in r.stdout
    r = cli(hub, "tools", "reject", "word_count", "2", "--yes")
    assert r.returncode == 1 and "(approval_decided)" in r.stderr
    r = cli(hub, "tools", "show", "nothing")
    assert r.returncode == 1 and "(no_library_tool)" in r.stderr
    shown = json.loads(cli(hub, "--json", "approvals", "list").stdout)["approvals"]
    assert sorted((a["kind"], a["status"]) for a in shown) == [("tool_version", "approved"), ("tool_version", "denied")]
    live = json.loads(cli(hub, "--json", "tools", "show", "word_count").stdout)
    assert [v["status"] for v in live["tool"]["versions"]] == [REJECTED, APPROVED]
    assert cli(hub, "replay", "--rebuild", "toollib").returncode == 0
    assert cli(hub, "replay", "--rebuild", "files").returncode == 0
    hub.stop()
    again = HubProcess(hub.folders, hub.env.get("APZ_DATABASE_URL")).start()
    try:
        assert json.loads(cli(again, "--json", "tools", "show", "word_count").stdout) == live
        assert len(json.loads(cli(again, "--json", "library", "shared").stdout)["files"]) == 2
    finally:
        again.stop()
