"""``/acp``: the hub answers editors over ACP (Agent Client Protocol), one WebSocket per editor.

``agentplaza acp`` is the stdio agent the editor starts; it sends each line the editor writes here,
one JSON-RPC message a WebSocket message, and writes back each message the hub sends.  The hub answers
every method (``acp_methods``); its messages are built and checked with the ``agent-client-protocol``
package's own schema.

Before the socket is accepted:

1. the edge (``api/edge.py``): the hub's own ``Host`` and ``Origin`` (a web page never opens it);
2. ACP is on (``acp_enabled``, off by default): otherwise 404, as for an unknown path;
3. local or remote, as the hub's MCP server is bound: a local hub answers this machine only;
4. the caller: the owner token or a hub MCP token (loopback trust and open mode do not count:
   an editor presents a token).  An observe token cannot connect; a bad, revoked or expired token
   is refused.  A token whose allowlist has ``acp:<agent>`` entries drives those agents only.

Each message counts against the token's rate limit, shared with its MCP calls (``mcp_door``), and
goes to the call log as ``acp/<method>`` with a digest of its parameters, never the parameters.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..commands import hub_mcp as mcp_commands
from ..domain.base import Refusal
from ..projections import hub_mcp as rm
from .errors import error_response
from .hub import Hub
from .mcp_door import RATE_PER_MINUTE, Caller, McpDoor, caller_of, digest

if TYPE_CHECKING:
    from . import acp_methods

#: The largest message an editor may send: a prompt with 256 KiB of attached text, and room for its JSON.
MESSAGE_BYTES_MAX = 384 * 1024
#: JSON-RPC's own codes, and the one a plaza refusal answers with (its stable code in ``data``).
RPC_PARSE_ERROR, RPC_INVALID_REQUEST, RPC_METHOD_NOT_FOUND, RPC_INVALID_PARAMS = -32700, -32600, -32601, -32602
RPC_REFUSED = -32000
#: The WebSocket close code of an editor message over the limit.
CLOSE_TOO_BIG = 1009


class AcpDoor:
    """The WebSocket endpoint at ``/acp``; it shares the MCP door's rate limits."""

    def __init__(self, hub: Hub, mcp: McpDoor):
        self.hub, self.mcp = hub, mcp

    async def endpoint(self, websocket: WebSocket) -> None:
        refusal = await anyio.to_thread.run_sync(self.refusal, websocket.scope)
        if isinstance(refusal, tuple):
            await deny(websocket, *refusal)
            return
        await websocket.accept()
        conn = Connection(self, websocket, refusal, websocket.query_params.get("agent") or None)
        await conn.run()

    def refusal(self, scope) -> Caller | tuple[int, str, str]:
        settings = rm.settings(self.hub.read_models)
        if not settings["acp_enabled"]:
            return 404, "not_found", (f"no route {scope.get('path')}: editors over ACP are off on this hub (the owner "
                                      "turns on Editors (ACP), the setting acp_enabled)")
        from .auth import is_loopback

        client = scope.get("client") or (None, None)
        if not settings["remote"] and not is_loopback(client[0]):
            return 403, "mcp_local_only", "the hub answers editors on this machine only (it is local)"
        caller = caller_of(self.hub, scope, dict(settings, mode="secure"))  # an editor always presents a token
        if isinstance(caller, Caller) and caller.scope == "observe":
            return 403, "not_allowed", "an observe token cannot connect over ACP; use an operate or govern token"
        return caller


async def deny(websocket: WebSocket, status: int, code: str, message: str) -> None:
    """Refuse the upgrade with the HTTP status itself where the server can, else close with 4000+status."""
    scope = websocket.scope
    if "websocket.http.response" in (scope.get("extensions") or {}):
        await websocket.send_denial_response(error_response(status, code, message))
    else:
        await websocket.close(code=4000 + status, reason=message[:120])


class Connection:
    """One editor: its caller, the ACP version it speaks, and the sessions it opened."""

    def __init__(self, door: AcpDoor, websocket: WebSocket, caller: Caller, agent: str | None):
        self.door, self.hub, self.ws, self.caller = door, door.hub, websocket, caller
        self.agent_word = agent  # --agent NAME|CID, or None: the orchestrator
        self.protocol: int | None = None
        self.client_caps: dict = {}
        self.sessions: dict[str, acp_methods.Open] = {}
        self.send_lock = anyio.Lock()
        self.next_id = 0
        self.waiting: dict[int, Any] = {}  # our requests to the editor: id -> [event, answer]
        self.tg: anyio.abc.TaskGroup | None = None

    @property
    def governs(self) -> bool:
        return self.caller.scope == "govern"

    async def run(self) -> None:
        with contextlib.suppress(WebSocketDisconnect):
            async with anyio.create_task_group() as tg:
                self.tg = tg
                while True:
                    message = await self.ws.receive()
                    if message["type"] == "websocket.disconnect":
                        break
                    raw = message.get("text")
                    raw = raw.encode() if raw is not None else (message.get("bytes") or b"")
                    if len(raw) > MESSAGE_BYTES_MAX:
                        await self.ws.close(code=CLOSE_TOO_BIG, reason=f"a message is at most {MESSAGE_BYTES_MAX} bytes")
                        break
                    await self.on_message(raw)
                tg.cancel_scope.cancel()

    # -- the wire ---------------------------------------------------------------------------------------
    async def send(self, obj: dict) -> None:
        async with self.send_lock:
            await self.ws.send_text(orjson.dumps(obj).decode())

    async def notify(self, method: str, params: dict) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def ask(self, method: str, params: dict) -> dict | None:
        """A request to the editor, and its answer (None: an error, or the editor went away)."""
        self.next_id += 1
        rid = self.next_id
        slot = [anyio.Event(), None]
        self.waiting[rid] = slot
        try:
            await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            await slot[0].wait()
            return slot[1]
        finally:
            self.waiting.pop(rid, None)

    async def on_message(self, raw: bytes) -> None:
        try:
            msg = orjson.loads(raw)
        except orjson.JSONDecodeError:
            await self.send(_error(None, RPC_PARSE_ERROR, "bad_json", "one JSON-RPC message a line"))
            return
        if not isinstance(msg, dict):
            await self.send(_error(None, RPC_INVALID_REQUEST, "invalid_request", "one JSON-RPC object a message"))
            return
        method, rid = msg.get("method"), msg.get("id")
        if method is None:  # the editor's answer to one of our requests
            slot = self.waiting.get(rid) if isinstance(rid, int) else None
            if slot is not None:
                slot[1] = msg.get("result") if isinstance(msg.get("result"), dict) else None
                slot[0].set()
            return
        if not isinstance(method, str):
            await self.send(_error(rid, RPC_INVALID_REQUEST, "invalid_request", "a method is a string"))
            return
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        self.tg.start_soon(self.answer, rid, method[:80], params, "id" in msg)

    async def answer(self, rid: Any, method: str, params: dict, wants_answer: bool) -> None:
        started = time.monotonic()
        outcome, code, reply = "ok", None, None
        try:
            if not self.door.mcp.limits.take(self.caller.key, self.caller.scope):
                raise Refusal("rate_limited", f"over {RATE_PER_MINUTE[self.caller.scope]} messages a minute at "
                                              f"{self.caller.scope} (shared with MCP calls); wait and send again")
            acp_methods = await methods()
            result = await acp_methods.dispatch(self, method, params)
            reply = {"jsonrpc": "2.0", "id": rid, "result": result}
        except MethodNotFound as e:
            outcome, code = "refused", "method_not_found"
            reply = _error(rid, RPC_METHOD_NOT_FOUND, "method_not_found", str(e))
        except BadParams as e:
            outcome, code = "refused", "invalid_request"
            reply = _error(rid, RPC_INVALID_PARAMS, "invalid_request", str(e))
        except Refusal as r:
            outcome, code = "refused", r.code
            reply = _error(rid, RPC_REFUSED, r.code, r.message)
        except anyio.get_cancelled_exc_class():
            outcome, code = "error", "gone"
            raise
        except Exception:  # noqa: BLE001 - a bug answers this message; the connection goes on
            import logging

            logging.getLogger("apid.acp").exception("ACP %s failed", method)
            outcome, code = "error", "internal"
            reply = _error(rid, RPC_REFUSED, "internal", "the hub failed to answer; see its log")
        finally:
            ms = int((time.monotonic() - started) * 1000)
            with anyio.CancelScope(shield=True):
                await self.record(method, params, outcome, code, ms)
        if wants_answer and reply is not None:
            with contextlib.suppress(Exception):
                await self.send(reply)

    async def record(self, method: str, params: dict, outcome: str, code: str | None, ms: int) -> None:
        ctx = self.hub.commands.context("owner", None, f"acp:{self.caller.key}")
        done = await anyio.to_thread.run_sync(lambda: mcp_commands.record_call(
            self.hub.commands, ctx, self.caller.key, "acp", f"acp/{method}"[:80], digest(params), outcome, code, ms))
        if done.positions and self.door.mcp.settle is not None:
            await self.door.mcp.settle(done.positions[-1])


class MethodNotFound(Exception):
    """A method the hub does not answer (JSON-RPC's -32601)."""


class BadParams(Exception):
    """Parameters the ACP schema refuses (JSON-RPC's -32602)."""


METHODS_MODULE = "agentplaza.api.acp_methods"


async def methods():
    """``acp_methods``, with the ACP SDK's schema it builds and checks messages with (about a second of
    imports): loaded off the event loop by the first message an editor sends, not at the hub's start."""
    loaded = sys.modules.get(METHODS_MODULE)
    if loaded is None:
        loaded = await anyio.to_thread.run_sync(importlib.import_module, METHODS_MODULE)
    return loaded


def _error(rid: Any, rpc_code: int, code: str, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": rpc_code, "message": message,
                                                    "data": {"code": code, "message": message}}}
