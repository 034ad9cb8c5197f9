"""The MCP SDK's server behind the hub's door (``mcp_door``): its tool list and tool calls.

Loaded by the door on the first request that passes it (the SDK is most of a second of imports), so
a hub whose MCP server is off, or not yet called, never loads it.  Each tool call is checked against
the caller's scope and allowlist (a hidden tool is refused as unknown), the rate limit, and STOP ALL
for a tool that changes the plaza; then it runs (``mcp_tools``) and one line goes to the call log: the
caller, the tool, a digest of the arguments, the outcome and the time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from ..commands import hub_mcp as commands
from ..domain.base import Refusal
from ..projections.plaza import state_view
from .hub import VERSION
from .inner import Inner, RouteRefused
from .mcp_door import CALLER_KEY, RATE_PER_MINUTE, Caller, digest
from .mcp_tools import BY_NAME, ROUTES_USED, TOOLS, Call

if TYPE_CHECKING:
    from .mcp_door import McpDoor

#: JSON-RPC codes of a refused call: a tool this caller cannot see is an unknown tool.
RPC_UNKNOWN_TOOL = types.INVALID_PARAMS
RPC_REFUSED = -32000
SERVER_NAME = "agentplaza"


def manager_of(door: McpDoor) -> StreamableHTTPSessionManager:
    """The SDK's session manager (not yet running) for the door's tools."""
    tools = Tools(door)
    server = Server(SERVER_NAME, version=VERSION, on_list_tools=tools.list_tools, on_call_tool=tools.call_tool)
    return StreamableHTTPSessionManager(app=server, json_response=True)


def authenticated(caller: Caller) -> AuthenticatedUser:
    """What the SDK binds a session to (``scope["user"]``): the caller that opened it."""
    return AuthenticatedUser(AccessToken(token=caller.key, client_id=caller.key, scopes=[caller.scope]))


class Tools:
    """The SDK's handlers: the door's hub, rate limits and app."""

    def __init__(self, door: McpDoor):
        self.door, self.hub = door, door.hub

    async def list_tools(self, ctx, params) -> types.ListToolsResult:
        caller: Caller = ctx.request.scope[CALLER_KEY]
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                       output_schema={"type": "object"}) for t in TOOLS if caller.sees(t)])

    async def call_tool(self, ctx, params) -> types.CallToolResult:
        caller: Caller = ctx.request.scope[CALLER_KEY]
        started = time.monotonic()
        name, args = params.name, dict(params.arguments or {})
        outcome, code = "ok", None
        try:
            return await self.run_tool(caller, name, args)
        except MCPError as e:
            outcome, code = "refused", (e.data or {}).get("code")
            raise
        except _ToolRefused as e:
            outcome, code = "refused", e.code
            return e.result
        except BaseException:
            outcome, code = "error", "internal"
            raise
        finally:
            ms = int((time.monotonic() - started) * 1000)
            ctx_ = self.hub.commands.context("owner", None, f"mcp:{caller.key}")
            with anyio.CancelScope(shield=True):
                done = await anyio.to_thread.run_sync(lambda: commands.record_call(
                    self.hub.commands, ctx_, caller.key, "mcp", name[:80], digest(args), outcome, code, ms))
                if done.positions:
                    await self.door.settle(done.positions[-1])

    async def run_tool(self, caller: Caller, name: str, args: dict) -> types.CallToolResult:
        tool = BY_NAME.get(name)
        if tool is None or not caller.sees(tool):
            raise _rpc(RPC_UNKNOWN_TOOL, "unknown_tool", f"no tool {name[:80]!r} for this token")
        if not self.door.limits.take(caller.key, caller.scope):
            raise _rpc(RPC_REFUSED, "rate_limited", f"over {RATE_PER_MINUTE[caller.scope]} calls a minute at "
                                                    f"{caller.scope}; wait and call again")
        try:
            if tool.changes and tool.name != "stop_agent":
                plaza = await anyio.to_thread.run_sync(state_view, self.hub.read_models)
                if plaza.get("held"):
                    raise Refusal("plaza_held", "the plaza is held (STOP ALL); nothing changes until the owner "
                                                "resumes it")
            inner = Inner(self.door.app, self.hub.commands, self.door.settle, f"mcp:{caller.key}", ROUTES_USED,
                          reason=f"over MCP: {tool.name}")
            data, summary = await tool.run(Call(inner, caller.key, args))
        except (Refusal, RouteRefused) as r:
            raise _ToolRefused(r.code, r.message) from None
        structured = data if isinstance(data, dict) else {"result": data}
        return types.CallToolResult(content=[types.TextContent(type="text", text=summary)],
                                    structured_content=structured)


class _ToolRefused(Exception):
    """A plaza refusal: the tool ran and the plaza said no (an error result, with the stable code)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        error = {"error": {"code": code, "message": message}}
        self.result = types.CallToolResult(content=[types.TextContent(type="text", text=f"{code}: {message}")],
                                           structured_content=error, is_error=True)


def _rpc(rpc_code: int, code: str, message: str) -> MCPError:
    return MCPError(rpc_code, message, {"code": code, "message": message})

