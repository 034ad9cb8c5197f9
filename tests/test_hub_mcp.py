"""The hub as an MCP server, black-box: a real apid, the official ``mcp`` client, the CLI (docs/mcp.md)."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from support.hubproc import HubProcess, cli
from support.mcpclient import cli_json, session, tool_names

from agentplaza.api.mcp_tools import TOOLS

OBSERVE = [t.name for t in TOOLS if t.scope == "observe"]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def owner(h: HubProcess) -> dict:
    return {"Authorization": "Bearer " + (h.folders.state / "owner-token").read_text().strip()}


def token(h: HubProcess, *args: str) -> dict:
    return cli_json(cli(h, "--json", "mcp", "token", "create", *args))


@pytest.fixture
def hub(folders):
    h = HubProcess(folders).start()
    yield h
    h.stop()


def test_off_until_enabled_then_secure_and_browser_pages_kept_out(hub):
    c = hub.client()
    assert c.post("/mcp", json=INIT, headers=ACCEPT).status_code == 404  # off on a new install: nothing answers
    r = cli(hub, "mcp", "server", "enable", "--remote")
    assert r.returncode == 1 and "remote_needs_https" in r.stderr and "HTTPS" in r.stderr
    status = cli(hub, "mcp", "server", "enable")
    assert status.returncode == 0, status.stderr
    assert "on, local" in status.stdout and f"{hub.url}/mcp" in status.stdout and "claude mcp add" in status.stdout
    # Secure: no token, no entry; loopback trust (which lets this machine's CLI in) does not count here.
    r = c.post("/mcp", json=INIT, headers=ACCEPT)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    t = token(hub, "--name", "laptop", "--scope", "observe")
    auth = {**ACCEPT, "Authorization": "Bearer " + t["token"]}
    assert c.post("/mcp", json=INIT, headers=auth).status_code == 200
    # A web page in the owner's browser: its Origin is refused, token or not (DNS rebinding, drive-by pages).
    for origin in ("https://evil.example", "null", hub.url.replace("127.0.0.1", "localhost")):
        r = c.post("/mcp", json=INIT, headers={**auth, "Origin": origin})
        assert r.status_code == 403 and r.json()["error"]["code"] == "foreign_origin", origin
    assert c.post("/mcp", json=INIT, headers={**auth, "Origin": hub.url}).status_code == 200  # the hub's own
    # An origin the owner adds (the console's tab) is let in; still with a token.
    r = c.patch("/v1/hub-mcp/settings", json={"origins": ["https://tools.example"]}, headers=owner(hub))
    assert r.status_code == 200 and r.json()["origins"]["added"] == ["https://tools.example"]
    assert c.post("/mcp", json=INIT, headers={**auth, "Origin": "https://tools.example"}).status_code == 200
    assert c.post("/mcp", json=INIT, headers={**ACCEPT, "Origin": "https://tools.example"}).status_code == 401
    # ... and that page may read the answers (CORS naming that origin alone), after its preflight
    pre = c.options("/mcp", headers={"Origin": "https://tools.example", "Access-Control-Request-Method": "POST",
                                     "Access-Control-Request-Headers": "authorization, content-type"})
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "https://tools.example"
    assert "authorization" in pre.headers["access-control-allow-headers"] and "POST" in pre.headers[
        "access-control-allow-methods"]
    r = c.post("/mcp", json=INIT, headers={**auth, "Origin": "https://tools.example"})
    assert r.headers["access-control-allow-origin"] == "https://tools.example"
    assert "mcp-session-id" in r.headers["access-control-expose-headers"]
    for other in ({"Origin": "https://evil.example"}, {}, {"Origin": hub.url}):  # never for anyone else
        pre = c.options("/mcp", headers={**other, "Access-Control-Request-Method": "POST"})
        assert pre.status_code in (403, 404) and "access-control-allow-origin" not in pre.headers, other
        r = c.post("/mcp", json=INIT, headers={**auth, **other})
        assert "access-control-allow-origin" not in r.headers, other
    # The rest of the hub keeps its own rule: that origin is nobody's at /v1.
    assert c.get("/v1/hub", headers={"Origin": "https://tools.example"}).status_code == 403
    assert cli(hub, "mcp", "server", "disable").returncode == 0
    assert c.post("/mcp", json=INIT, headers=auth).status_code == 404


def test_observe_token_lists_its_tools_calls_and_is_logged_then_revoked(folders, database_url):
    h = HubProcess(folders, database_url).start()
    try:
        assert cli(h, "mcp", "server", "enable").returncode == 0
        t = token(h, "--name", "laptop", "--scope", "observe")
        assert t["token"].startswith("apz_mcp_") and t["scope"] == "observe"
        listed = cli_json(cli(h, "--json", "mcp", "token", "list"))["tokens"]
        assert [x["name"] for x in listed] == ["laptop"] and t["token"] not in json.dumps(listed)
        assert "sha256" not in listed[0]

        async def body(s):
            names = await tool_names(s)
            status = await s.call_tool("plaza_status", {})
            with pytest.raises(MCPError) as refused:
                await s.call_tool("create_task", {"title": "secret words here", "acceptance": "x"})
            return names, status, refused.value

        names, status, refused = session(h.url, t["token"], body)
        assert names == OBSERVE
        assert status.is_error is False and status.structured_content["state"] == "running"
        assert "plaza running" in status.content[0].text
        assert refused.data["code"] == "unknown_tool"
        calls = cli_json(cli(h, "--json", "mcp", "calls", "--token-id", t["id"]))["calls"]
        assert [(c["tool"], c["outcome"]) for c in calls] == [("create_task", "refused"), ("plaza_status", "ok")]
        assert all(len(c["digest"]) == 64 for c in calls) and "secret words" not in json.dumps(calls)
        assert cli_json(cli(h, "--json", "mcp", "calls", "--tool", "plaza_status"))["calls"][0]["tool"] == \
            "plaza_status"

        # Revoked: refused at once, on the very next call of a session already open.
        async def revoked_mid_session(s):
            await s.call_tool("plaza_status", {})
            assert cli(h, "mcp", "token", "revoke", t["id"]).returncode == 0
            with pytest.raises(Exception) as e:
                await s.call_tool("plaza_status", {})
            return e.value

        session(h.url, t["token"], revoked_mid_session)
        r = httpx.post(h.url + "/mcp", json=INIT, headers={**ACCEPT, "Authorization": "Bearer " + t["token"]})
        assert r.status_code == 401 and r.json()["error"]["code"] == "token_revoked"
    finally:
        h.stop()


def test_operate_allowlist_writes_through_the_commands_and_stop_all_holds_it(hub):
    assert cli(hub, "mcp", "server", "enable").returncode == 0
    t = token(hub, "--name", "ci", "--scope", "operate", "--tools", "create_task,list_agents", "--expires", "30d")
    assert t["tools"] == ["create_task", "list_agents"] and t["expires_at"]

    async def body(s):
        names = await tool_names(s)
        made = await s.call_tool("create_task", {"title": "Write the MCP docs", "acceptance": "docs/mcp.md exists"})
        with pytest.raises(MCPError) as hidden:
            await s.call_tool("plaza_status", {})  # in its scope, but not on its list
        bad = await s.call_tool("create_task", {"title": "", "acceptance": "x"})  # the route's own check
        return names, made, hidden.value, bad

    names, made, hidden, bad = session(hub.url, t["token"], body)
    assert names == ["list_agents", "create_task"]
    assert made.is_error is False and made.structured_content["title"] == "Write the MCP docs"
    assert hidden.data["code"] == "unknown_tool"
    assert bad.is_error and bad.structured_content["error"]["code"]
    c = hub.client()
    tasks = c.get("/v1/tasks").json()["tasks"]
    assert [x["title"] for x in tasks] == ["Write the MCP docs"]
    events = [m["data"] for m in c.get("/v1/events", params={"limit": 1000}).json()["events"]]
    created = [e for e in events if e["kind"].startswith("Task.") and e["correlation_id"].startswith("mcp:")]
    assert created and all(e["correlation_id"].startswith(f"mcp:token:{t['id']}") for e in created)

    assert cli(hub, "plaza", "stop", "--reason", "test the hold", "--yes").returncode == 0

    async def held(s):
        return await s.call_tool("create_task", {"title": "During the hold", "acceptance": "none"})

    r = session(hub.url, t["token"], held)
    assert r.is_error and r.structured_content["error"]["code"] == "plaza_held"
    assert [x["title"] for x in c.get("/v1/tasks").json()["tasks"]] == ["Write the MCP docs"]


def test_open_mode_lets_anonymous_in_at_observe_rate_limited_and_a_bad_token_still_refused(hub):
    c = hub.client()
    assert cli(hub, "mcp", "server", "enable").returncode == 0
    r = c.patch("/v1/hub-mcp/settings", json={"mode": "open"}, headers=owner(hub))
    assert r.status_code == 200 and r.json()["auth"] == {"mode": "open", "open_scope": "observe"}
    assert any("open mode" in w for w in r.json()["warnings"])

    async def body(s):
        names = await tool_names(s)
        for _ in range(60):
            assert (await s.call_tool("plaza_status", {})).is_error is False
        with pytest.raises(MCPError) as limited:
            await s.call_tool("plaza_status", {})
        return names, limited.value

    names, limited = session(hub.url, None, body)
    assert names == OBSERVE
    assert limited.data["code"] == "rate_limited"
    calls = c.get("/v1/hub-mcp/calls", params={"tool": "plaza_status", "limit": 1000}).json()["calls"]
    assert len(calls) == 61 and {x["caller"] for x in calls} == {"address:127.0.0.1"}
    assert calls[0]["outcome"] == "refused" and calls[0]["code"] == "rate_limited"
    r = c.post("/mcp", json=INIT, headers={**ACCEPT, "Authorization": "Bearer apz_mcp_not-a-real-one"})
    assert r.status_code == 401


def test_propose_agent_files_an_approval_and_a_govern_recommendation_decides_nothing(hub):
    assert cli(hub, "mcp", "server", "enable").returncode == 0
    operate = token(hub, "--name", "ops", "--scope", "operate")
    govern = token(hub, "--name", "gov", "--scope", "govern")

    async def propose(s):
        assert "request_decision" not in await tool_names(s)
        return await s.call_tool("propose_agent", {"role": "builder", "why": "more hands"})

    filed = session(hub.url, operate["token"], propose)
    assert filed.is_error is False, filed.structured_content
    number = filed.structured_content["approval"]
    c = hub.client()
    assert c.get(f"/v1/approvals/{number}").json()["status"] == "pending"

    async def recommend(s):
        assert "request_decision" in await tool_names(s)
        ok = await s.call_tool("request_decision", {"approval": number, "recommendation": "approve",
                                                    "note": "we need a builder"})
        missing = await s.call_tool("request_decision", {"approval": "a999", "recommendation": "deny"})
        return ok, missing

    ok, missing = session(hub.url, govern["token"], recommend)
    assert ok.structured_content == {"approval": number, "recommendation": "approve", "decided": False}
    assert missing.is_error and missing.structured_content["error"]["code"] == "no_approval"
    assert c.get(f"/v1/approvals/{number}").json()["status"] == "pending"  # the owner still decides
    recs = c.get("/v1/hub-mcp/recommendations", params={"approval": number}).json()["recommendations"]
    assert [(r["verdict"], r["caller"]) for r in recs] == [("approve", f"token:{govern['id']}")]


def test_every_built_observe_tool_answers_and_the_owner_token_is_govern(hub):
    assert cli(hub, "mcp", "server", "enable").returncode == 0
    owner_token = owner(hub)["Authorization"].split(" ", 1)[1]
    plain = ["plaza_status", "list_agents", "list_tasks", "list_approvals", "list_machines", "treasury_summary",
             "usage_summary", "list_laws"]

    async def body(s):
        names = await tool_names(s)
        answers = {n: await s.call_tool(n, {}) for n in plain}
        answers["get_transcript"] = await s.call_tool("get_transcript", {"cid": 999})
        answers["list_board"] = await s.call_tool("list_board", {})
        answers["post_board"] = await s.call_tool("post_board", {"text": "hello from MCP"})
        answers["reply"] = await s.call_tool("post_board", {"text": "and a reply", "reply_to": "p1"})
        answers["search_library"] = await s.call_tool("search_library", {"query": "report"})
        answers["list_projects"] = await s.call_tool("list_projects", {})
        return names, answers

    names, answers = session(hub.url, owner_token, body)
    assert names == [t.name for t in TOOLS]
    for n in plain:
        assert answers[n].is_error is False and answers[n].content[0].text, (n, answers[n].structured_content)
    assert answers["get_transcript"].is_error  # no agent 999: the route's own refusal, not a crash
    assert answers["get_transcript"].structured_content["error"]["code"] != "internal"
    assert answers["list_board"].structured_content["posts"] == []
    assert answers["post_board"].structured_content["id"] == "p1", answers["post_board"].structured_content
    assert answers["reply"].is_error is False, answers["reply"].structured_content
    assert answers["search_library"].structured_content == {"items": []}
    assert answers["list_projects"].structured_content == {"projects": []}
    with hub.client() as c:
        posts = c.get("/v1/board").json()["posts"]
    assert [(p["id"], p["text"]) for p in posts] == [("p1", "hello from MCP")]
