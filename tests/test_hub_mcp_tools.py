"""The hub's MCP tool list: exactly the guide's, and nothing on the guide's "never reachable" list."""

from __future__ import annotations

import re

from agentplaza.api.mcp_tools import ROUTES_USED, TOOLS
from agentplaza.api.routes import AREAS

#: The guide, "The tools a client sees": the observe, operate and govern tools, in its order.
GUIDE_TOOLS = {
    "observe": ["plaza_status", "list_agents", "get_agent", "get_transcript", "list_tasks", "get_task", "list_board",
                "list_projects", "get_project", "list_approvals", "list_machines", "treasury_summary",
                "usage_summary", "search_library", "list_laws"],
    "operate": ["create_task", "message_orchestrator", "tell_agent", "post_board", "stop_agent", "restart_agent",
                "propose_agent"],
    "govern": ["request_decision", "propose_law_change"],
}

#: The guide: "Some things have no tool at any scope, and a test checks that the tool list never reaches them":
#: each as the routes that do it on this hub (and the areas still to come, by the words they would be named by).
NEVER = {
    "the vault's values, seal, unseal and rekey": r"/v1/vault(/.*)?",
    "provider keys and other secrets": r"/v1/models/providers(/.*)?|/v1/models/gateway-tokens(/.*)?",
    "the owner token, sign-in": r"/v1/auth(/.*)?",
    "node join codes": r"/v1/nodes/.+/codes|/v1/nodes/codes(/.*)?",
    "treasury minting, fines and transfers": r"/v1/treasury/(mint|fines|transfers?)(/.*)?",
    "payments": r"/v1/treasury/payments(/.*)?",
    "law edits and overrides": r"/v1/rules/.+",
    "sanctions": r"/v1/conduct(/.*)?",
    "STOP ALL and RESUME": r"/v1/plaza/(stop|resume)",
    "connector secrets, settings, the MCP server's own tokens": r"/v1/hub-mcp(/.*)?|/v1/models/policy",
    "deciding approvals": r"/v1/approvals/.+/(approve|deny)",
}
NEVER_WORDS = ("vault", "secret", "seal", "rekey", "key", "owner", "join", "code", "mint", "fine", "transfer", "pay",
               "sanction", "suspend", "stop_all", "resume", "hold", "foundry", "promote", "retire", "connector",
               "setting", "override", "edit_law", "set_law")


def test_the_tool_list_is_the_guides_list():
    assert {s: [t.name for t in TOOLS if t.scope == s] for s in GUIDE_TOOLS} == GUIDE_TOOLS
    assert len({t.name for t in TOOLS}) == len(TOOLS)


def test_no_tool_reaches_what_the_guide_keeps_out_of_reach():
    for method, path in ROUTES_USED:
        for what, pattern in NEVER.items():
            assert not re.fullmatch(pattern, path), f"{method} {path} reaches {what}"
        if path.startswith("/v1/rules") or path.startswith("/v1/approvals"):
            assert method == "GET", f"{method} {path} changes laws or decides approvals"
    for t in TOOLS:
        assert not any(w in t.name for w in NEVER_WORDS), t.name


def test_every_route_a_tool_uses_is_a_route_of_the_hub():
    routes = {(m, r.path) for area in AREAS for r in area.ROUTES if hasattr(r, "methods") for m in r.methods}
    assert ROUTES_USED <= routes, ROUTES_USED - routes


def test_writes_are_held_by_stop_all_and_reads_are_not():
    assert {t.name for t in TOOLS if t.changes} == set(GUIDE_TOOLS["operate"] + GUIDE_TOOLS["govern"])


def test_a_transcript_result_is_cut_to_4_kb():
    from agentplaza.api.mcp_tools import TRANSCRIPT_RESULT_BYTES, _cut

    entry = {"kind": "tool", "result": "é" * 5000, "meta": [{"out": "x" * 9000}], "n": 3}
    cut = _cut(entry)
    assert len(cut["result"].split(" [cut")[0].encode()) <= TRANSCRIPT_RESULT_BYTES
    assert cut["meta"][0]["out"].endswith("[cut to 4 KB]") and cut["n"] == 3 and cut["kind"] == "tool"
