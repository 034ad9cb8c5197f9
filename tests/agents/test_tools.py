"""The tools an agent's model is offered, each declared once (``agentplaza.runtime.tools``): its name,
where it runs, its risk class (pinned to the laws' catalogue), a description and an input schema, and a
host tool's function. Every declared tool runs; each schema
takes the args the other tests use and refuses a wrong type, a missing field and an unknown one; the
guest schemas say what the harness accepts; the model turn carries them; the hub refuses a host tool
call whose args do not fit, naming the field, before the laws see it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sessions import session

import jhrl.catalog
from agentplaza.api.hub import Hub
from agentplaza.commands import agents as ac
from agentplaza.commands import approvals
from agentplaza.commands import tasks as tc
from agentplaza.projections.agents import transcript as transcript_page
from agentplaza.projections.work import approvals as approvals_table
from agentplaza.runtime import modelrelay, schema, tools
from agentplaza.runtime.schema import check
from agentplaza.runtime.tools import GUEST_TOOLS, HOST_TOOLS, TOOLS, check_args
from vmm.guest import contract
from vmm.guest import harness as h

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agents.md"

#: Args the other tests (and the typical day) call each tool with: every one fits.
USED = [
    ("vm.write_file", {"path": "src/a.txt", "content": "one two"}),
    ("vm.write_file", {"path": "a", "content": ""}),
    ("vm.read_file", {"path": "src/a.txt"}),
    ("vm.edit_file", {"path": "src/a.txt", "old": "two", "new": "three"}),
    ("vm.list_dir", {"path": "."}),
    ("vm.list_dir", {}),
    ("vm.shell", {"command": "echo hi; pwd"}),
    ("vm.shell", {"command": "echo started; sleep 30", "timeout": 1}),
    ("vm.shell", {"command": "sleep 8; echo late"}),
    ("vm.shell", {"command": "ls", "timeout": 2.5}),
    ("vm.share_file", {"path": "report.md"}),
    ("vm.share_file", {"path": "report.md", "agents": [4, 5]}),
    ("vm.fetch", {"url": "http://pages.plaza.test:8080/moved"}),
    ("vm.fetch", {"url": "https://example.org/", "max_bytes": 1000}),
    ("vm.download", {"url": "http://pages.plaza.test:8080/data.bin", "path": "in/data.bin"}),
    ("vm.install", {"packages": ["apz-hello"], "index_url": "http://pages.plaza.test:8080/simple/"}),
    ("vm.install", {"packages": ["jq"], "manager": "apt"}),
    ("plaza_status", {}),
    ("plaza_roster", {}),
    ("plaza_toolbox", {}),
    ("plaza_message", {"to": 4, "text": "hello"}),
    ("plaza_message", {"to": 4, "text": "hello", "file": "notes/plan.md"}),
    ("plaza_board_read", {}),
    ("plaza_board_read", {"all": True, "project": "rel-9"}),
    ("plaza_board_read", {"post": "p1"}),
    ("plaza_board_post", {"text": "Release notes drafted, @bob please look"}),
    ("plaza_board_post", {"text": "@builder looks good", "reply_to": "p1"}),
    ("plaza_board_post", {"text": "plan", "project": "rel-9", "task": "t1"}),
    ("plaza_task_list", {}),
    ("plaza_task_create", {"title": "a", "acceptance": "a.txt says a", "budget": 400, "role": "builder"}),
    ("plaza_task_create", {"title": "Write a.txt", "acceptance": "a.txt holds one line", "budget": 300,
                           "role": "builder"}),
    ("plaza_task_create", {"title": "a", "acceptance": "b", "budget": None, "details": "d", "parent": "t1"}),
    ("plaza_task_create", {"title": "a", "acceptance": "b"}),
    ("plaza_task_claim", {"task": "t1"}),
    ("plaza_task_claim", {"task": "t1", "review": True}),
    ("plaza_task_submit", {"task": "t1", "summary": "wrote a", "files": ["a.txt"], "checks": "cat a.txt"}),
    ("plaza_task_submit", {"task": "t1", "summary": "wrote a.txt", "files": "a.txt", "checks": "read it back"}),
    ("plaza_task_submit", {"task": "t1", "summary": "s", "files": "a.txt, b.txt", "checks": "c"}),
    ("plaza_task_submit", {"task": "t1", "verdict": "pass", "notes": "good"}),
    ("plaza_task_submit", {"task": "t2", "verdict": "fail", "notes": "b.txt is empty"}),
    ("plaza_task_submit", {"task": "t1", "give_up": True, "notes": "cannot"}),
    ("plaza_task_cancel", {"task": "t1"}),
    ("plaza_bid", {"task": "t1", "price": 300}),
    ("plaza_agent_propose", {"role": "builder", "count": 2, "why": "two builders for the release"}),
    ("plaza_agent_propose", {"role": "builder", "why": "one more", "model": "mock/echo"}),
    ("plaza_git", {"op": "open_pr", "repo": "proj", "source": "feature", "title": "Add it", "body": "why"}),
    ("plaza_git_review", {"pr": "pr1", "verdict": "request_changes", "text": "name it better"}),
    ("plaza_git_merge", {"pr": "pr1", "method": "auto"}),
    ("plaza_library_submit", {"file": "f1", "title": "The report", "task": "t1"}),
    ("plaza_file_read", {"file": "f1"}),
    ("plaza_file_read", {}),
    ("plaza_board_post", {"text": "the notes", "file": "f1"}),
    ("plaza_tool_package", {"name": "word_count", "file": "f1", "description": "counts the words of its input"}),
    ("plaza_hire", {"to": 4, "title": "Test it", "acceptance": "tests pass", "bonus": 50}),
    ("plaza_hire", {"to": 4, "title": "Test it", "acceptance": "tests pass", "details": "d", "budget": None}),
    ("plaza_pay", {"to": 4, "amount": 10, "memo": "thanks"}),
    ("plaza_memory_write", {"note": "How the build works", "text": "make; see [[Release]]"}),
    ("plaza_memory_read", {}),
    ("plaza_memory_read", {"note": "How the build works"}),
    ("plaza_memory_delete", {"note": "How the build works"}),
    ("plaza_toolbox_share", {"name": "jq", "how": "filters JSON", "verdict": "great", "link": "https://jqlang.org"}),
    ("plaza_task_create", {"title": "a", "acceptance": "b", "project": "pj1"}),
    ("plaza_project_open", {"title": "Release site", "brief": "publish the notes", "kind": "code"}),
    ("plaza_project_research", {"project": "pj1", "title": "generators", "text": "mkdocs"}),
    ("plaza_project_propose", {"project": "pj1", "proposal": "one page", "tasks": "t: write", "spec": "the page"}),
    ("plaza_project_critique", {"project": "pj1", "text": "add a rollback", "revise": True}),
    ("plaza_project_approve", {"project": "pj1"}),
    ("plaza_project_deliver", {"project": "pj1", "title": "The site", "text": "published", "item": "l1"}),
    ("plaza_council_propose", {"kind": "budget_move", "title": "Fund docs", "text": "why", "amount": 500, "to": 4}),
    ("plaza_council_vote", {"motion": "m1", "vote": "yes", "reason": "fits the plan"}),
    ("plaza_incident_open", {"title": "A leak", "text": "what happened", "agent": 4}),
    ("plaza_case_file", {"accused": 4, "law": "S-002", "severity": "low", "charge": "posted a path", "incident": "i1"}),
    ("plaza_case_defend", {"case": "c1", "text": "a test path"}),
    ("plaza_case_rule", {"case": "c1", "verdict": "dismissed", "text": "no harm"}),
]

#: A value of the wrong type for each JSON type a schema names.
WRONG = {"string": 7, "integer": "7", "number": "7", "boolean": "yes", "array": 7, "object": 7, "null": 7}


def keywords(schema: dict) -> set[str]:
    out = set(schema)
    for sub in (schema.get("properties") or {}).values():
        out |= keywords(sub)
    if isinstance(schema.get("items"), dict):
        out |= keywords(schema["items"])
    return out


#: Where host tools' functions live: the plaza's, and the society's (hiring, paying, discoveries, memory).
HOST_TOOL_MODULES = ("agentplaza.runtime.hosttools", "agentplaza.runtime.societytools")


def test_every_tool_is_declared_once_and_runs_where_it_says():
    assert set(GUEST_TOOLS) | set(HOST_TOOLS) == set(TOOLS) and len(GUEST_TOOLS) + len(HOST_TOOLS) == len(TOOLS)
    for t in TOOLS.values():
        assert (t.runs == tools.GUEST) == t.name.startswith("vm."), t.name
        assert (t.handler is None) == (t.runs == tools.GUEST), t.name  # a host tool has its function
        if t.handler is not None:
            assert t.handler.__name__ == t.name and t.handler.__module__ in HOST_TOOL_MODULES
    # the harness runs every guest tool (vm.share_file needs the hub, so it is its own case), and no other
    assert set(h.GUEST_TOOLS) | {"vm.share_file"} == set(GUEST_TOOLS)
    with pytest.raises(h.ToolError, match="no guest tool"):
        h.run_guest_tool("vm.nothing", {})
    # host tools: see test_every_host_tool_runs_in_the_hub below


def test_each_tools_risk_is_the_law_catalogues():
    for t in TOOLS.values():
        assert t.name in jhrl.catalog.TOOLS, f"{t.name} has no risk in the laws' catalog: it could never be offered"
        assert t.risk == jhrl.catalog.TOOLS[t.name], t.name
        assert tools.risk_of(t.name) == t.risk
    assert tools.risks(("vm.read_file", "plaza_task_create")) == {"vm.read_file": "read", "plaza_task_create": "write"}


def test_an_unknown_tool_is_taken_for_the_riskiest_everywhere():
    assert jhrl.catalog.UNKNOWN_RISK == "irreversible" == jhrl.catalog.risk_of("plaza_nothing")
    assert tools.risk_of("plaza_nothing") == jhrl.catalog.UNKNOWN_RISK
    assert tools.risk_of("egress.connect") == jhrl.catalog.TOOLS["egress.connect"]  # not the model's, still the laws'


def test_the_share_limit_is_the_guest_contracts_one():
    assert h.MAX_FILE == contract.MAX_FILE == 1 << 20
    assert "1 MiB" in TOOLS["vm.share_file"].description and "1 MiB" in TOOLS["vm.write_file"].description
    # the hub's side takes the same number: see test_a_shared_file_is_at_most_the_contracts_limit


def test_every_schema_is_a_closed_object_in_the_subset_the_checker_knows():
    for s in TOOLS.values():
        sch = s.input_schema
        assert sch["type"] == "object" and sch["additionalProperties"] is False, s.name
        assert set(sch.get("required", ())) <= set(sch["properties"]), s.name
        assert keywords(sch) <= schema.KEYWORDS, (s.name, keywords(sch) - schema.KEYWORDS)
        assert all(p.get("description") for p in sch["properties"].values()), s.name
        assert 20 < len(s.description) < 600 and "\n" not in s.description, s.name
        assert not s.description.startswith("the plaza tool"), s.name


@pytest.mark.parametrize(("tool", "args"), USED, ids=[f"{t}-{i}" for i, (t, _) in enumerate(USED)])
def test_the_args_the_tests_use_fit(tool, args):
    assert check_args(tool, args) is None


@pytest.mark.parametrize("tool", list(TOOLS))
def test_a_wrong_type_a_missing_field_and_an_unknown_one_are_refused_naming_the_field(tool):
    sch = TOOLS[tool].input_schema
    good = next(a for t, a in USED if t == tool and set(a) >= set(sch.get("required", ())))
    bad = check_args(tool, dict(good, bogus=1))
    assert bad.startswith(f"{tool}: unknown field bogus"), bad
    for field in sch.get("required", ()):
        assert check_args(tool, {k: v for k, v in good.items() if k != field}) == f"{tool}: {field} is required"
    for field, prop in sch["properties"].items():
        types = [prop["type"]] if isinstance(prop["type"], str) else prop["type"]
        wrong = next(v for t, v in WRONG.items() if not any(schema._TYPES[x](v) for x in types)
                     and t not in types)
        msg = check_args(tool, dict(good, **{field: wrong}))
        assert msg and msg.startswith(f"{tool}: {field} must be"), (field, msg)
    assert check_args(tool, "not an object").endswith("the input must be an object, not a string")


def test_the_checker_names_the_bound_the_enum_and_the_item():
    assert check_args("plaza_task_create", {"title": "a", "acceptance": "b", "budget": 199}) \
        == "plaza_task_create: budget must be at least 200"
    assert check_args("plaza_task_create", {"title": "a", "acceptance": "b", "budget": 400.0}) \
        == "plaza_task_create: budget must be a whole number or null, not a number"
    assert check_args("plaza_message", {"to": True, "text": "x"}) == "plaza_message: to must be a whole number, not true or false"
    assert check_args("plaza_task_submit", {"task": "t1", "verdict": "ok"}) == "plaza_task_submit: verdict must be one of pass, fail"
    assert check_args("plaza_task_submit", {"task": "t1", "files": ["a", 2]}) \
        == "plaza_task_submit: files[1] must be a string, not a whole number"
    assert check_args("plaza_task_create", {"title": "", "acceptance": "b"}) == "plaza_task_create: title must not be empty"
    assert check_args("plaza_status", {"x": 1}) == "plaza_status: unknown field x (it takes no fields)"
    assert check_args("plaza_task_claim", {"task": "t1", "x": 1}) \
        == "plaza_task_claim: unknown field x (the fields are task, review)"
    assert check_args("plaza_nothing", {"x": 1}) is None  # no spec: the laws refuse an unknown tool


def test_the_guest_schemas_say_what_the_harness_accepts(tmp_path):
    ws = str(tmp_path)
    shell = TOOLS["vm.shell"].input_schema
    for timeout in (0, -1, h.SHELL_MAX_TIMEOUT_S + 1, "5"):  # the harness refuses; so does the schema
        with pytest.raises(h.ToolError):
            h.run_guest_tool("vm.shell", {"command": "true", "timeout": timeout}, workspace=ws)
        assert check(shell, {"command": "true", "timeout": timeout})
    for timeout in (0.5, 1, h.SHELL_MAX_TIMEOUT_S):
        assert check(shell, {"command": "true", "timeout": timeout}) is None
    assert h.run_guest_tool("vm.shell", {"command": "true", "timeout": 0.5}, workspace=ws).startswith("exit 0")
    for args in ({"command": ""}, {}, {"command": 3}):
        with pytest.raises(h.ToolError):
            h.run_guest_tool("vm.shell", args, workspace=ws)
        assert check(shell, args)
    for tool, args in (("vm.read_file", {}), ("vm.read_file", {"path": ""}), ("vm.write_file", {"path": "a"}),
                       ("vm.edit_file", {"path": "a", "old": "", "new": "x"}), ("vm.share_file", {"path": 1})):
        with pytest.raises(h.ToolError):
            h.run_guest_tool(tool, args, workspace=ws)
        assert check_args(tool, args), (tool, args)
    # and what the schema takes, the harness runs
    for tool, args in (("vm.write_file", {"path": "d/a.txt", "content": "one two"}),
                       ("vm.edit_file", {"path": "d/a.txt", "old": "two", "new": ""}),
                       ("vm.read_file", {"path": "d/a.txt"}), ("vm.list_dir", {}), ("vm.list_dir", {"path": "d"})):
        assert check_args(tool, args) is None
        h.run_guest_tool(tool, args, workspace=ws)
    assert h.run_guest_tool("vm.read_file", {"path": "d/a.txt"}, workspace=ws) == "one "
    assert str(h.SHELL_MAX_TIMEOUT_S) in TOOLS["vm.shell"].description
    assert str(h.SHELL_TIMEOUT_S) in TOOLS["vm.shell"].description


def test_the_model_turn_carries_each_tool_with_its_description_and_schema():
    tools = ["vm.shell", "plaza_task_submit", "vm.shell", "plaza_nothing", 7]
    _msgs, specs = modelrelay.to_anthropic([{"role": "user", "content": "hi"}], tools)
    assert [s["name"] for s in specs] == ["vm__shell", "plaza_task_submit"]  # unknown dropped, once each
    assert specs[0]["description"] == TOOLS["vm.shell"].description
    assert specs[0]["input_schema"]["required"] == ["command"]
    assert specs[0]["input_schema"]["properties"]["timeout"]["maximum"] == h.SHELL_MAX_TIMEOUT_S
    assert specs[1]["input_schema"] == TOOLS["plaza_task_submit"].input_schema
    assert specs[1]["input_schema"]["additionalProperties"] is False
    _msgs, every = modelrelay.to_anthropic([], list(GUEST_TOOLS + HOST_TOOLS))
    assert [modelrelay.tool_name(s["name"]) for s in every] == list(GUEST_TOOLS + HOST_TOOLS)
    assert all("." not in s["name"] for s in every)
    assert all(s["description"] == TOOLS[modelrelay.tool_name(s["name"])].description for s in every)


def test_the_docs_list_the_tools_as_the_specs_say():
    text = DOCS.read_text()
    start = text.index("<!-- tools: generated by agentplaza.runtime.tools.markdown() -->\n")
    end = text.index("<!-- /tools -->")
    assert text[text.index("\n", start) + 1:end] == tools.markdown(), \
        "docs/agents.md's tools list is stale: paste tools.markdown() between the markers"


# -- in the hub -------------------------------------------------------------------------------------
@pytest.fixture
def hub(folders, database_url):
    h_ = Hub.open(folders, database_url=database_url)
    yield h_
    h_.close()


def transcript(hub, cid):
    hub.read_models.catch_up()
    return transcript_page(hub.read_models, cid, limit=10_000)


def test_a_host_tool_with_a_bad_arg_is_refused_naming_it_before_the_laws_see_it(hub):
    cmds = hub.commands
    cid, s = session(hub, "orchestrator")
    r = s.handle({"op": "tool", "tool": "plaza_task_create", "call_id": "c1",
                  "args": {"title": "a", "acceptance": "b", "budget": "lots"}})
    assert r == {"error": {"code": "bad_request",
                           "message": "plaza_task_create: budget must be a whole number or null, not a string"}}
    r = s.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"number": "t1"}, "call_id": "c2"})
    assert r["error"] == {"code": "bad_request", "message": "plaza_task_claim: task is required"}
    r = s.handle({"op": "tool", "tool": "plaza_task_claim", "args": {"task": "t1", "reviewer": True}})
    assert r["error"]["message"] == "plaza_task_claim: unknown field reviewer (the fields are task, review)"
    entries = transcript(hub, cid)
    errors = [e for e in entries if e["kind"] == "error"]
    assert [(e["tool"], e["detail"]["code"], e["detail"]["call_id"]) for e in errors] == [
        ("plaza_task_create", "bad_request", "c1"), ("plaza_task_claim", "bad_request", "c2"),
        ("plaza_task_claim", "bad_request", None)]
    assert "budget must be a whole number" in errors[0]["text"] and '"lots"' in errors[0]["detail"]["args"]
    assert not [e for e in entries if e["kind"] == "tool_call"]  # never decided by the laws
    assert tc.worker(cmds, str(cid)).task is None
    # the same call, fixed, runs
    r = s.handle({"op": "tool", "tool": "plaza_task_create", "args": {"title": "a", "acceptance": "b", "budget": 400}})
    assert "error" not in r and r["result"]["budget"] == 400


def test_in_ask_mode_a_bad_call_makes_no_approval(hub):
    cmds = hub.commands
    cid, s = session(hub, "orchestrator")
    ac.update(cmds, cmds.context("owner"), cid, {"permission_mode": "ask"})
    r = s.handle({"op": "tool", "tool": "plaza_message", "args": {"to": "4", "text": "hi"}})
    assert r["error"] == {"code": "bad_request", "message": "plaza_message: to must be a whole number, not a string"}
    hub.read_models.catch_up()
    assert hub.read_models.rows(approvals_table) == []
    other, _ = session(hub, "builder")  # a message goes to another agent
    r = s.handle({"op": "tool", "tool": "plaza_message", "args": {"to": other, "text": "hi"}})
    assert r["error"]["code"] == "awaiting_approval"
    approvals.decide(cmds, cmds.context("owner"), r["approval"], True)
    assert s.handle({"op": "tool", "tool": "plaza_message", "args": {"to": other, "text": "hi"}})["result"]["sent"]


def test_every_host_tool_runs_in_the_hub(hub):
    """Called with args that fit, no host tool answers 'not available' or 'bad request' (a refusal of the
    plaza's own, like a task that does not exist, is the tool running)."""
    cid, orch = session(hub, "orchestrator")
    _, builder = session(hub, "builder")
    _, reviewer = session(hub, "reviewer")  # the git server's reviews and merges are theirs (S-023, S-025)
    args = {t: a for t, a in reversed(USED)}
    args["plaza_message"] = {"to": cid, "text": "hi"}
    ac.tell(hub.commands, hub.commands.context("owner"), cid, "We need a builder.")  # the owner's own chat
    assert orch.handle({"op": "next", "wait": 0})["item"]
    # the governance tools are the researchers', planners', the Mayor's, the seats' and the courts' (S-015 to S-044)
    others = [session(hub, r)[1] for r in ("researcher", "planner", "mayor", "finance", "incident", "prosecutor",
                                            "counsel", "judge")]
    for tool in HOST_TOOLS:  # as the first role the laws let call it
        answers = [s.handle({"op": "tool", "tool": tool, "args": args[tool]}) for s in (orch, builder, reviewer, *others)]
        r = next((a for a in answers if "error" not in a or a["error"]["code"] != "refused"), answers[-1])
        assert "error" not in r or r["error"]["code"] not in ("not_available", "bad_request", "refused"), (tool, r)


def test_the_toolbox_gives_each_offered_tool_with_its_description(hub):
    _cid, s = session(hub, "orchestrator")
    r = s.handle({"op": "tool", "tool": "plaza_toolbox", "args": {}})
    box = r["result"]
    assert set(box) == {"vm", "plaza", "library", "discoveries"} and box["discoveries"] == []  # none shared yet
    assert box["library"] == []  # no library tool is approved yet
    assert {t["name"] for t in box["vm"]} <= set(GUEST_TOOLS) and {t["name"] for t in box["plaza"]} <= set(HOST_TOOLS)
    assert "vm.shell" in [t["name"] for t in box["vm"]] and "plaza_toolbox" in [t["name"] for t in box["plaza"]]
    for t in box["vm"] + box["plaza"]:
        assert t == {"name": t["name"], "description": TOOLS[t["name"]].description}


def test_a_shared_file_is_at_most_the_contracts_limit(hub):
    import base64

    cid, s = session(hub, "builder")
    ac.tell(hub.commands, hub.commands.context("owner"), cid, "share it")
    s.handle({"op": "next", "wait": 0})
    over = s.handle({"op": "share", "path": "big.bin", "content": base64.b64encode(b"x" * (contract.MAX_FILE + 1)).decode()})
    assert over["error"] == {"code": "too_large", "message": f"a shared file is at most {contract.MAX_FILE} bytes"}
    fits = s.handle({"op": "share", "path": "big.bin", "content": base64.b64encode(b"x" * contract.MAX_FILE).decode()})
    assert fits["name"] == "f1"  # into the plaza's file store, in the library's store
    kept = list((hub.folders.data / "library").iterdir())
    assert len(kept) == 1 and kept[0].stat().st_size == contract.MAX_FILE
