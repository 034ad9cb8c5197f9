"""``agentplaza mcp serve``, the stdio bridge, driven by the official MCP stdio client as Claude Desktop runs it."""

from __future__ import annotations

import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support.hubproc import HubProcess, cli
from support.mcpclient import cli_json

from agentplaza.api.mcp_tools import TOOLS


def test_login_then_serve_is_a_pipe_to_the_hub(folders):
    h = HubProcess(folders).start()
    try:
        assert cli(h, "mcp", "server", "enable").returncode == 0
        t = cli_json(cli(h, "--json", "mcp", "token", "create", "--name", "desktop", "--scope", "observe"))
        r = cli(h, "mcp", "serve")
        assert r.returncode == 1 and "mcp login" in r.stderr  # no token saved yet
        r = cli(h, "mcp", "login", "--hub", h.url, stdin=t["token"])
        assert r.returncode == 0 and t["token"] not in r.stdout + r.stderr
        saved = folders.config / "mcp-hubs.json"
        assert saved.stat().st_mode & 0o777 == 0o600

        params = StdioServerParameters(command=sys.executable, env=h.env,
                                       args=["-m", "agentplaza.cli.main", "--hub", h.url, "mcp", "serve"])

        async def main():
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                names = [x.name for x in (await s.list_tools()).tools]
                status = await s.call_tool("plaza_status", {})
                return names, status

        names, status = anyio.run(main)
        assert names == [x.name for x in TOOLS if x.scope == "observe"]
        assert status.structured_content["state"] == "running"
        calls = cli_json(cli(h, "--json", "mcp", "calls", "--token-id", t["id"]))["calls"]
        assert [c["tool"] for c in calls] == ["plaza_status"]
    finally:
        h.stop()
