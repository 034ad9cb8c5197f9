"""One harness connection: the hub's side of the guest contract (``vmm.guest.contract``).

One JSON request, one JSON answer, a line each: hello, name, next, model, decide, result, tool, share,
done. An answer is the op's fields; a refusal is ``{"error": {"code", "message"}}`` (the hub's HTTP
shape). The CID is the node's word; the agent, its role, tier and mode are looked up from the plaza's
own records; whatever the guest says about itself is ignored.

Every tool call is checked before it runs (``tooldecide.check_in``: the laws, the permission mode,
approvals, sanctions) and the check is recorded in the transcript with its decision, all in ONE commit
(the unit of work, ``commands.unit``); the call's result is one commit more.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import jhrl
from jhrl.catalog import high_risk
from vmm import trace
from vmm.channel import ChannelClosed, Stream, StreamReset
from vmm.guest import contract
from vmm.guest.contract import error

from .. import gate
from ..commands import agents as ac
from ..commands.unit import Unit
from ..domain import board
from ..domain.agents import LOCAL_NODE, NAME_PROMPT, chosen_name, transcript_id
from ..domain.base import Refusal
from ..domain.files import audience
from ..domain.plaza import HELD_MESSAGE
from . import steering, tooldecide, toollib, tools
from .egress import Refused, url_target
from .files import files_of
from .schema import check

if TYPE_CHECKING:
    from .fleet import AgentRuntime

#: How much of a call's arguments and of a host tool's result the transcript keeps, in characters.
ARGS_SHOWN, RESULT_SHOWN = 500, 2000
#: How much of each field a web tool's result tells beside its output (``contract.RESULT_META``) is kept.
META_SHOWN = 300
#: The guest tools that reach a URL (the egress rules decide the target before the call runs).
WEB_TOOLS = ("vm.fetch", "vm.download")
#: Why an item still running when its agent's harness says hello again ends cancelled: no session holds it.
RECONNECTED = "the harness connected again; the item it was running when its last connection ended is cancelled"

log = logging.getLogger("apid.runtime")


def shown_args(args: dict) -> str:
    return json.dumps(args, sort_keys=True, default=str)[:ARGS_SHOWN]


class HarnessSession:
    """One harness connection: the CID is the node's word; everything else is looked up here."""

    def __init__(self, rt: AgentRuntime, cid: int, st: Stream | None):
        self.rt, self.cid, self.st = rt, cid, st
        self.buf = b""
        self.said_hello = False
        self.taken: str | None = None
        self.taken_from: str | None = None  # who told the running item ("owner": the owner's own chat)
        self.cancelled: str | None = None  # the item cancelled under the harness (STOP ALL, budget exhausted)
        self.cancelled_why = HELD_MESSAGE
        self.cancel_lock = threading.Lock()
        self.steer_seen = 0  # the last transcript entry looked at for the editor's slash commands
        rt.sessions[cid] = self

    def gone(self) -> bool:
        if self.st is None:  # a session driven in process (tests): never gone
            return False
        return self.st._reset is not None or self.st.channel.closed or self.st._remote_closed

    def cancel(self, why: str) -> None:
        with self.cancel_lock:
            item = self.taken
            if item is None:
                return
            self.rt._safely(ac.finish_work, self.rt.ctx_node(), self.cid, item, "cancelled", why)
            self.cancelled, self.taken, self.cancelled_why = item, None, why

    def run(self) -> None:
        try:
            while True:
                line = self._readline()
                if line is None:
                    break
                try:
                    req = gate.loads(line, gate.CHANNEL, "request")
                except gate.OutOfBounds as e:  # what the hub could not record is refused before any op reads it
                    self._send(error(e.code, str(e)))
                    continue
                except gate.NotJson:
                    req = None
                if not isinstance(req, dict):
                    self._send(error("bad_request", "one JSON object a line"))
                    continue
                self._send(self.handle(req))
        except (ChannelClosed, StreamReset):
            pass
        finally:
            # A newer connection of the same agent may have taken over (a restored guest's harness connects
            # again before its old stream is seen gone): then the agent is not offline.
            current = self.rt.sessions.get(self.cid) is self
            if current:
                del self.rt.sessions[self.cid]
            if self.taken is not None:  # the harness went mid-item: the item is cancelled, not lost
                self.rt._safely(ac.finish_work, self.rt.ctx_node(), self.cid, self.taken, "cancelled",
                                "the harness went away during this item")
            if self.said_hello and current:
                self.rt._safely(ac.disconnected, self.rt.ctx_node(), self.cid, "the harness disconnected")
                self.rt.worker_state(self.cid, "offline")

    def _readline(self) -> bytes | None:
        while b"\n" not in self.buf:
            data = self.st.read()
            if not data:
                return None
            self.buf += data
            if len(self.buf) > contract.LINE_BYTES_MAX:
                raise StreamReset("request too long")
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def _send(self, obj: dict) -> None:
        self.st.write(json.dumps(obj).encode() + b"\n")

    def handle(self, req: dict) -> dict:
        op = req.get("op")
        agent = self.rt.agent_of(self.cid)
        if agent is None:
            return error("no_role", f"cid {self.cid} is not an agent of this plaza; it has no role")
        if op != "hello" and not self.said_hello:
            return error("hello_first", "say hello first")
        fn = getattr(self, f"op_{op}", None) if op in contract.OPS else None
        if fn is None:
            return error("unknown_op", f"no op {op!r}")
        if op in contract.ITEM_OPS:
            if self.taken is not None and self.rt.held():
                self.cancel(HELD_MESSAGE)
            if self.cancelled is not None:
                why = self.cancelled_why
                self.rt._entry(self.cid, "error", f"{op} after the item was cancelled: {why}",
                               tool=req.get("tool") if isinstance(req.get("tool"), str) else op)
                return error(contract.ITEM_CANCELLED, f"work item {self.cancelled} was cancelled: {why}",
                             item=self.cancelled)
        try:
            return fn(agent, req)
        except Refusal as r:
            return error(r.code, r.message)
        except (ChannelClosed, StreamReset):  # the harness's stream is gone (a VM slept): the session ends
            raise
        except Exception:  # noqa: BLE001 - a bug answers this request, and the session goes on
            log.exception("harness op %s of agent %s failed", op, self.cid)
            return error("internal", "the hub failed to answer this request; see its log")

    # -- the transcript, in the caller's unit ---------------------------------------------------------
    def entry_in(self, unit: Unit, agent: Any, kind: str, text: str | None = None, tool: str | None = None,
                 detail: dict | None = None) -> None:
        """A transcript entry of this agent, saved with the rest of ``unit``."""
        t = unit.get(transcript_id(agent.id))
        t.add(self.rt.cmds.context(f"agent:{self.cid}"), kind, text=text, tool=tool, detail=detail)
        unit.add(t)

    # -- ops --------------------------------------------------------------------------------------
    def op_hello(self, agent, req: dict) -> dict:
        # Whatever the guest claims (a role, a name, a cid) is ignored: the plaza's record decides.
        claimed = {k: req[k] for k in ("role", "cid", "tier") if k in req}
        self.said_hello = True
        trace.mark(self.cid, "hub: harness hello")
        if agent.working is not None and self.taken is None:  # a new connection: the item the last one ran
            # (the hub restarted under it, or its channel dropped with no one to see it) is over
            self.rt._safely(ac.finish_work, self.rt.ctx_node(), self.cid, agent.working, "cancelled",
                            RECONNECTED)
        ac.connected(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid)
        trace.mark(self.cid, "hub: connected (idle)")
        self.rt.worker_state(self.cid, "available")
        if claimed:
            self.rt._entry(self.cid, "note", "the guest's own claim was ignored", detail={"claimed": claimed},
                           actor=f"node:{agent.node or LOCAL_NODE}")
        out = {"cid": self.cid, "role": agent.role, "tier": agent.tier, "name": agent.name,
               "permission_mode": tooldecide.mode_of(self.rt.hub, agent),
               "tools": tooldecide.offered(self.rt.hub, agent)
               + [e["name"] for e in tooldecide.offered_library(self.rt.hub, agent)]}
        if agent.name is None:  # the plaza asks each new agent to name itself, once
            out["name_prompt"] = NAME_PROMPT.format(role=agent.role)
        return out

    def op_name(self, agent, req: dict) -> dict:
        """The agent's answer to the name prompt: the name in it, else ``role-cid``; once (the owner renames)."""
        name = chosen_name(str(req.get("name") or ""), agent.role, self.cid)
        ac.name_self(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid, name)
        return {"name": name}

    def op_next(self, agent, req: dict) -> dict:
        wait = req.get("wait", 0)
        wait = min(float(wait), contract.MAX_NEXT_WAIT_S) if isinstance(wait, (int, float)) else 0.0
        end = time.monotonic() + wait
        while True:
            if self.gone():  # never hand work to a stream that is already dead (e.g. a VM that slept)
                raise StreamReset("the harness stream is gone")
            if not self.rt.held():
                item = ac.take_work(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid).value
                if item is not None:
                    self.taken, self.cancelled, self.taken_from = item["item"], None, item.get("from")
                    self.steer_seen = steering.last_entry(self.rt.hub.read_models, self.cid)
                    self.rt.worker_state(self.cid, "busy")
                    return {"item": item}
            left = end - time.monotonic()
            if left <= 0 or self.rt._stop.is_set():
                return {"item": None}
            with self.rt._work:
                self.rt._work.wait(min(left, 1.0))

    def op_model(self, agent, req: dict) -> dict:
        if self.rt.held():
            self.rt._entry(self.cid, "error", HELD_MESSAGE, tool="model")
            return error(contract.PLAZA_HELD, HELD_MESSAGE)
        messages = req.get("messages") or []
        changes = self._steered(agent, messages)
        if changes.conversation is not None:
            messages = changes.conversation
        library = {t["name"]: toollib.spec(t) for t in tooldecide.offered_library(self.rt.hub, agent)}
        named = [t for t in req.get("tools") or [] if not toollib.is_library_tool(t)] + list(library)
        result = self.rt.relay.turn(agent, messages, named, library)
        err = contract.error_of(result)
        if err is not None:
            self.rt._entry(self.cid, "error", err["message"], tool="model", detail={"code": err["code"]})
            if err["code"] == contract.BUDGET_EXHAUSTED:  # the guide: the work on that task is cancelled
                self.cancel(err["message"])
            return result
        reply = result["reply"]
        self.rt._entry(self.cid, "model", reply.get("text"), detail={"model": result.get("model"),
            **({"purpose": "name"} if req.get("purpose") == "name" else {}),
            "tool_calls": [{"id": c.get("id"), "name": c.get("name")} for c in reply.get("tool_calls") or []]})
        return {**result, **changes.answer()}

    def _steered(self, agent, messages: list) -> steering.Changes:
        """The editor's slash commands given for the item in progress since the last turn, applied."""
        if self.taken is None or not isinstance(messages, list):
            return steering.Changes()
        given, self.steer_seen = steering.given(self.rt.hub.read_models, self.cid, self.taken, self.steer_seen)
        if not given:
            return steering.Changes()

        def summarise(conversation: list) -> str | None:
            r = self.rt.relay.turn(agent, conversation, [])
            return None if contract.error_of(r) is not None else str((r.get("reply") or {}).get("text") or "")

        changes = steering.apply(given, messages, summarise)
        for line in changes.said:
            self.rt._entry(self.cid, "note", line, detail={"steering": True})
        return changes

    def _decide(self, agent, tool: str, args: dict, call_id: Any, refused: str | None = None) -> dict:
        """The check of one tool call and its transcript entry: one commit. ``refused``: why the egress
        rules refuse the web tool's target (the call is refused after the laws, which still decide it)."""

        def decide(unit: Unit):
            c = tooldecide.check_in(unit, self.rt.hub, agent, tool, args)
            if refused and c.decision.effect != "deny":
                c = dataclasses.replace(c, decision=jhrl.Decision("deny", "egress_refused"),
                                        extra=dict(c.extra, message=f"{tool} refused: {refused}"))
            d = c.decision
            detail = {"effect": d.effect, "reason": d.reason, "law": d.forbidding, "violation": d.violation,
                      "call_id": call_id, "decision_id": c.call_id or None, "mode": c.mode,
                      "approval": c.approval, "approved_by": c.approved, "args": shown_args(args)}
            if c.extra.get("message"):
                detail["refusal"] = c.extra["message"]
            self.entry_in(unit, agent, "tool_call", None, tool=tool, detail=detail)
            return c

        c = self.rt.cmds.run(decide).value
        d = c.decision
        if d.effect == "allow" and high_risk(tool):  # the owner's vm_auto_checkpoints: undo is a rollback away
            self.rt.auto_checkpoint(self.cid, tool, call_id)
        if d.effect == "deny":
            msg = c.extra.get("message") or (f"{tool} refused ({d.reason}" + (f", {d.forbidding}" if d.forbidding else "") + ")")
        elif d.effect == "ask":
            msg = (f"{tool} waits for the owner's approval {c.approval}; once the owner approves it, "
                   "make the same call again with the same input and it runs once")
        else:
            msg = None
        return {"effect": d.effect, "reason": d.reason, "law": d.forbidding, "message": msg, "approval": c.approval}

    def op_decide(self, agent, req: dict) -> dict:
        tool, args = req.get("tool"), req.get("args")
        if not isinstance(tool, str) or not isinstance(args, dict) or not (
                tool.startswith("vm.") or toollib.is_library_tool(tool)):
            return error("bad_request", "decide takes a guest tool (vm.*) or a library tool (x_*) and its args")
        if toollib.is_library_tool(tool):
            return self._decide_library(agent, tool, args, req.get("call_id"))
        refused = None
        url = args.get("url") if tool in WEB_TOOLS else args.get("index_url") if tool == "vm.install" else None
        if url is not None:  # the web tools: the host and port are facts for the laws; the egress rules apply
            host = port = None
            try:
                host, port = url_target(url)
                args = dict(args, host=host, port=port)
                self.rt.egress.precheck(host, port)
            except Refused as r:
                refused = r.why
                self.rt._record_egress(self.cid, {"verdict": "refused", "why": r.why, "host": host, "port": port,
                                                  "tool": tool})
        return self._decide(agent, tool, args, req.get("call_id"), refused)

    def _decide_library(self, agent, tool: str, args: dict, call_id: Any) -> dict:
        """A library tool: only one offered to this agent is decided (the laws: S-004); with the allow
        goes the program, which the harness runs in this agent's own VM."""
        bad = check(toollib.INPUT_SCHEMA, args) or (
            f"args: at most {toollib.MAX_ARGS}" if len(args.get("args") or ()) > toollib.MAX_ARGS else None)
        if bad:
            return error("bad_request", f"{tool}: {bad}")
        try:
            program = toollib.program(self.rt.hub, tool, self.cid)
        except Refusal as r:  # not offered to this agent: said in its transcript, and never decided
            self.rt._entry(self.cid, "error", r.message, tool=tool, detail={"code": r.code, "call_id": call_id})
            raise
        d = self._decide(agent, tool, dict(args, version=program["version"], args=" ".join(args.get("args") or [])),
                         call_id)
        return dict(d, program=program) if d["effect"] == "allow" else d

    def op_result(self, agent, req: dict) -> dict:
        detail = {"ok": bool(req.get("ok")), "call_id": req.get("call_id")}
        meta = req.get("meta")
        if isinstance(meta, dict):  # a web tool's host, status, bytes, time (ms), digest: kept short, typed
            for k in contract.RESULT_META:
                v = meta.get(k)
                if isinstance(v, bool) or v is None:
                    continue
                if isinstance(v, int):
                    detail[k] = v
                elif isinstance(v, str):
                    detail[k] = v[:META_SHOWN]
        self.rt._entry(self.cid, "tool_result", str(req.get("output") or ""), tool=str(req.get("tool")),
                       detail=detail)
        return {}

    def op_tool(self, agent, req: dict) -> dict:
        name, args = req.get("tool"), req.get("args")
        if not isinstance(name, str) or not isinstance(args, dict):
            return error("bad_request", "tool takes a name and args")
        t = tools.tool(name)
        bad = tools.check_args(name, args) if t is not None and t.runs == tools.HOST else None
        if bad:  # args that do not fit the tool's schema never reach the laws (nor the owner's approvals)
            self.rt._entry(self.cid, "error", bad, tool=name, detail={
                "code": "bad_request", "call_id": req.get("call_id"), "args": shown_args(args)})
            return error("bad_request", bad)
        if name == "plaza_agent_propose":  # a fact the hub knows, never the model's word
            args = dict(args, owner_asked=self.taken_from == "owner")
        if name == "plaza_board_post":  # whom it reaches, for the laws (S-055): the hub reads it off the text
            args = dict(args, to="@all" if board.mentions_all(str(args.get("text"))) else "")
        if t is not None and t.facts is not None:  # the plaza's facts about the call (a pull request's ``own``)
            args = dict(args, **t.facts(self, agent, args))
        d = self._decide(agent, name, args, req.get("call_id"))
        if d["effect"] == "ask":
            return error(contract.AWAITING_APPROVAL, d["message"], approval=d["approval"])
        if d["effect"] != "allow":
            return error("refused", d["message"])
        try:
            if t is None or t.handler is None:
                raise Refusal("not_available", f"{name} is not available on this hub yet")
            result = t.handler(self, agent, args)
        except Refusal as r:
            self.rt._entry(self.cid, "tool_result", r.message, tool=name, detail={"ok": False})
            return error(r.code, r.message)
        self.rt._entry(self.cid, "tool_result", json.dumps(result, default=str)[:RESULT_SHOWN], tool=name,
                       detail={"ok": True})
        return {"result": result}

    def op_share(self, agent, req: dict) -> dict:
        """A workspace file into the plaza's file store (``runtime.files``): public, or with ``agents``
        only for the agents named; the answer is its number (f3), which messages, posts and
        ``plaza_file_read`` take."""
        path, content, agents = req.get("path"), req.get("content"), req.get("agents")
        if not isinstance(path, str) or not isinstance(content, str):
            return error("bad_request", "share takes a path and base64 content")
        if agents is not None:
            audience(agents)  # a bad list is refused before the laws see the call
        data = base64.b64decode(content, validate=True)
        if len(data) > contract.MAX_FILE:
            return error("too_large", f"a shared file is at most {contract.MAX_FILE} bytes")
        if not data:
            return error("empty_value", "a shared file holds at least one byte")
        d = self._decide(agent, "vm.share_file", {"path": path, "public": agents is None}, None)
        if d["effect"] != "allow":
            return error("refused", d["message"])
        number = files_of(self.rt.hub).share(self.rt.ctx_agent(self.cid), self.cid, path, data, agents).value
        self.rt._entry(self.cid, "note", f"shared {path} as {number}", tool="vm.share_file",
                       detail={"name": number, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                               "public": agents is None})
        return {"name": number}

    def op_done(self, agent, req: dict) -> dict:
        item, outcome = req.get("item"), req.get("outcome", "done")
        if not isinstance(item, str) or not isinstance(outcome, str):
            return error("bad_request", "done takes an item and an outcome")
        if item == self.cancelled:  # already cancelled by STOP ALL: nothing more to record
            self.cancelled = None
            self.rt.worker_state(self.cid, "available")
            return {"cancelled": True}
        ac.finish_work(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid, item, outcome,
                       str(req.get("text")) if req.get("text") is not None else None)
        if item == self.taken:
            self.taken = None
        self.rt.worker_state(self.cid, "available")
        return {}
