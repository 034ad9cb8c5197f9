"""The agents' runtime in the hub (``AgentRuntime``): node n0, reconcile, work delivery, the guests' streams.

- **Node n0.** For a local plaza the hub starts ``noded`` as its child and connects to it
  (``adapters.kvm.link``). The node's facts are kept live (``/v1/nodes``), not as events.
- **Reconcile.** A thread keeps the node's machines where the owner's commands put the agents: a
  running agent has a machine (booted anew after a restart; with a new workspace after a wipe or when
  its CID names a new agent); a stopped or retired agent has none; a deleted agent's files go.
- **Roles come from the hub.** A guest stream carries the CID the *node* knows the guest by. The
  agent, its role, tier and mode are looked up from the plaza's own records by that CID; whatever the
  guest says about itself is ignored. A CID the plaza never gave out has no role, and its streams are
  refused.
- **The harness.** Each connection is a ``runtime.session.HarnessSession`` (the guest contract,
  ``vmm.guest.contract``); the host tools it runs are ``runtime.hosttools``, declared in ``runtime.tools``.
- **Events.** The runtime follows the hub's live bus (``follow``): the hub's follower publishes what it
  reads from the store after each catch-up, whichever hub wrote it, and the runtime reacts to what it
  follows: a ``Plaza.Held`` cancels every running work item within the follower's poll.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

from vmm import trace
from vmm.channel import Stream

from ..adapters.kvm.link import NodeError, NodeLink, start_local_node, wait_gone
from ..commands import agents as ac
from ..commands import models as model_commands
from ..commands import nodes as node_commands
from ..commands import tasks as tasks_commands
from ..domain.agents import LOCAL_NODE, check_count
from ..domain.base import Refusal
from ..domain.nodes import range_node
from ..domain.plaza import HELD_MESSAGE
from ..domain.plaza import held as plaza_held
from ..events.committer import StoreClosed
from ..projections import volumes as volumes_rm
from ..projections import work as work_rm
from ..projections.agents import agents_table
from . import e2b as e2b_rules
from . import gitdoor, outreach, tooldecide, tools
from .egress import EgressPolicy, EgressProxy, Refused
from .joined import JoinedNodes
from .modelrelay import GatewayCall, ModelRelay
from .session import HarnessSession
from .work import delivery_ref, task_text

log = logging.getLogger("apid.runtime")

#: After a machine failed to boot, wait this long before trying again.
BOOT_RETRY_S = 30.0
#: The bus families the runtime follows (``Plaza.Held`` is among the plaza's; a node's revocation is the registry's).
FOLLOWED = ("plaza", "node_registry")
#: What the runtime calls itself on the bus.
BUS_ADDRESS = "runtime"
#: The longest the hub waits for the node to list or remove templates.
NODE_QUERY_TIMEOUT_S = 60.0
#: A warm template's key: a hash the node gives it.
TEMPLATE_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: Automatic checkpoints (``vm_auto_checkpoints``) kept per agent: after each new one, the oldest beyond
#: this many are deleted. Their names: ``auto-N-TOOL`` (N counts up per agent), labelled with the call.
AUTO_CHECKPOINTS_KEPT = 5
AUTO_NAME_RE = re.compile(r"auto-(\d+)-[a-z0-9-]+")


def auto_name(n: int, tool: str) -> str:
    """The automatic checkpoint before a call of ``tool``: auto-3-vm-shell (at most 40 characters)."""
    return f"auto-{n}-{re.sub(r'[^a-z0-9]+', '-', tool.lower()).strip('-')}"[:40].rstrip("-")


def auto_checkpoints(names: list[str]) -> list[tuple[int, str]]:
    """The automatic checkpoints among these names, oldest (lowest number) first."""
    return sorted((int(m.group(1)), n) for n in names if (m := AUTO_NAME_RE.fullmatch(n)))


def auto_pruned(names: list[str], keep: int = AUTO_CHECKPOINTS_KEPT) -> list[str]:
    """The automatic checkpoints to delete so that ``keep`` remain (the newest); checkpoints the owner
    named are never among them."""
    autos = auto_checkpoints(names)
    return [n for _, n in autos[:max(0, len(autos) - keep)]]


class AgentRuntime:
    def __init__(self, hub: Any, *, node: str = "local", images_dir: str | None = None,
                 egress: EgressPolicy | None = None, gateway: GatewayCall | None = None):
        self.hub = hub
        self.mode = node
        self.images_dir = images_dir
        self.proc = None
        #: Every node the hub reaches now: n0 (its own noded), and each joined node while it is connected.
        self.links: dict[str, NodeLink] = {}
        self.joined = JoinedNodes(self)
        self.where: dict[int, str] = {}          # cid -> the node its machine was last started on or moved to
        self.attached: set[str] = set()          # other local nodes attached by name (``attach_node``)
        self.applied: dict[int, tuple] = {}      # cid -> (agent_id, generation, wipes) running now
        self.failed: dict[int, tuple] = {}       # cid -> (key, when) of a failed boot
        self.busy: set[int] = set()              # cids with a node request in flight
        self.asleep: set[int] = set()            # cids whose machine is saved and stopped
        self.exited: dict[int, tuple] = {}       # cid -> key the node's crash recovery left exited (not booted again)
        self._kick = threading.Event()
        self._work = threading.Condition()
        self._stop = threading.Event()
        self.lock = threading.Lock()
        self.egress = EgressProxy(egress or EgressPolicy(), self._decide_egress, self._record_egress,
                                  blocklist=self._fetch_blocklist)
        self.relay = ModelRelay(hub, gateway)
        self.sessions: dict[int, HarnessSession] = {}
        self.delivered: set[tuple] = set()       # (task, phase, cid) already a work item (or claimed by the agent)
        self.facts: dict = {}
        self._followed = threading.Event()  # the bus has records for the runtime
        self._subscriber = None

    # -- life -------------------------------------------------------------------------------------
    def start(self) -> AgentRuntime:
        if self.mode == "local":
            self.proc, sock = start_local_node(self.hub.folders.state, self.hub.folders.data, self.images_dir)
        else:
            sock = Path(self.mode)
        self.links[LOCAL_NODE] = NodeLink(sock, lambda service, cid, st: self.on_stream_from(LOCAL_NODE, service, cid, st)).connect()
        self.facts = self.link.request("facts", timeout=30)["facts"]
        threading.Thread(target=self.follow_node_events, args=(LOCAL_NODE, self.link), daemon=True,
                         name="node-events").start()
        self._reconcile_thread = threading.Thread(target=self._reconcile_loop, daemon=True, name="reconcile")
        self._reconcile_thread.start()
        self.follow()
        self.kick()
        return self

    def follow(self) -> AgentRuntime:
        """React to the events the hub's follower reads (from any hub's writes): a ``Plaza.Held``
        cancels every running work item. The bus calls ``wake`` on the hub's event loop; the records
        are handled on the runtime's own thread."""
        self._subscriber = self.hub.bus.subscribe(BUS_ADDRESS, FOLLOWED, self._followed.set)
        threading.Thread(target=self._follow_loop, daemon=True, name="runtime-follow").start()
        return self

    def _follow_loop(self) -> None:
        sub = self._subscriber
        while not self._stop.is_set():
            self._followed.wait()
            self._followed.clear()
            if self._stop.is_set():
                return
            records = []
            while sub.queue:  # the bus appends on its own thread: take what is there, one by one
                records.append(sub.queue.popleft())
            try:
                if sub.dropped:  # it fell behind and the bus let go of its records: look at the plaza now
                    sub.dropped = False
                    self.on_held()
                self.on_records(records)
            except Exception:
                log.exception("the runtime failed on followed events")

    def on_records(self, records: list) -> None:
        """The events followed, in order. A hold or a resume (from any hub) refreshes this process's copy
        of the plaza; a hold cancels the running items (as of the plaza now: a hold already resumed
        cancels nothing); a resume wakes the harnesses waiting for work."""
        for r in records:
            if r.kind == "NodeRegistry.NodeRevoked":  # its connection closes and its CIDs fail closed at once
                self.joined.revoked(r.data["name"])
        kinds = {r.kind for r in records}
        if not kinds & {"Plaza.Held", "Plaza.Resumed"}:
            return
        with self.cmds.store.fresh():  # another hub may have written it: the plaza as stored, cached anew
            self.on_held()
        with self._work:
            self._work.notify_all()

    def close(self) -> None:
        self._stop.set()
        self._followed.set()
        if self._subscriber is not None:
            self.hub.bus.unsubscribe(self._subscriber)
        self.kick()
        with self._work:
            self._work.notify_all()
        for link in list(self.links.values()):
            link.close()
        if self.proc is not None:
            wait_gone(self.proc, 60)

    def kick(self) -> None:
        self._kick.set()

    # -- the nodes --------------------------------------------------------------------------------
    @property
    def link(self) -> NodeLink | None:
        """Node n0's link (the hub's own machine: sandboxes, templates, the first start's checks)."""
        return self.links.get(LOCAL_NODE)

    def link_of(self, name: str) -> NodeLink:
        """The link to node ``name``; refused when the hub knows no such node, or it is not connected now."""
        link = self.links.get(name)
        if link is None or not link.up or (name != LOCAL_NODE and name not in self.attached
                                           and not self.joined.online(name)):
            if name != LOCAL_NODE and name not in self.joined.revoked_names and self._joined(name):
                raise Refusal("node_offline", f"node {name} is offline (not connected to the hub)")
            if name in self.joined.revoked_names:
                raise Refusal("node_revoked", f"node {name} is revoked")
            if name == LOCAL_NODE:
                raise Refusal("node_offline", f"node {LOCAL_NODE} is not connected")
            raise Refusal("unknown_node", f"no node {name!r} (see nodes list)")
        return link

    def node_of(self, cid: int) -> str:
        """The node an agent is placed on: its aggregate's ``node`` (the hub's records, never a node's word)."""
        a = self.agent_of(cid)
        if a is None:
            raise Refusal("unknown_agent", f"no agent {cid}")
        return a.node

    def _joined(self, name: str) -> bool:
        reg = node_commands.registry(self.cmds)
        return reg is not None and name in reg.joined

    def _link_for(self, cid: int) -> tuple[str, NodeLink]:
        """The node and link that carry ``cid``'s machine now (a deleted agent's: where it last ran)."""
        a = self.agent_of(cid)
        name = a.node if a is not None else self.where.get(cid, range_node(cid) or LOCAL_NODE)
        return name, self.link_of(name)

    def node_connected(self, name: str) -> None:
        """A joined node (re)connected: its running agents are started again through the new link (noded
        answers ``already`` for a machine it kept running; one it lost is booted anew). Sleeping ones stay."""
        with self.lock:
            for cid, where in list(self.where.items()):
                if where == name and cid not in self.asleep and cid not in self.busy:
                    self.applied.pop(cid, None)
        self.kick()

    def drain_started(self, name: str) -> None:
        """Node ``name`` was drained: placement sends it no new agents, and each agent on it is moved off,
        one at a time ("Draining and revoking"), in a thread of its own (``runtime.moves.drain``)."""
        log.info("node %s drained: it takes no new agents; its agents are moved off", name)
        ctx = self.cmds.context("hub", f"node {name} is draining")

        def run() -> None:
            try:
                report = self.drain(name, ctx)
                log.info("drain of node %s: %s", name, report)
            except Exception as e:  # noqa: BLE001 - a drain that fails leaves the agents where they are
                log.warning("drain of node %s failed: %s", name, getattr(e, "message", e))

        threading.Thread(target=run, daemon=True, name=f"drain-{name}").start()

    def kill(self, cid: int) -> None:
        """``machines kill``: the run's VM stopped on its machine now, its harness stream reset."""
        try:
            _, link = self._link_for(cid)
            link.request("stop", cid=cid)
        except (NodeError, Refusal) as e:
            log.warning("kill of cid %s: %s", cid, getattr(e, "message", e))
        with self.lock:
            self.applied.pop(cid, None)
            self.asleep.discard(cid)
        s = self.sessions.get(cid)
        if s is not None and hasattr(s, "stream"):
            try:
                s.stream.reset("the run was killed")
            except Exception:  # noqa: BLE001 - a stream already gone is killed enough
                pass

    def online(self, name: str) -> bool:
        if name == LOCAL_NODE:
            return self.link is not None and self.link.up
        return self.joined.online(name)

    def node_facts(self, name: str) -> dict:
        return dict(self.facts) if name == LOCAL_NODE else dict(self.joined.facts.get(name) or {})

    def place(self, role: str, count: int = 1, memory_mib: int = 256, vcpus: int = 1) -> str:
        """Where new agents go (``runtime.placing``, ``domain.placement``)."""
        from . import placing
        return placing.place(self, role, count, memory_mib, vcpus)

    def attach_node(self, name: str, link: NodeLink) -> NodeLink:
        """Another local node's link (a test's or a bench's second noded in its own folders): its guests'
        streams are checked against the CIDs the plaza placed there, and its events are followed. A joined
        node's link comes through ``JoinedNodes.attach`` instead."""
        link.on_stream = lambda service, cid, st: self.on_stream_from(name, service, cid, st)
        self.links[name] = link
        self.attached.add(name)
        threading.Thread(target=self.follow_node_events, args=(name, link), daemon=True,
                         name=f"node-events-{name}").start()
        return link

    def move(self, cid: int, target: str, ctx) -> dict:
        """``agents move CID NODE``: the guide's five steps (``runtime.moves``)."""
        from . import moves
        return moves.move(self, cid, target, ctx)

    def drain(self, name: str, ctx) -> dict:
        """Every agent off node ``name``, one at a time (``runtime.moves.drain``)."""
        from . import moves
        return moves.drain(self, name, ctx)

    def boot_blockers(self) -> list[str]:
        """Why node n0 cannot boot a microVM now (empty: it can), asked of the node afresh: the owner may
        have installed QEMU or built the guest image since the hub started."""
        try:
            self.facts = self.link.request("facts", timeout=NODE_QUERY_TIMEOUT_S)["facts"]
        except NodeError as e:
            return [f"node n0 does not answer ({e})"]
        return list(self.facts.get("blockers") or [])

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
        sandboxes = getattr(self.hub, "e2b", None)
        if sandboxes is not None:  # STOP ALL ends every E2B sandbox too (runtime/e2b.py)
            sandboxes.end_all(HELD_MESSAGE)

    # -- checkpoints (vmm's checkpoint, restore, delete) --------------------------------------------
    def checkpoint_op(self, cid: int, op: str, **meta) -> dict:
        """checkpoint (name?, label?), checkpoints, rollback (name), checkpoint_delete (name) on the
        agent's running machine. A rollback cancels the item it was running (its harness starts anew)."""
        a = self.agent_of(cid)
        if a is None:
            raise Refusal("unknown_agent", f"no agent {cid}")
        answer = self._machine_request(cid, op, **meta)
        if op != "checkpoints":
            what = {"checkpoint": f"checkpoint {answer.get('name')} saved",
                    "rollback": f"rolled back to {meta.get('name')} (undo: {answer.get('safety')})",
                    "checkpoint_delete": f"checkpoint {meta.get('name')} deleted"}[op]
            self._entry(cid, "note", what, detail={"action": op, **answer}, actor=f"node:{self.where.get(cid, LOCAL_NODE)}")
        return answer

    def _machine_request(self, cid: int, op: str, **meta) -> dict:
        if cid not in self.applied:
            raise Refusal("agent_offline", f"agent {cid} has no running machine")
        _, link = self._link_for(cid)
        with self.lock:
            if cid in self.busy:
                raise Refusal("agent_busy", f"agent {cid}'s machine is busy with another request; try again")
            self.busy.add(cid)
        try:
            return link.request(op, timeout=300, cid=cid, **{k: v for k, v in meta.items() if v is not None})
        except NodeError as e:
            raise Refusal("node_error", str(e)) from None
        finally:
            with self.lock:
                self.busy.discard(cid)

    def auto_checkpoint(self, cid: int, tool: str, call_id: Any = None) -> str | None:
        """Before an allowed high-risk call (``jhrl.catalog.high_risk``), with the owner's
        ``vm_auto_checkpoints`` on: a checkpoint of the agent's machine named after the call, so that
        ``agents rollback CID NAME`` undoes it; then the oldest automatic ones beyond
        ``AUTO_CHECKPOINTS_KEPT`` are deleted. Returns its name; None when the setting is off or the agent
        has no machine here. A failure is in the transcript, and the call goes on (a safety net, not a law)."""
        if not model_commands.load(self.cmds).policy.get("vm_auto_checkpoints", True):
            return None
        if cid not in self.applied:
            return None
        actor = f"node:{self.where.get(cid, LOCAL_NODE)}"
        try:
            names = [c["name"] for c in self._machine_request(cid, "checkpoints")["checkpoints"]]
            n = max([k for k, _ in auto_checkpoints(names)], default=0) + 1
            label = f"before {tool}" + (f" (call {call_id})" if call_id else "")
            name = self._machine_request(cid, "checkpoint", name=auto_name(n, tool), label=label[:200])["name"]
        except Refusal as r:
            self._entry(cid, "error", f"no automatic checkpoint before {tool}: {r.message}", tool=tool, actor=actor)
            return None
        self._entry(cid, "note", f"automatic checkpoint {name} before {tool}", tool=tool, actor=actor,
                    detail={"action": "auto_checkpoint", "name": name, "tool": tool, "call_id": call_id})
        for old in auto_pruned([*names, name]):
            try:
                self._machine_request(cid, "checkpoint_delete", name=old)
            except Refusal as r:
                log.warning("agent %s: automatic checkpoint %s not pruned: %s", cid, old, r.message)
        return name

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
            return self.link.request("templates", timeout=NODE_QUERY_TIMEOUT_S)
        except NodeError as e:
            raise Refusal("node_error", str(e)) from None

    def template_rm(self, key: str) -> None:
        if not TEMPLATE_KEY_RE.fullmatch(key):
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

    def reach_out(self) -> list[int]:
        """Idle agents with nothing to do go looking for people to work with (``runtime.outreach``)."""
        return outreach.reach_out(self)

    def reconcile(self) -> None:
        self.on_held()
        self.deliver_work()
        self.reach_out()
        self.idle_sleep()
        rows = {r["cid"]: r for r in self.hub.read_models.rows(agents_table)}
        with self.lock:
            for cid, r in rows.items():
                key = (r["agent_id"], r["generation"], r.get("wipes", 0))
                have = self.applied.get(cid)
                if cid in self.busy:
                    continue
                if r["run"] != "running":
                    self.exited.pop(cid, None)  # its stop is in the read model: the owner may start it again
                elif self.exited.get(cid) == key:
                    continue
                if r["run"] == "running" and r["node"] != LOCAL_NODE and not self.online(r["node"]):
                    continue  # its node is offline (or revoked): nothing to ask of it until it is back
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
        trace.mark(cid, f"hub: reconcile {getattr(fn, '__name__', fn)}")

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
        name = row.get("node") or LOCAL_NODE
        try:
            link = self.link_of(name)
            if running:
                link.request("stop", cid=cid)
            trace.mark(cid, "hub: start sent")
            vols = volumes_rm.of_agent(self.hub.read_models, agent_id)  # the volumes it was spawned with, in order
            answer = link.request("start", timeout=180, cid=cid, identity=f"{agent_id}:{wipes}",
                                  **fork, **({"volumes": vols} if vols else {}))
        except (NodeError, Refusal) as e:
            with self.lock:
                self.failed[cid] = (key, time.monotonic())
                self.applied.pop(cid, None)
            self._entry(cid, "error", f"the VM did not start on node {name}: {getattr(e, 'message', e)}",
                        actor=f"node:{name}")
            return
        trace.mark(cid, "hub: start answered")
        with self.lock:
            self.applied[cid] = key
            self.where[cid] = name
            self.failed.pop(cid, None)
        self._entry(cid, "note", f"VM booted in {answer.get('boot_s')} s", actor=f"node:{name}",
                    detail={"boot_s": answer.get("boot_s"), "jailed": answer.get("jailed")})

    def _sleep_wake(self, cid: int, how: str) -> None:
        name = self.where.get(cid, LOCAL_NODE)
        try:
            name, link = self._link_for(cid)
            answer = link.request(how, cid=cid)
        except (NodeError, Refusal) as e:
            self._entry(cid, "error", f"{how} failed: {getattr(e, 'message', e)}", actor=f"node:{name}")
            return
        with self.lock:
            (self.asleep.add if how == "sleep" else self.asleep.discard)(cid)
        self._entry(cid, "note", "VM saved and stopped" if how == "sleep" else f"VM woke in {answer.get('wake_s')} s",
                    actor=f"node:{name}", detail=answer)

    def _halt(self, cid: int, how: str) -> None:
        try:
            _, link = self._link_for(cid)
            link.request(how, cid=cid)
        except (NodeError, Refusal) as e:
            log.warning("node %s of cid %s failed: %s", how, cid, getattr(e, "message", e))
        with self.lock:
            self.applied.pop(cid, None)
            self.where.pop(cid, None)
            self.asleep.discard(cid)
        if how == "stop":
            self._safely(ac.disconnected, self.ctx_node(), cid, "stopped")

    def follow_node_events(self, name: str, link: NodeLink) -> None:
        """A node's event lines (machine and harness exits), for the CIDs the hub placed on it only."""
        for ev in link.events():
            cid = ev.get("cid")
            if cid is not None and name != LOCAL_NODE and self._placed_on(cid) != name:
                log.warning("node %s reported an event for cid %s, which is not placed on it; ignored", name, cid)
                continue
            self._node_event(name, ev, cid)

    def _placed_on(self, cid) -> str | None:
        a = self.agent_of(cid) if type(cid) is int else None
        return a.node if a is not None else None

    def _node_event(self, name: str, ev: dict, cid) -> None:
        if ev.get("event") == "exited":
            with self.lock:
                key = self.applied.pop(cid, None)
                if ev.get("reason") and key is not None:  # the node's crash recovery: it stays exited
                    self.exited[cid] = key
            why = f"the VM exited ({ev.get('exit')})" + (f": {ev['reason']}" if ev.get("reason") else "")
            self._safely(ac.disconnected, self.cmds.context(f"node:{name}"), cid, why)
            self._entry(cid, "error", why, actor=f"node:{name}",
                        detail={"exit": ev.get("exit"), "reason": ev.get("reason")})
            if ev.get("reason"):  # and the owner sees it stopped (starting it again is theirs)
                self._safely(ac.stop, self.cmds.context(f"node:{name}", why[:200]), cid)
            self.kick()
        elif ev.get("event") == "recovered":  # the guest crashed; the node started it again
            self._entry(cid, "note", f"the VM exited by itself ({ev.get('exit')}) and was recovered from "
                        f"{ev.get('from')}", actor=f"node:{name}",
                        detail={k: ev.get(k) for k in ("exit", "from", "reason", "recoveries")})
        elif ev.get("event") == "harness_exited":
            self._safely(ac.disconnected, self.cmds.context(f"node:{name}"), cid, "the harness exited")
        elif ev.get("event") == "console" and isinstance(cid, int):  # the live bus's, for events --all
            self.hub.bus.console(cid, str(ev.get("text") or ""), f"node:{name}")

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
        except StoreClosed:  # the hub is stopping: a session that ends with it records nothing more
            log.info("%s not recorded: the store is closed", getattr(fn, "__name__", fn))
            return None

    def _entry(self, cid: int, kind: str, text: str | None = None, tool: str | None = None,
               detail: dict | None = None, actor: str | None = None) -> None:
        ctx = self.cmds.context(actor or f"agent:{cid}")
        self._safely(ac.add_entry, ctx, cid, kind, text, tool, detail)

    def agent_of(self, cid: int):
        """The plaza's own record of the agent with this CID, or None: a CID never given out."""
        if type(cid) is not int:
            return None
        try:
            n = ac.holder(self.cmds.store.get, cid)  # the range's node, or the one its agent moved to
        except Refusal:
            return None
        if not n.holds(cid):
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

    def toolbox(self, agent: Any) -> dict:
        """The tools the agent is offered now, grouped as vm and plaza (``plaza_toolbox``), and the
        library tools (``x_<name>``, run in its own VM) it is offered."""
        library = [{"name": e["name"], "description": e["description"], "version": e["version"]}
                   for e in tooldecide.offered_library(self.hub, agent)]
        return {"library": library, **tools.grouped(tooldecide.offered(self.hub, agent))}

    def held(self) -> bool:
        return plaza_held(self.cmds.store.get)

    # -- streams from guests ----------------------------------------------------------------------
    def on_stream_from(self, node: str, service: str, cid: int, st: Stream) -> None:
        """A guest's stream as a node carries it. A node speaks only for the CIDs the hub placed on it
        (the agent's record says where): another node's CID, a CID never given out, and every stream of a
        revoked node are refused before any service sees them."""
        if node != LOCAL_NODE:
            if node in self.joined.revoked_names or self.links.get(node) is None:
                st.reset(f"node {node} is not connected or revoked; its guests do not reach the hub")
                return
            if self._placed_on(cid) != node:
                log.warning("node %s opened a %s stream for cid %s, which the hub did not place on it", node, service, cid)
                st.reset(f"cid {cid} is not placed on node {node}")
                return
        elif self._sandbox(cid) is None and self._placed_on(cid) not in (None, LOCAL_NODE):
            st.reset(f"cid {cid} is not placed on node {LOCAL_NODE}")
            return
        self._on_stream(service, cid, st)

    def _on_stream(self, service: str, cid: int, st: Stream) -> None:
        if self._sandbox(cid) is not None:  # an E2B sandbox: its own party; egress only (runtime/e2b.py)
            if service == "egress":
                self.egress.handle(cid, st)
            else:
                st.reset(f"no service {service!r} for a sandbox")
            return
        if self.agent_of(cid) is None:
            st.reset(f"cid {cid} was not started by the plaza; it has no role")
            return
        if service == "harness":
            trace.mark(cid, "hub: harness stream")
            HarnessSession(self, cid, st).run()
        elif service == "egress":
            self.egress.handle(cid, st)
        elif service == "git":
            gitdoor.serve_stream(self.hub, cid, st)
        else:
            st.reset(f"no service {service!r} on this hub")

    def _sandbox(self, cid: int):
        sandboxes = getattr(self.hub, "e2b", None)
        return sandboxes.by_cid(cid) if sandboxes is not None else None

    def _decide_egress(self, cid: int, host: str, port: int) -> None:
        sb = self._sandbox(cid)
        if sb is not None:  # the sandbox's own rules, then the laws under the role sandbox
            why = e2b_rules.rule_verdict(sb.network, host)
            if why:
                raise Refused(why)
            party = e2b_rules.SandboxParty(cid)
            d = tooldecide.decide_tool(self.hub, party, "egress.connect", {"host": host, "port": port})
            if d.effect != "allow":
                raise Refused(f"the laws refuse egress.connect to {host}:{port} for a sandbox ({d.reason})")
            return
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
        if self._sandbox(cid) is not None:
            log.info("e2b sandbox cid %s egress %s", cid, detail)
            return
        where = f"{detail.get('host')}:{detail.get('port')}" if detail.get("host") else "(bad request)"
        self._entry(cid, "egress", f"{detail['verdict']} {where}" + (f": {detail['why']}" if detail.get("why") else ""),
                    tool="egress.connect", detail=detail)
