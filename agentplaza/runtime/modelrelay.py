"""An agent's model turn, relayed to the hub's own model gateway in the Anthropic shape.

The harness sends the conversation in its own small shape (``user`` / ``assistant`` with
``tool_calls`` / ``tool`` results, tools by name). The hub turns it into an Anthropic Messages
request for the agent's resolved model (policy: the agent's own, else its role's, else the tier's
default), and hands it to the hub's own gateway **in process** with the placeholder key ``plaza``, so
the call passes every step of the gateway (STOP ALL, the tier's policy, the payer, the key, metering
and the charge) without a socket. The runtime does not know the HTTP layer: the hub gives the relay
a ``GatewayCall`` when it starts (``api.main`` makes it from the gateway's in-process entry point). The per-agent gateway token lives only in this process's memory (the store keeps its
hash); a hub that restarts issues a new one.

The token's link is on the route "loop", the agent's own loop, and names the task the agent holds
now (it is issued again when that changes): each call is charged to that task's escrow as Spend, a
call with no task is not charged, and a call the escrow cannot cover answers "budget exhausted"
(402) with the reply discarded. ``tool_use`` blocks come back to the
harness as tool calls, their names mapped back (Anthropic tool names have no dots: ``vm.shell`` is
sent as ``vm__shell``). Each tool goes with its description and input schema from ``runtime.tools``.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal

from vmm.guest.contract import PLACEHOLDER_KEY, error

from ..commands import models as model_commands
from ..commands import tasks as tasks_commands
from ..domain.models import LOOP_ROUTE, resolve
from ..domain.tokens import GATEWAY_TOKEN_BYTES, GATEWAY_TOKEN_PREFIX, token_sha256
from .tools import tool as declared_tool

#: The gateway in process: (the caller's token, an Anthropic Messages body, the request's headers) ->
#: (the HTTP status, the answer's bytes), through every step of the gateway's own route.
GatewayCall = Callable[[str, dict, dict], tuple[int, bytes]]

#: The longest one model turn may take through the gateway: past it the turn fails (``in_process``) and the
#: harness goes on, where a gateway step that never answered would hold the agent for good.
MODEL_TURN_TIMEOUT_S = 600.0
#: The answer's length limit asked of the model.
MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"
NO_GATEWAY = "the hub runs no model gateway in process; no model call was made"


class TurnGivenUp(TimeoutError):
    """A model turn past its limit (``in_process``), in words for the harness."""


def in_process(portal: BlockingPortal, call: Callable[[str, dict, dict], Awaitable[tuple[int, bytes]]],
               timeout_s: float = MODEL_TURN_TIMEOUT_S) -> GatewayCall:
    """A ``GatewayCall`` from the gateway's in-process entry point ``call``, run on the hub's event loop through
    ``portal`` from a runtime thread, and given up (``TurnGivenUp``) after ``timeout_s``."""

    async def bounded(token: str, body: dict, headers: dict) -> tuple[int, bytes]:
        with anyio.move_on_after(timeout_s):
            return await call(token, body, headers)
        raise TurnGivenUp(f"the gateway did not answer within {timeout_s:g} s; the turn was given up")

    def relayed(token: str, body: dict, headers: dict) -> tuple[int, bytes]:
        return portal.call(bounded, token, body, headers)

    return relayed


def wire_name(tool: str) -> str:
    return tool.replace(".", "__")


def tool_name(wire: str) -> str:
    return wire.replace("__", ".")


def to_anthropic(messages: list, tools: list, library: dict | None = None) -> tuple[list, list]:
    out: list[dict] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "user":
            out.append({"role": "user", "content": str(m.get("content") or "")})
        elif role == "assistant":
            blocks: list[dict] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": str(m["content"])})
            for c in m.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": str(c.get("id")), "name": wire_name(str(c.get("name"))),
                               "input": c.get("args") if isinstance(c.get("args"), dict) else {}})
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": str(m.get("tool_call_id")), "content": str(m.get("content") or "")}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return out, tool_specs(tools, library)


def tool_specs(tools: list, library: dict | None = None) -> list[dict]:
    """The Anthropic ``tools`` of a turn: each named tool with its description and input schema
    (``runtime.tools``, or ``library``: the specs of the library tools the agent is offered now). A name
    the hub has no spec for is dropped (no such tool could run), and a name given twice is sent once."""
    out, seen = [], set()
    for t in tools:
        if not isinstance(t, str) or t in seen:
            continue
        s = declared_tool(t)
        if s is not None:
            out.append({"name": wire_name(t), "description": s.description, "input_schema": s.input_schema})
        elif library and t in library:
            out.append(dict(library[t], name=wire_name(t)))
        else:
            continue
        seen.add(t)
    return out


def from_anthropic(body: dict) -> dict:
    text, calls = [], []
    for b in body.get("content") or []:
        if b.get("type") == "text":
            text.append(b.get("text") or "")
        elif b.get("type") == "tool_use":
            calls.append({"id": b.get("id"), "name": tool_name(str(b.get("name"))), "args": b.get("input") or {}})
    return {"text": "".join(text), "tool_calls": calls, "model": body.get("model"), "stop": body.get("stop_reason"),
            "usage": body.get("usage")}


class ModelRelay:
    """One per runtime: the agents' gateway tokens (memory only) and the relay itself."""

    def __init__(self, hub: Any, gateway: GatewayCall | None = None):
        self.hub = hub
        self.gateway = gateway  # None: a runtime with no gateway (tests of the node); turns are refused
        self.tokens: dict[int, tuple[str, str | None]] = {}  # cid -> (token, the task its link names)
        self.lock = threading.Lock()

    def task_of(self, agent: Any) -> str | None:
        """The task the agent holds now, to do or to review (the scheduler's record), or None."""
        w = tasks_commands.worker(self.hub.commands, str(agent.cid))
        return w.task if w is not None else None

    def token_for(self, agent: Any, task: str | None = None) -> str:
        with self.lock:
            held = self.tokens.get(agent.cid)
            if held is None or held[1] != task:
                tok = GATEWAY_TOKEN_PREFIX + secrets.token_urlsafe(GATEWAY_TOKEN_BYTES)
                cmds = self.hub.commands
                why = f"gateway token for agent {agent.cid}" + (f" on task {task}" if task else "")
                positions = model_commands.issue_link(cmds, cmds.context("hub", why), str(agent.cid), agent.role,
                                                      token_sha256(tok), agent.model, task, LOOP_ROUTE).positions
                # the gateway finds callers in its read model: the link must be there before the call (folded
                # here when the follower has not yet: waiting for it cost up to its poll, nothing here kicks it)
                if positions and self.hub.read_models.position() < positions[-1]:
                    self.hub.read_models.catch_up()
                held = self.tokens[agent.cid] = (tok, task)
            return held[0]

    def forget(self, cid: int) -> None:
        with self.lock:
            self.tokens.pop(cid, None)

    def model_of(self, agent: Any) -> str:
        policy = model_commands.load(self.hub.commands).policy
        return resolve(policy, agent.role, agent.model).model

    def turn(self, agent: Any, messages: list, tools: list, library: dict | None = None) -> dict:
        """One model turn of the agent: ``{"reply", "model"}``, or a refusal (the guest contract's shape)."""
        gateway = self.gateway
        if gateway is None:
            return error("no_gateway", NO_GATEWAY)
        model = self.model_of(agent)
        msgs, specs = to_anthropic(messages, tools, library)
        body: dict = {"model": model, "max_tokens": MAX_TOKENS, "messages": msgs}
        if specs:
            body["tools"] = specs
        token = self.token_for(agent, self.task_of(agent))
        try:
            status, raw = gateway(token, body, {"x-api-key": PLACEHOLDER_KEY, "anthropic-version": ANTHROPIC_VERSION})
        except TurnGivenUp as e:
            return error("gateway_unreachable", str(e))
        except Exception as e:  # noqa: BLE001 - the hub going away mid-turn, say: the turn fails, the harness lives
            return error("gateway_unreachable", f"the gateway did not answer: {type(e).__name__}: {e}")
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            data = {}
        if status != 200:
            err = data.get("error") if isinstance(data, dict) else None
            err = err if isinstance(err, dict) else {}
            code = "plaza_held" if status == 423 else str(err.get("code") or err.get("type") or "model_error")
            if status == 401:  # the token went (revoked, or the link re-issued elsewhere): a new one next turn
                self.forget(agent.cid)
            return error(code, str(err.get("message") or raw[:500].decode(errors="replace")), status=status)
        return {"reply": from_anthropic(data), "model": model}
