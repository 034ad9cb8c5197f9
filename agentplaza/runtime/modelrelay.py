"""An agent's model turn, relayed to the hub's own model gateway in the Anthropic shape.

The harness sends the conversation in its own small shape (``user`` / ``assistant`` with
``tool_calls`` / ``tool`` results, tools by name). The hub turns it into an Anthropic Messages
request for the agent's resolved model (policy: the agent's own, else its role's, else the tier's
default), and posts it to ``/v1/gateway/<token>/anthropic/v1/messages`` with the placeholder key
``plaza``, so the call passes every step of the gateway (STOP ALL, the tier's policy, the payer,
the key, metering and the charge). The per-agent gateway token lives only in this process's memory
(the store keeps its hash); a hub that restarts issues a new one.

The token's link is on the route "loop", the agent's own loop, and names the task the agent holds
now (it is issued again when that changes): each call is charged to that task's escrow as Spend, a
call with no task is not charged, and a call the escrow cannot cover answers "budget exhausted"
(402) with the reply discarded. ``tool_use`` blocks come back to the
harness as tool calls, their names mapped back (Anthropic tool names have no dots: ``vm.shell`` is
sent as ``vm__shell``). Each tool goes with its description and input schema from ``api.toolspecs``.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

import httpx

from ..api.gateway import (
    GATEWAY_TOKEN_BYTES,
    GATEWAY_TOKEN_PREFIX,
    PLACEHOLDER_KEY,
    token_sha256,
)
from ..api.routes.gateway import GATEWAY_PREFIX
from ..commands import models as model_commands
from ..commands import tasks as tasks_commands
from ..domain.models import LOOP_ROUTE, resolve
from . import toolspecs

#: The longest one model turn may take through the gateway.
MODEL_TURN_TIMEOUT_S = 600.0
#: The answer's length limit asked of the model.
MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"
#: How long a newly issued token waits for the gateway's read model to hold it.
LINK_WAIT_S = 5.0
NO_GATEWAY = "the hub has no HTTP address for its model gateway; no model call was made"


def wire_name(tool: str) -> str:
    return tool.replace(".", "__")


def tool_name(wire: str) -> str:
    return wire.replace("__", ".")


def to_anthropic(messages: list, tools: list) -> tuple[list, list]:
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
    return out, tool_specs(tools)


def tool_specs(tools: list) -> list[dict]:
    """The Anthropic ``tools`` of a turn: each named tool with its description and input schema
    (``api.toolspecs``). A name the hub has no spec for is dropped (no such tool could run), and a
    name given twice is sent once."""
    out, seen = [], set()
    for t in tools:
        s = toolspecs.spec(t) if isinstance(t, str) else None
        if s is None or t in seen:
            continue
        seen.add(t)
        out.append({"name": wire_name(t), "description": s.description, "input_schema": s.input_schema})
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

    def __init__(self, hub: Any, client: Any = None):
        self.hub = hub
        self.client = client or httpx  # anything with httpx's post(): a test gives the app's own client
        self.tokens: dict[int, tuple[str, str | None]] = {}  # cid -> (token, the task its link names)
        self.lock = threading.Lock()

    def base(self) -> str | None:
        addr = getattr(self.hub, "address", "") or ""
        if not addr:
            return None
        return addr.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:")

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
                # the gateway finds callers in its read model: the link must be there before the call
                if positions and not self.hub.read_models.wait_for(positions[-1], LINK_WAIT_S):
                    self.hub.read_models.catch_up()
                held = self.tokens[agent.cid] = (tok, task)
            return held[0]

    def forget(self, cid: int) -> None:
        with self.lock:
            self.tokens.pop(cid, None)

    def model_of(self, agent: Any) -> str:
        policy = model_commands.load(self.hub.commands).policy
        return resolve(policy, agent.role, agent.model).model

    def turn(self, agent: Any, messages: list, tools: list) -> dict:
        base = self.base()
        if base is None:
            return {"ok": False, "error": {"code": "no_gateway", "message": NO_GATEWAY}}
        model = self.model_of(agent)
        msgs, specs = to_anthropic(messages, tools)
        body: dict = {"model": model, "max_tokens": MAX_TOKENS, "messages": msgs}
        if specs:
            body["tools"] = specs
        url = f"{base}{GATEWAY_PREFIX}/{self.token_for(agent, self.task_of(agent))}/anthropic/v1/messages"
        try:
            r = self.client.post(url, json=body, timeout=MODEL_TURN_TIMEOUT_S,
                           headers={"x-api-key": PLACEHOLDER_KEY, "anthropic-version": ANTHROPIC_VERSION})
        except httpx.HTTPError as e:
            return {"ok": False, "error": {"code": "gateway_unreachable", "message": f"the gateway did not answer: {e}"}}
        try:
            data = r.json()
        except ValueError:
            data = {}
        if r.status_code != 200:
            err = data.get("error") if isinstance(data, dict) else None
            err = err if isinstance(err, dict) else {}
            code = "plaza_held" if r.status_code == 423 else str(err.get("code") or err.get("type") or "model_error")
            if r.status_code == 401:  # the token went (revoked, or the link re-issued elsewhere): a new one next turn
                self.forget(agent.cid)
            return {"ok": False, "error": {"code": code, "message": str(err.get("message") or r.text[:500]),
                                           "status": r.status_code}}
        return {"ok": True, "reply": from_anthropic(data), "model": model}
