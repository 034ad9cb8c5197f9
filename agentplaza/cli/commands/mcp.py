"""agentplaza mcp: the hub as an MCP server — server enable|disable|status, token create|list|revoke,
calls, and the stdio bridge (login, serve) that Claude Desktop runs.  See docs/mcp.md."""

from __future__ import annotations

import sys

from .. import mcp_bridge
from ..actions import Action, Area, arg, choose
from ..env import Env
from ..output import pairs, refuse, table

TOKEN_COLUMNS = ["id", "name", "scope", "tools", "expires_at", "created_at", "revoked_at", "calls", "last_call_at"]
CALL_COLUMNS = ["at", "caller", "tool", "digest", "outcome", "code", "ms"]


def render_status(d: dict) -> str:
    out = pairs({
        "server": d["state"], "bind": d["bind"], "url": d["url"],
        "auth": d["auth"]["mode"] + (f" (anonymous at {d['auth']['open_scope']})" if d["auth"]["mode"] == "open"
                                     else ""),
        "allowed origins": ", ".join(d["origins"]["own"] + d["origins"]["added"]) or "-",
        "rate limits": ", ".join(f"{k} {v}/min" for k, v in d["rate_per_minute"].items()),
    })
    warnings = "".join(f"\nwarning: {w}" for w in d["warnings"])
    return out + f"\n\nClaude Code:\n  {d['claude_code']}" + warnings


def server(env: Env) -> int:
    a, c = env.args, env.client
    if a.server_action in (None, "status"):
        return env.show(c.get("/v1/hub-mcp"), render_status)
    if a.server_action == "enable":
        return env.show(c.post("/v1/hub-mcp/enable", {"remote": bool(a.remote)}), render_status)
    return env.show(c.post("/v1/hub-mcp/disable", {}), render_status)


def render_token(d: dict) -> str:
    return (f"token {d['name']} ({d['scope']}), id {d['id']}:\n  {d['token']}\n"
            "It is shown once; the hub keeps only its hash. Copy it somewhere safe.")


def token(env: Env) -> int:
    a, c = env.args, env.client
    if a.token_action in (None, "list"):
        return env.show(c.get("/v1/hub-mcp/tokens"), lambda d: table(d["tokens"], TOKEN_COLUMNS) if d["tokens"]
                        else "no MCP tokens")
    if a.token_action == "create":
        body = {"name": a.name, "scope": a.scope,
                "tools": [t.strip() for t in (a.tools or "").split(",") if t.strip()]}
        if a.expires:
            body["expires"] = a.expires
        return env.show(c.post("/v1/hub-mcp/tokens", body), render_token)
    d = c.request("DELETE", f"/v1/hub-mcp/tokens/{a.id}")
    return env.show(d, lambda d: f"revoked {d['revoked']['name']} ({d['revoked']['id']}); it is refused from now on")


def login(env: Env) -> int:
    if sys.stdin.isatty():
        print("paste the hub MCP token, then press Enter:", file=sys.stderr)
    value = sys.stdin.readline().strip()
    hub = env.target.url  # the global --hub (or APZ_HUB, or the saved hub in use), as the guide writes it
    try:
        path = mcp_bridge.save_token(hub, value)
    except ValueError as e:
        return refuse(str(e), "invalid_request")
    print(f"saved the MCP token for {mcp_bridge.normal_hub(hub)} in {path}")
    return 0


def serve(env: Env) -> int:
    hub = env.target.url
    try:
        return mcp_bridge.serve(hub)
    except LookupError as e:
        return refuse(str(e), "not_logged_in")


AREA = Area("mcp", "the hub as an MCP server: its status, turning it on and off, tokens, and the stdio bridge", (
    Action("server", "turn the hub's MCP server on or off, or show its status", run=server, default=True,
           args=(choose("server_action", enable=(arg("--remote", action="store_true",
                                                     help="answer other machines too (needs HTTPS)"),),
                        disable=(), status=()),)),
    Action("token", "make, list and revoke hub MCP tokens", run=token, args=(choose(
        "token_action",
        create=(arg("--name", required=True), arg("--scope", required=True, choices=["observe", "operate", "govern"]),
                arg("--tools", help="an allowlist: tool names and acp:<agent> entries, comma-separated"),
                arg("--expires", help="e.g. 30d, 12h, 90m")),
        list=(), revoke=(arg("id"),)),)),
    Action("calls", "the call log: each call's caller, tool, digest of its arguments, outcome and time",
           "GET", "/v1/hub-mcp/calls", args=(arg("--token-id", help="only the calls made with this hub MCP token (its id)"),
                                         arg("--tool"), arg("--limit", type=int)),
           query=lambda a: {"token": a.token_id, "tool": a.tool, "limit": a.limit},
           render=lambda d: table(d["calls"], CALL_COLUMNS) if d["calls"] else "no calls yet"),
    Action("login", "save a hub MCP token for the bridge (read from standard input; the hub is --hub's)",
           run=login),
    Action("serve", "the stdio bridge Claude Desktop runs: a pipe to the hub's /mcp", run=serve),
))
