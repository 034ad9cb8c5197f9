"""The agents' runtime in the hub: node n0, the guests' streams, and each harness's requests.

- **Node n0.** For a local plaza the hub starts ``noded`` as its child and connects to it
  (``adapters.kvm.link``). The node's facts are kept live (``/v1/nodes``), not as events.
- **Reconcile.** A thread keeps the node's machines where the owner's commands put the agents: a
  running agent has a machine (booted anew after a restart; with a new workspace after a wipe or when
  its CID names a new agent); a stopped or retired agent has none; a deleted agent's files go.
- **Roles come from the hub.** A guest stream carries the CID the *node* knows the guest by. The
  agent, its role, tier and mode are looked up from the plaza's own records by that CID; whatever the
  guest says about itself is ignored. A CID the plaza never gave out has no role, and its streams are
  refused.
- **The harness.** One JSON request, one JSON answer, a line each (see ``vmm/guest/harness.py``):
  hello, name, next, model, decide, result, tool, share, done. Every tool call is decided by the laws
  (``commands.laws.decide_call``) before it runs and recorded in the transcript with the decision.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from vmm.channel import ChannelClosed, Stream, StreamReset

from .. import gate
from ..adapters.kvm.link import NodeError, NodeLink, start_local_node, wait_gone
from ..commands import agents as ac
from ..commands import approvals
from ..commands import models as model_commands
from ..commands import plaza as plaza_commands
from ..commands import tasks as tasks_commands
from ..domain.agents import (
    LOCAL_NODE,
    NAME_PROMPT,
    check_count,
    chosen_name,
    node_id,
)
from ..domain.base import Refusal
from ..domain.plaza import HELD_MESSAGE
from ..projections import work as work_rm
from ..projections.agents import agents_table
from . import tooldecide, toolspecs
from .egress import EgressPolicy, EgressProxy, Refused
from .modelrelay import ModelRelay
from .toolspecs import (  # the tools, with their specs
    GUEST_TOOLS,
    HOST_TOOLS,
    MAX_TASK_LIST,
)

log = logging.getLogger("apid.runtime")

#: After a machine failed to boot, wait this long before trying again.
BOOT_RETRY_S = 30.0
#: The longest a harness's ``next`` waits for work before it asks again.
MAX_NEXT_WAIT_S = 30.0
#: Largest file an agent shares.
MAX_SHARE_BYTES = 1 << 20
#: The longest request line a harness sends (a shared file, base64, fits); a longer one resets the stream.
CHANNEL_LINE_BYTES_MAX = 4 << 20
#: The requests a harness makes inside a work item (refused once the item was cancelled).
ITEM_OPS = ("model", "decide", "result", "tool", "share")
#: The longest the hub waits for the node to list or remove templates.
NODE_QUERY_TIMEOUT_S = 60.0
#: A warm template's key: a hash the node gives it.
TEMPLATE_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
#: The own loop's refusal of a call its task's escrow cannot cover: the item is cancelled.
BUDGET_EXHAUSTED = "budget_exhausted"


class AgentRuntime:
    def __init__(self, hub: Any, *, node: str = "local", images_dir: str | None = None,
                 egress: EgressPolicy | None = None):
        self.hub = hub
        self.mode = node
        self.images_dir = images_dir
        self.proc = None
        self.link: NodeLink | None = None
        self.applied: dict[int, tuple] = {}      # cid -> (agent_id, generation, wipes) running now
        self.failed: dict[int, tuple] = {}       # cid -> (key, when) of a failed boot
        self.busy: set[int] = set()              # cids with a node request in flight
        self.asleep: set[int] = set()            # cids whose machine is saved and stopped
        self._kick = threading.Event()
        self._work = threading.Condition()
        self._stop = threading.Event()
        self.lock = threading.Lock()
        self.egress = EgressProxy(egress or EgressPolicy(), self._decide_egress, self._record_egress,
                                  blocklist=self._fetch_blocklist)
        self.shared_dir = Path(hub.folders.state) / "shared"
        self.relay = ModelRelay(hub)
        self.sessions: dict[int, HarnessSession] = {}
        self.delivered: set[tuple] = set()       # (task, phase, cid) already a work item (or claimed by the agent)
        self.facts: dict = {}

    # -- life -------------------------------------------------------------------------------------
    def start(self) -> AgentRuntime:
        if self.mode == "local":
            self.proc, sock = start_local_node(self.hub.folders.state, self.hub.folders.data, self.images_dir)
        else:
            sock = Path(self.mode)
        self.link = NodeLink(sock, self._on_stream).connect()
        self.facts = self.link.request("facts", timeout=30)["facts"]
        threading.Thread(target=self._events, daemon=True, name="node-events").start()
        self._reconcile_thread = threading.Thread(target=self._reconcile_loop, daemon=True, name="reconcile")
        self._reconcile_thread.start()
        self.kick()
        return self

    def close(self) -> None:
        self._stop.set()
        self.kick()
        with self._work:
            self._work.notify_all()
        if self.link is not None:
            self.link.close()
        if self.proc is not None:
            wait_gone(self.proc, 60)

    def kick(self) -> None:
        self._kick.set()

    def work_for(self, cid: int) -> None:
        with self._work:
            self._work.notify_all()

    # -- reconcile --------------------------------------------------------------------------------
    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            self._kick.wait(5.0)
            self._kick.clear()
            if self._stop.is_set():
                return
            try:
                self.reconcile()
            except Exception:
                log.exception("reconcile failed")

    def on_held(self) -> None:
        """STOP ALL: every work item running now is cancelled at once (recorded as such); the harness
        is told at its next request, which answers ``item_cancelled``, and stops the item. No work is
        handed out, no model call made and no tool call allowed until the plaza resumes."""
        if not self.held():
            return
        for s in list(self.sessions.values()):
            s.cancel(HELD_MESSAGE)

    # -- checkpoints (vmm's checkpoint, restore, delete) --------------------------------------------
    def checkpoint_op(self, cid: int, op: str, **meta) -> dict:
        """checkpoint (name?, label?), checkpoints, rollback (name), checkpoint_delete (name) on the
        agent's running machine. A rollback cancels the item it was running (its harness starts anew)."""
        a = self.agent_of(cid)
        if a is None:
            raise Refusal("unknown_agent", f"no agent {cid}")
        if self.link is None or cid not in self.applied:
            raise Refusal("agent_offline", f"agent {cid} has no running machine")
        with self.lock:
            if cid in self.busy:
                raise Refusal("agent_busy", f"agent {cid}'s machine is busy with another request; try again")
            self.busy.add(cid)
        try:
            answer = self.link.request(op, timeout=300, cid=cid, **{k: v for k, v in meta.items() if v is not None})
        except NodeError as e:
            raise Refusal("node_error", str(e)) from None
        finally:
            with self.lock:
                self.busy.discard(cid)
        if op != "checkpoints":
            what = {"checkpoint": f"checkpoint {answer.get('name')} saved",
                    "rollback": f"rolled back to {meta.get('name')} (undo: {answer.get('safety')})",
                    "checkpoint_delete": f"checkpoint {meta.get('name')} deleted"}[op]
            self._entry(cid, "note", what, detail={"action": op, **{k: v for k, v in answer.items() if k != "ok"}},
                        actor=f"node:{LOCAL_NODE}")
        return {k: v for k, v in answer.items() if k != "ok"}

    def fork(self, cid: int, count: int, checkpoint: str | None, ctx) -> dict:
        """``count`` copies of agent ``cid`` (the guide's Fork): each an agent of the same role with a name
        of its own, its machine a copy of this one's at a checkpoint (taken now, labelled fork, unless
        one is named). Returns the checkpoint and the new CIDs; reconcile starts their machines."""
        check_count(count, "fork")  # before a checkpoint is taken: bad input changes nothing
        if self.agent_of(cid) is None:
            raise Refusal("unknown_agent", f"no agent {cid}")
        if checkpoint is None:
            checkpoint = self.checkpoint_op(cid, "checkpoint", label="fork")["name"]
        elif cid in self.applied:
            names = [c["name"] for c in self.checkpoint_op(cid, "checkpoints")["checkpoints"]]
            if checkpoint not in names:
                raise Refusal("unknown_checkpoint", f"agent {cid} has no checkpoint {checkpoint}")
        cids = ac.fork(self.cmds, ctx, cid, count, checkpoint).value
        self._entry(cid, "note", f"forked at {checkpoint} into {', '.join(map(str, cids))}",
                    detail={"action": "fork", "checkpoint": checkpoint, "forks": cids}, actor=ctx.actor)
        self.hub.read_models.catch_up()  # reconcile reads the roster: the forks must be in it when it looks
        self.kick()
        return {"checkpoint": checkpoint, "forks": cids}

    def templates(self) -> dict:
        """The node's warm templates ({key, created_at, vcpus, memory_mib, image, bytes})."""
        try:
            return {k: v for k, v in self.link.request("templates", timeout=NODE_QUERY_TIMEOUT_S).items() if k != "ok"}
        except NodeError as e:
            raise Refusal("node_error", str(e)) from None

    def template_rm(self, key: str) -> None:
        if not TEMPLATE_KEY_RE.match(key):
            raise Refusal("invalid_template", f"{key!r} is not a template key")
        try:
            removed = self.link.request("template_rm", timeout=NODE_QUERY_TIMEOUT_S, key=key)["removed"]
        except NodeError as e:
            raise Refusal("node_error", str(e)) from None
        if not removed:
            raise Refusal("unknown_template", f"node {LOCAL_NODE} has no template {key}")

    def cancel_work(self, cid: int, why: str | None = None) -> str:
        """The owner's Cancel work: the item the agent runs now ends cancelled (as STOP ALL does for every
        agent); the harness is told at its next step. Returns the item."""
        if self.agent_of(cid) is None:
            raise Refusal("unknown_agent", f"no agent {cid}")
        s = self.sessions.get(cid)
        item = s.taken if s is not None else None
        if item is None:
            raise Refusal("not_working", f"agent {cid} is running no work item")
        s.cancel("cancelled by the owner" + (f": {why}" if why else ""))
        return item

    def deliver_work(self) -> None:
        """Work the scheduler or the owner gave an agent (a task to do, a task to review) becomes a
        work item in its queue, with what it needs to know. What the agent took itself it knows."""
        if self.held():
            return
        t = work_rm.tasks
        for r in self.hub.read_models.rows(t, t.c.phase.in_(("working", "reviewing"))):
            who = r["worker"] if r["phase"] == "working" else r["reviewer"]
            key = (r["number"], r["phase"], who)
            if key in self.delivered or not who or not who.isdigit():
                continue
            self.delivered.add(key)
            a = self.agent_of(int(who))
            if a is None or a.run != "running":
                continue
            ref = delivery_ref(r)  # the agent's record remembers it across restarts
            self._safely(ac.tell, self.cmds.context("hub", f"task {r['number']}"), int(who), task_text(r), ref)
            self.work_for(int(who))

    def idle_sleep(self, rows: list[dict] | None = None) -> list[int]:
        """Idle agents sleep after the policy's ``idle_sleep_min`` (0: never), unless their role is in
        ``sleep_never_roles``, and only when nothing keeps them awake (``awake_because``). Returns the
        CIDs put to sleep."""
        policy = model_commands.load(self.cmds).policy
        minutes = policy.get("idle_sleep_min", 0)
        if not minutes or self.held():
            return []
        rows = rows if rows is not None else self.hub.read_models.rows(agents_table)
        now = self.cmds.context("hub").at
        never = set(policy.get("sleep_never_roles") or [])
        out = []
        for r in rows:
            if r["status"] != "idle" or r["run"] != "running" or r["role"] in never:
                continue
            if now - dt.datetime.fromisoformat(r["changed_at"]) < dt.timedelta(minutes=minutes):
                continue
            if self.awake_because(r) is not None:
                continue
            if self._safely(ac.sleep, self.cmds.context("hub", f"idle for {minutes} minutes"), r["cid"]) is not None:
                out.append(r["cid"])
        return out

    def awake_because(self, r: dict) -> str | None:
        """What keeps an idle agent awake, or None. The guide's list is its queue, engines, terminals, IDE
        sessions, approvals and workstation leases; this hub has queues, tasks and reviews held, and
        approvals (engines, terminals, IDE sessions and leases add their check here when they are built)."""
        if r["queue"]:
            return "work queued"
        w = tasks_commands.worker(self.cmds, str(r["cid"]))
        if w is not None and w.task is not None:
            return f"holds task {w.task}"
        a = work_rm.approvals
        if self.hub.read_models.rows(a, a.c.agent == str(r["cid"]), a.c.status == "pending", limit=1):
            return "an approval waits"
        return None

    def reconcile(self) -> None:
        self.on_held()
        self.deliver_work()
        self.idle_sleep()
        rows = {r["cid"]: r for r in self.hub.read_models.rows(agents_table)}
        with self.lock:
            for cid, r in rows.items():
                key = (r["agent_id"], r["generation"], r.get("wipes", 0))
                have = self.applied.get(cid)
                if cid in self.busy:
                    continue
                if r["run"] == "running" and have != key:
                    f = self.failed.get(cid)
                    if f and f[0] == key and time.monotonic() - f[1] < BOOT_RETRY_S:
                        continue
                    self._spawn(self._boot, cid, key, have is not None, r)
                elif r["run"] == "running" and r["status"] == "asleep" and cid not in self.asleep:
                    self._spawn(self._sleep_wake, cid, "sleep")
                elif r["run"] == "running" and r["status"] != "asleep" and cid in self.asleep:
                    self._spawn(self._sleep_wake, cid, "wake")
                elif r["run"] != "running" and have is not None:
                    self._spawn(self._halt, cid, "stop")
            for cid in list(self.applied):
                if cid not in rows and cid not in self.busy:
                    self._spawn(self._halt, cid, "delete")

    def _spawn(self, fn, cid: int, *args) -> None:
        self.busy.add(cid)

        def run() -> None:
            try:
                fn(cid, *args)
            finally:
                with self.lock:
                    self.busy.discard(cid)
                self.kick()

        threading.Thread(target=run, daemon=True, name=f"node-{cid}").start()

    def _boot(self, cid: int, key: tuple, running: bool, row: dict) -> None:
        """Start the agent's machine. The node keeps its files when the identity (agent id, wipes) is the
        one it last ran, makes them new when it is not, and copies a fork's from its source's checkpoint."""
        agent_id, _generation, wipes = key
        fork = {"fork_of": row["forked_from"], "checkpoint": row["fork_checkpoint"]} \
            if row.get("forked_from") is not None and not wipes else {}
        try:
            if running:
                self.link.request("stop", cid=cid)
            answer = self.link.request("start", timeout=180, cid=cid, identity=f"{agent_id}:{wipes}", **fork)
        except NodeError as e:
            with self.lock:
                self.failed[cid] = (key, time.monotonic())
                self.applied.pop(cid, None)
            self._entry(cid, "error", f"the VM did not start: {e}", actor=f"node:{LOCAL_NODE}")
            return
        with self.lock:
            self.applied[cid] = key
            self.failed.pop(cid, None)
        self._entry(cid, "note", f"VM booted in {answer.get('boot_s')} s", actor=f"node:{LOCAL_NODE}",
                    detail={"boot_s": answer.get("boot_s"), "jailed": answer.get("jailed")})

    def _sleep_wake(self, cid: int, how: str) -> None:
        try:
            answer = self.link.request(how, cid=cid)
        except NodeError as e:
            self._entry(cid, "error", f"{how} failed: {e}", actor=f"node:{LOCAL_NODE}")
            return
        with self.lock:
            (self.asleep.add if how == "sleep" else self.asleep.discard)(cid)
        self._entry(cid, "note", "VM saved and stopped" if how == "sleep" else f"VM woke in {answer.get('wake_s')} s",
                    actor=f"node:{LOCAL_NODE}", detail={k: v for k, v in answer.items() if k != "ok"})

    def _halt(self, cid: int, how: str) -> None:
        try:
            self.link.request(how, cid=cid)
        except NodeError as e:
            log.warning("node %s of cid %s failed: %s", how, cid, e)
        with self.lock:
            self.applied.pop(cid, None)
            self.asleep.discard(cid)
        if how == "stop":
            self._safely(ac.disconnected, self.ctx_node(), cid, "stopped")

    def _events(self) -> None:
        for ev in self.link.events():
            cid = ev.get("cid")
            if ev.get("event") == "exited":
                with self.lock:
                    self.applied.pop(cid, None)
                self._safely(ac.disconnected, self.ctx_node(), cid, f"the VM exited ({ev.get('exit')})")
                self._entry(cid, "error", f"the VM exited ({ev.get('exit')})", actor=f"node:{LOCAL_NODE}")
                self.kick()
            elif ev.get("event") == "harness_exited":
                self._safely(ac.disconnected, self.ctx_node(), cid, "the harness exited")

    # -- helpers ----------------------------------------------------------------------------------
    @property
    def cmds(self):
        return self.hub.commands

    def ctx_node(self):
        return self.cmds.context(f"node:{LOCAL_NODE}")

    def ctx_agent(self, cid: int):
        return self.cmds.context(f"agent:{cid}")

    def _safely(self, fn, *args) -> Any:
        try:
            return fn(self.cmds, *args)
        except Refusal as r:
            log.info("%s refused: %s", getattr(fn, "__name__", fn), r.message)
            return None

    def _entry(self, cid: int, kind: str, text: str | None = None, tool: str | None = None,
               detail: dict | None = None, actor: str | None = None) -> None:
        ctx = self.cmds.context(actor or f"agent:{cid}")
        self._safely(ac.add_entry, ctx, cid, kind, text, tool, detail)

    def agent_of(self, cid: int):
        """The plaza's own record of the agent with this CID, or None: a CID never given out."""
        n = self.cmds.store.get(node_id(LOCAL_NODE))
        if n is None or not n.holds(cid):
            return None
        a = self.cmds.store.get(n.agent_of(cid))
        return None if a is None or a.deleted else a

    def worker_state(self, cid: int, state: str) -> None:
        """Tell the scheduler (``commands.tasks``) what the agent is: available (online and idle),
        busy (running a work item) or offline. A refusal (it holds a task; already offline) is
        the scheduler's state being right already, and is only logged."""
        a = self.agent_of(cid)
        ctx = self.ctx_node()
        if state == "available":
            if a is not None and a.run == "running":
                self._safely(tasks_commands.worker_available, ctx, str(cid), a.role, a.tier)
        elif state == "busy":
            self._safely(tasks_commands.worker_busy, ctx, str(cid), "running a work item")
        else:
            self._safely(tasks_commands.worker_offline, ctx, str(cid))

    def held(self) -> bool:
        p = plaza_commands.load(self.cmds)
        return bool(p and p.held)

    # -- streams from guests ----------------------------------------------------------------------
    def _on_stream(self, service: str, cid: int, st: Stream) -> None:
        if self.agent_of(cid) is None:
            st.reset(f"cid {cid} was not started by the plaza; it has no role")
            return
        if service == "harness":
            HarnessSession(self, cid, st).run()
        elif service == "egress":
            self.egress.handle(cid, st)
        else:
            st.reset(f"no service {service!r} on this hub")

    def _decide_egress(self, cid: int, host: str, port: int) -> None:
        a = self.agent_of(cid)
        if a is None:
            raise Refused(f"cid {cid} has no role")
        d = tooldecide.decide_tool(self.hub, a, "egress.connect", {"host": host, "port": port})
        if d.effect != "allow":
            raise Refused(f"the laws refuse egress.connect to {host}:{port} ({d.reason}"
                          + (f", {d.forbidding}" if d.forbidding else "") + ")")

    def _fetch_blocklist(self) -> list:
        """The owner's fetch blocklist as the model policy says now (read on every CONNECT)."""
        row = self.hub.read_models.states["models"].rows.get("rm_model_policy", "policy")
        return row["policy"].get("fetch_blocklist", []) if row else []

    def _record_egress(self, cid: int, detail: dict) -> None:
        where = f"{detail.get('host')}:{detail.get('port')}" if detail.get("host") else "(bad request)"
        self._entry(cid, "egress", f"{detail['verdict']} {where}" + (f": {detail['why']}" if detail.get("why") else ""),
                    tool="egress.connect", detail=detail)


class HarnessSession:
    """One harness connection: the CID is the node's word; everything else is looked up here."""

    def __init__(self, rt: AgentRuntime, cid: int, st: Stream):
        self.rt, self.cid, self.st = rt, cid, st
        self.buf = b""
        self.said_hello = False
        self.taken: str | None = None
        self.taken_from: str | None = None  # who told the running item ("owner": the owner's own chat)
        self.cancelled: str | None = None  # the item cancelled under the harness (STOP ALL, budget exhausted)
        self.cancelled_why = HELD_MESSAGE
        self.cancel_lock = threading.Lock()
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
                    self._send(_err(e.code, str(e)))
                    continue
                except gate.NotJson:
                    req = None
                if not isinstance(req, dict):
                    self._send(_err("bad_request", "one JSON object a line"))
                    continue
                self._send(self.handle(req))
        except (ChannelClosed, StreamReset):
            pass
        finally:
            if self.rt.sessions.get(self.cid) is self:
                del self.rt.sessions[self.cid]
            if self.taken is not None:  # the harness went mid-item: the item is cancelled, not lost
                self.rt._safely(ac.finish_work, self.rt.ctx_node(), self.cid, self.taken, "cancelled",
                                "the harness went away during this item")
            if self.said_hello:
                self.rt._safely(ac.disconnected, self.rt.ctx_node(), self.cid, "the harness disconnected")
                self.rt.worker_state(self.cid, "offline")

    def _readline(self) -> bytes | None:
        while b"\n" not in self.buf:
            data = self.st.read()
            if not data:
                return None
            self.buf += data
            if len(self.buf) > CHANNEL_LINE_BYTES_MAX:
                raise StreamReset("request too long")
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def _send(self, obj: dict) -> None:
        self.st.write(json.dumps(obj).encode() + b"\n")

    def handle(self, req: dict) -> dict:
        op = req.get("op")
        agent = self.rt.agent_of(self.cid)
        if agent is None:
            return _err("no_role", f"cid {self.cid} is not an agent of this plaza; it has no role")
        if op != "hello" and not self.said_hello:
            return _err("hello_first", "say hello first")
        fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            return _err("unknown_op", f"no op {op!r}")
        if op in ITEM_OPS:
            if self.taken is not None and self.rt.held():
                self.cancel(HELD_MESSAGE)
            if self.cancelled is not None:
                why = self.cancelled_why
                self.rt._entry(self.cid, "error", f"{op} after the item was cancelled: {why}",
                               tool=req.get("tool") if isinstance(req.get("tool"), str) else op)
                return dict(_err("item_cancelled", f"work item {self.cancelled} was cancelled: {why}"),
                            item=self.cancelled)
        try:
            return fn(agent, req)
        except Refusal as r:
            return _err(r.code, r.message)

    # -- ops --------------------------------------------------------------------------------------
    def op_hello(self, agent, req: dict) -> dict:
        # Whatever the guest claims (a role, a name, a cid) is ignored: the plaza's record decides.
        claimed = {k: req[k] for k in ("role", "cid", "tier") if k in req}
        self.said_hello = True
        ac.connected(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid)
        self.rt.worker_state(self.cid, "available")
        if claimed:
            self.rt._entry(self.cid, "note", "the guest's own claim was ignored", detail={"claimed": claimed},
                           actor=f"node:{LOCAL_NODE}")
        out = {"ok": True, "cid": self.cid, "role": agent.role, "tier": agent.tier, "name": agent.name,
               "permission_mode": agent.permission_mode, "tools": tooldecide.offered(self.rt.hub, agent,
                                                                                  GUEST_TOOLS + HOST_TOOLS)}
        if agent.name is None:  # the plaza asks each new agent to name itself, once
            out["name_prompt"] = NAME_PROMPT.format(role=agent.role)
        return out

    def op_name(self, agent, req: dict) -> dict:
        """The agent's answer to the name prompt: the name in it, else ``role-cid``; once (the owner renames)."""
        name = chosen_name(str(req.get("name") or ""), agent.role, self.cid)
        ac.name_self(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid, name)
        return {"ok": True, "name": name}

    def op_next(self, agent, req: dict) -> dict:
        wait = req.get("wait", 0)
        wait = min(float(wait), MAX_NEXT_WAIT_S) if isinstance(wait, (int, float)) else 0.0
        end = time.monotonic() + wait
        while True:
            if self.gone():  # never hand work to a stream that is already dead (e.g. a VM that slept)
                raise StreamReset("the harness stream is gone")
            if not self.rt.held():
                item = ac.take_work(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid).value
                if item is not None:
                    self.taken, self.cancelled, self.taken_from = item["item"], None, item.get("from")
                    self.rt.worker_state(self.cid, "busy")
                    return {"ok": True, "item": item}
            left = end - time.monotonic()
            if left <= 0 or self.rt._stop.is_set():
                return {"ok": True, "item": None}
            with self.rt._work:
                self.rt._work.wait(min(left, 1.0))

    def op_model(self, agent, req: dict) -> dict:
        if self.rt.held():
            self.rt._entry(self.cid, "error", HELD_MESSAGE, tool="model")
            return _err("plaza_held", HELD_MESSAGE)
        result = self.rt.relay.turn(agent, req.get("messages") or [], req.get("tools") or [])
        if not result.get("ok"):
            err = result["error"]
            self.rt._entry(self.cid, "error", err["message"], tool="model", detail={"code": err["code"]})
            if err["code"] == BUDGET_EXHAUSTED:  # the guide: the work on that task is cancelled
                self.cancel(err["message"])
            return result
        reply = result["reply"]
        self.rt._entry(self.cid, "model", reply.get("text"), detail={"model": result.get("model"),
            **({"purpose": "name"} if req.get("purpose") == "name" else {}),
            "tool_calls": [{"id": c.get("id"), "name": c.get("name")} for c in reply.get("tool_calls") or []]})
        return result

    def _decide(self, agent, tool: str, args: dict, call_id: Any) -> dict:
        c = tooldecide.check_tool(self.rt.hub, agent, tool, args)
        d = c.decision
        detail = {"effect": d.effect, "reason": d.reason, "law": d.forbidding, "violation": d.violation,
                  "call_id": call_id, "decision_id": c.call_id or None, "mode": c.mode,
                  "approval": c.approval, "approved_by": c.approved,
                  "args": json.dumps(args, sort_keys=True, default=str)[:500]}
        if c.extra.get("message"):
            detail["refusal"] = c.extra["message"]
        self.rt._entry(self.cid, "tool_call", None, tool=tool, detail=detail)
        if d.effect == "deny":
            msg = c.extra.get("message") or (f"{tool} refused ({d.reason}" + (f", {d.forbidding}" if d.forbidding else "") + ")")
        elif d.effect == "ask":
            msg = (f"{tool} waits for the owner's approval {c.approval}; once the owner approves it, "
                   "make the same call again with the same input and it runs once")
        else:
            msg = None
        return {"ok": True, "effect": d.effect, "reason": d.reason, "law": d.forbidding, "message": msg,
                "approval": c.approval}

    def op_decide(self, agent, req: dict) -> dict:
        tool, args = req.get("tool"), req.get("args")
        if not isinstance(tool, str) or not tool.startswith("vm.") or not isinstance(args, dict):
            return _err("bad_request", "decide takes a guest tool (vm.*) and its args")
        return self._decide(agent, tool, args, req.get("call_id"))

    def op_result(self, agent, req: dict) -> dict:
        self.rt._entry(self.cid, "tool_result", str(req.get("output") or ""), tool=str(req.get("tool")),
                       detail={"ok": bool(req.get("ok")), "call_id": req.get("call_id")})
        return {"ok": True}

    def op_tool(self, agent, req: dict) -> dict:
        tool, args = req.get("tool"), req.get("args")
        if not isinstance(tool, str) or not isinstance(args, dict):
            return _err("bad_request", "tool takes a name and args")
        bad = toolspecs.check_args(tool, args) if tool in HOST_TOOLS else None
        if bad:  # args that do not fit the tool's schema never reach the laws (nor the owner's approvals)
            self.rt._entry(self.cid, "error", bad, tool=tool, detail={
                "code": "bad_request", "call_id": req.get("call_id"),
                "args": json.dumps(args, sort_keys=True, default=str)[:500]})
            return _err("bad_request", bad)
        if tool == "plaza_agent_propose":  # a fact the hub knows, never the model's word
            args = dict(args, owner_asked=self.taken_from == "owner")
        d = self._decide(agent, tool, args, req.get("call_id"))
        if d["effect"] == "ask":
            return dict(_err("awaiting_approval", d["message"]), approval=d["approval"])
        if d["effect"] != "allow":
            return _err("refused", d["message"])
        try:
            result = self._host_tool(agent, tool, args)
        except Refusal as r:
            result = None
            err = _err(r.code, r.message)
        if result is None:
            self.rt._entry(self.cid, "tool_result", err["error"]["message"], tool=tool, detail={"ok": False})
            return err
        self.rt._entry(self.cid, "tool_result", json.dumps(result, default=str)[:2000], tool=tool, detail={"ok": True})
        return {"ok": True, "result": result}

    def _host_tool(self, agent, tool: str, args: dict) -> Any:
        hub = self.rt.hub
        if tool == "plaza_status":
            return {"held": self.rt.held(), "cid": self.cid, "role": agent.role, "name": agent.name}
        if tool == "plaza_roster":
            return [{k: r[k] for k in ("cid", "name", "role", "status")}
                    for r in hub.read_models.rows(agents_table, order_by=agents_table.c.cid)]
        if tool == "plaza_toolbox":
            return toolspecs.grouped(tooldecide.offered(hub, agent, GUEST_TOOLS + HOST_TOOLS))
        if tool == "plaza_message":
            to, text = args["to"], args["text"]
            item = ac.tell(self.rt.cmds, self.rt.ctx_agent(self.cid), to, text).value
            self.rt.work_for(to)
            return {"sent": True, "item": item}
        if tool.startswith("plaza_task_"):
            return self._task_tool(agent, tool, args)
        if tool == "plaza_agent_propose":
            return self._propose(agent, args)
        raise Refusal("not_available", f"{tool} is not available on this hub yet")

    def _task_tool(self, agent, tool: str, args: dict) -> Any:
        """The task tools, through ``commands.tasks`` with the agent's CID as the actor and the role
        the hub gave it (never one the guest names). Their arguments fit their schemas (``op_tool``
        checks them against ``toolspecs`` first); the rules on the values are the domain's."""
        cmds, me = self.rt.cmds, str(self.cid)
        ctx = self.rt.ctx_agent(self.cid)
        number = args.get("task")
        if tool == "plaza_task_list":
            rows = self.rt.hub.read_models.rows(work_rm.tasks, work_rm.tasks.c.state.notin_(tuple(tasks_commands.ENDED)),
                                                order_by=work_rm.tasks.c.position, limit=MAX_TASK_LIST)
            return [{k: r[k] for k in ("number", "title", "acceptance", "role", "budget", "state", "phase",
                                        "worker", "reviewer", "report")} for r in rows]
        if tool == "plaza_task_create":
            out = tasks_commands.create(cmds, ctx, args["title"], args["acceptance"], args.get("budget"),
                                        details=args.get("details") or "", role=args.get("role"),
                                        parent=args.get("parent")).value
            return out
        if tool == "plaza_task_claim":
            phase = "reviewing" if args.get("review") else "working"
            self.rt.delivered.add((number, phase, me))
            if args.get("review"):
                tasks_commands.take_review(cmds, ctx, number, me, agent.role)
            else:
                tasks_commands.claim(cmds, ctx, number, me, agent.role)
            self._took_itself(number, phase)
            return {"task": number, ("reviewing" if args.get("review") else "claimed"): True,
                    **self._task_view(number)}
        if tool == "plaza_task_submit":
            verdict = args.get("verdict")
            if verdict is not None:
                out = tasks_commands.review(cmds, ctx, number, me, verdict == "pass", str(args.get("notes") or ""))
                return {"task": number, "verdict": verdict, "entries": len(out.value.entries)}
            if args.get("give_up"):
                tasks_commands.give_up(cmds, ctx, number, me, str(args.get("notes") or ""))
                return {"task": number, "gave_up": True}
            files = args.get("files") or []
            if isinstance(files, str):  # "a.txt, b.txt" is taken as the list it names
                files = [f.strip() for f in files.split(",") if f.strip()]
            tasks_commands.report_done(cmds, ctx, number, me, str(args.get("summary") or ""), files,
                                       str(args.get("checks") or ""))
            return {"task": number, "reported": True}
        if tool == "plaza_task_cancel":
            tasks_commands.withdraw(cmds, ctx, number, tier=agent.tier)
            return {"task": number, "withdrawn": True}
        raise Refusal("not_available", f"{tool} is not available on this hub yet")

    def _propose(self, agent, args: dict) -> dict:
        """The orchestrator cannot start agents; it proposes them, and the proposal waits in approvals (kind
        ``agent``); approving it starts them. Who may propose is the laws' (S-028 to S-030: the orchestrator,
        only when the owner asked in the owner's own chat: ``owner_asked``, set by ``op_tool``)."""
        role, count, model, why = args.get("role"), args.get("count", 1), args.get("model"), args.get("why")
        problem = approvals.detail_problem("agent", {"role": role, "count": count, "model": model})
        if problem is not None:
            raise Refusal("invalid_proposal", problem)
        if not isinstance(why, str) or not why.strip():
            raise Refusal("empty_why", "say why the owner should start these agents")
        out = approvals.request(self.rt.cmds, self.rt.ctx_agent(self.cid), "agent",
                                f"{count} new {role} agent{'s' if count > 1 else ''}, proposed by agent {self.cid}: "
                                f"{why.strip()[:200]}", agent=str(self.cid),
                                detail={"role": role, "count": count, "model": model, "why": why.strip()[:2000]})
        return {"approval": out.value, "status": "pending",
                "note": "nothing starts until the owner approves it in Approvals"}

    def _took_itself(self, number: str, phase: str) -> None:
        """What the agent claimed itself is never delivered to it, even by a hub started after."""
        t = work_rm.tasks
        rows = self.rt.hub.read_models.rows(t, t.c.number == number)
        if rows:
            self.rt._safely(ac.took_itself, self.rt.ctx_agent(self.cid), self.cid,
                            delivery_ref(dict(rows[0], phase=phase)))

    def _task_view(self, number: str) -> dict:
        v = tasks_commands.view(tasks_commands.load(self.rt.cmds, number))
        return {k: v[k] for k in ("title", "acceptance", "details", "budget", "report")}

    def op_share(self, agent, req: dict) -> dict:
        path, content = req.get("path"), req.get("content")
        if not isinstance(path, str) or not isinstance(content, str):
            return _err("bad_request", "share takes a path and base64 content")
        d = self._decide(agent, "vm.share_file", {"path": path}, None)
        if d["effect"] != "allow":
            return _err("refused", d["message"])
        data = base64.b64decode(content, validate=True)
        if len(data) > MAX_SHARE_BYTES:
            return _err("too_large", f"a shared file is at most {MAX_SHARE_BYTES} bytes")
        digest = hashlib.sha256(data).hexdigest()
        name = f"{digest[:16]}-{os.path.basename(path)[:80]}"
        folder = self.rt.shared_dir / str(self.cid)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        (folder / name).write_bytes(data)
        self.rt._entry(self.cid, "note", f"shared {path}", tool="vm.share_file",
                       detail={"name": name, "bytes": len(data), "sha256": digest})
        return {"ok": True, "name": name}

    def op_done(self, agent, req: dict) -> dict:
        item, outcome = req.get("item"), req.get("outcome", "done")
        if not isinstance(item, str) or not isinstance(outcome, str):
            return _err("bad_request", "done takes an item and an outcome")
        if item == self.cancelled:  # already cancelled by STOP ALL: nothing more to record
            self.cancelled = None
            self.rt.worker_state(self.cid, "available")
            return {"ok": True, "cancelled": True}
        ac.finish_work(self.rt.cmds, self.rt.ctx_agent(self.cid), self.cid, item, outcome,
                       str(req.get("text")) if req.get("text") is not None else None)
        if item == self.taken:
            self.taken = None
        self.rt.worker_state(self.cid, "available")
        return {"ok": True}


def delivery_ref(r: dict) -> str:
    """One delivery of a task to an agent: its number, the phase (working or reviewing) and the position
    at which it was queued (created, or reported done), so a second round is a new delivery."""
    return f"{r['number']}:{r['phase']}:{r['queued_at']}"


def task_text(r: dict) -> str:
    """The work item for a task given to an agent: to do it, or to review it."""
    head = f"Task {r['number']}: {r['title']}\nAcceptance: {r['acceptance']}" + (f"\nDetails: {r['details']}" if r.get("details") else "")
    if r["phase"] == "working":
        return (f"You were given task {r['number']} (budget {r['budget']} credits).\n{head}\nDo it in /workspace, then "
                "call plaza_task_submit with task, summary, files and checks (or give_up with notes).")
    rep = r.get("report") or {}
    return (f"Review task {r['number']} (never your own work).\n{head}\nThe worker's report: {rep.get('summary', '')}\n"
            f"Files: {', '.join(rep.get('files') or [])}\nChecks: {rep.get('checks', '')}\n"
            "Rule with plaza_task_submit: task, verdict pass or fail, and notes.")


def _err(code: str, message: str) -> dict:
    return {"ok": False, "error": {"code": code, "message": message}}
