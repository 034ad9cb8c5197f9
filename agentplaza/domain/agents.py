"""Agents, the node that runs them, and each agent's transcript.

- ``Node``: a machine that runs agents' microVMs. The hub's own machine is node ``n0``; it owns a
  range of 100 CIDs and is the registry of which CID names which agent (a CID is unique across the
  plaza; a deleted agent's CID is free again). It is made with the first spawn. The machine's facts
  (CPU, memory, OS, the VM backend and the isolation the probe found) are live observations of its
  daemon, not events.
- ``Agent``: one worker. Its role is given by the owner's spawn and never changes; its name is chosen
  once by the agent and changed only by the owner; its model is its own override or none (then the
  role's model or the plaza's default). Its permission mode is not its own state: the agent's
  ``Conduct`` alone keeps it (``domain.conduct``). Status (offline, idle, working, asleep) follows what its harness does; the run state
  (running, stopped, retired) follows the owner's lifecycle commands.
- ``Transcript``: what the agent did, in order (told, model replies, tool calls with the decision on
  each, results, egress lines, errors). A separate aggregate so that lifecycle commands never load it.

Pure: no I/O, no clock; every rule refuses before it records.
"""

from __future__ import annotations

import re
import uuid

from jhrl.catalog import ROLES, tier_of

from .base import Context, PlazaAggregate, Refusal, fixed_id
from .names import known_role

#: The hub's machine is node n0.
LOCAL_NODE = "n0"
#: Every machine owns a range of this many CIDs.
CID_RANGE_SIZE = 100
#: n0's range starts at the first CID a vsock guest may have (0-2 are the hypervisor, loopback, host).
LOCAL_CID_FIRST = 3
#: The first joined node gets 1000-1099, the second 1100-1199 ...
JOINED_CID_FIRST = 1000
#: One spawn starts 1 to 16 agents.
MIN_SPAWN, MAX_SPAWN = 1, 16
#: A machine checkpoint's name, as the node gives it or the owner chooses it (vmm's rule). Matched whole.
CHECKPOINT_RE = re.compile(r"(?!sleep\Z)[a-z0-9][a-z0-9_-]{0,39}")
#: A name: 1-40 characters, letters, digits, space, '-', '_', '.'; starts with a letter or digit. Matched whole.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}")
#: A model is provider/model. Matched whole.
MODEL_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}/[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}")
#: The longest message the owner or an agent can tell.
MAX_TELL_CHARS = 16_000
#: How many of the hub's deliveries an agent remembers (a task delivered again after that is told again).
MAX_DELIVERED_REFS = 500
#: Transcript text and detail are cut to this many characters.
MAX_ENTRY_CHARS = 4_000

STATUSES = ("offline", "idle", "working", "asleep")
RUN_STATES = ("running", "stopped", "retired")
ENTRY_KINDS = ("told", "model", "tool_call", "tool_result", "egress", "error", "done", "note")


def node_id(name: str) -> uuid.UUID:
    return fixed_id(f"node:{name}")


def transcript_id(agent_id: uuid.UUID) -> uuid.UUID:
    return fixed_id(f"transcript:{agent_id}")


def cut(text: str | None, limit: int = MAX_ENTRY_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def check_count(count: int, what: str = "start") -> int:
    """The guide: "You can start 1 to 16 agents at a time" (a spawn, a fork)."""
    if type(count) is not int or not MIN_SPAWN <= count <= MAX_SPAWN:
        raise Refusal("invalid_count", f"you can {what} {MIN_SPAWN} to {MAX_SPAWN} agents at a time")
    return count


def check_model(model: str | None) -> None:
    if model is not None and (not isinstance(model, str) or not MODEL_RE.fullmatch(model)):
        raise Refusal("invalid_model", f"a model is named provider/model, not {model!r}")


def check_name(name: str) -> str:
    name = name.strip()
    if not NAME_RE.fullmatch(name):
        raise Refusal("invalid_name", "a name is 1 to 40 letters, digits, spaces, '.', '-' or '_', starting with a letter or digit")
    return name


def _remember_delivery(a: Agent, ref: str) -> None:
    """Keep the newest ``MAX_DELIVERED_REFS`` deliveries (an agent from an older snapshot starts with none)."""
    a.delivered = (getattr(a, "delivered", []) + [ref])[-MAX_DELIVERED_REFS:]


#: What the plaza asks a new agent, once, when its harness first says hello.
NAME_PROMPT = ("You are a new {role} agent in the plaza, and you have no name yet. Choose a short name for "
               "yourself (1 to 40 letters, digits, spaces, dots, dashes or underscores). Answer with the name alone.")


def chosen_name(answer: str | None, role: str, cid: int) -> str:
    """The name in the agent's answer to ``NAME_PROMPT``: its first line, without quotes or a closing full
    stop. An answer that is no valid name (or none: the model call failed) gives the name ``role-cid``."""
    line = next((x for x in (answer or "").splitlines() if x.strip()), "")
    name = line.strip().strip("\"'`*").rstrip(".!").strip()
    if name.lower().startswith(("name:", "my name is ")):
        name = name.split(":", 1)[-1] if ":" in name else name[len("my name is "):]
        name = name.strip().strip("\"'`*").rstrip(".!").strip()
    return name if NAME_RE.fullmatch(name) else f"{role}-{cid}"


class Node(PlazaAggregate):
    """A machine that runs agents; the registry of its CID range."""

    family = "node"

    class Created(PlazaAggregate.Created):
        name: str
        cid_first: int
        cid_last: int

    class CidAssigned(PlazaAggregate.Event):
        cid: int
        agent_id: str

        def apply(self, node: Node) -> None:
            node.cids[str(self.cid)] = self.agent_id

    class CidReleased(PlazaAggregate.Event):
        cid: int

        def apply(self, node: Node) -> None:
            node.cids.pop(str(self.cid), None)
            node.away.pop(str(self.cid), None)  # a CID of this range deleted while away is free again

    class CidMovedOut(PlazaAggregate.Event):
        """A move: the agent with this CID left for node ``to`` (its CID goes with it)."""
        cid: int
        to: str

        def apply(self, node: Node) -> None:
            node.cids.pop(str(self.cid), None)

    class CidMovedIn(PlazaAggregate.Event):
        """A move: the agent with this CID arrived from node ``source``."""
        cid: int
        agent_id: str
        source: str

        def apply(self, node: Node) -> None:
            node.cids[str(self.cid)] = self.agent_id

    class CidPlaced(PlazaAggregate.Event):
        """On the node whose range holds the CID: where the agent with it is now (``node``; itself when home)."""
        cid: int
        node: str

        def apply(self, node: Node) -> None:
            if self.node == node.name:
                node.away.pop(str(self.cid), None)
            else:
                node.away[str(self.cid)] = self.node

    def __init__(self, name: str, cid_first: int, cid_last: int):
        self.name = name
        self.cid_first = cid_first
        self.cid_last = cid_last
        self.cids: dict[str, str] = {}  # str(cid) -> agent id (str keys: snapshots are JSON)
        #: CIDs of this range whose agents moved to another node: str(cid) -> that node. Not free.
        self.away: dict[str, str] = {}

    @classmethod
    def found_local(cls, ctx: Context) -> Node:
        return cls.start(ctx, id=node_id(LOCAL_NODE), name=LOCAL_NODE, cid_first=LOCAL_CID_FIRST,
                         cid_last=LOCAL_CID_FIRST + CID_RANGE_SIZE - 1)

    def free_cids(self) -> list[int]:
        away = getattr(self, "away", {})  # a snapshot from before moves has none
        return [c for c in range(self.cid_first, self.cid_last + 1) if str(c) not in self.cids and str(c) not in away]

    def in_range(self, cid: int) -> bool:
        return self.cid_first <= cid <= self.cid_last

    def placed_at(self, cid: int) -> str | None:
        """Where the agent with a CID of this range is: this node, the node it moved to, or None."""
        if str(cid) in self.cids:
            return self.name
        return getattr(self, "away", {}).get(str(cid))

    def move_out(self, ctx: Context, cid: int, to: str) -> None:
        if str(cid) not in self.cids:
            raise Refusal("unknown_agent", f"node {self.name} has no agent with cid {cid}")
        self.record(self.CidMovedOut, ctx, cid=cid, to=to)

    def move_in(self, ctx: Context, cid: int, agent_id: str, source: str) -> None:
        if str(cid) in self.cids:
            raise Refusal("agent_busy", f"node {self.name} holds cid {cid} already")
        self.record(self.CidMovedIn, ctx, cid=cid, agent_id=agent_id, source=source)

    def place(self, ctx: Context, cid: int, node: str) -> None:
        """This node's range holds ``cid``: remember where its agent is now."""
        if not self.in_range(cid):
            raise ValueError(f"cid {cid} is not in node {self.name}'s range")
        self.record(self.CidPlaced, ctx, cid=cid, node=node)

    def assign(self, ctx: Context, agent_ids: list[str]) -> list[int]:
        """The lowest free CIDs, one per agent; refused whole if the range cannot hold them all."""
        free = self.free_cids()
        if len(free) < len(agent_ids):
            raise Refusal("no_free_cid", f"node {self.name} has {len(free)} free CIDs of {CID_RANGE_SIZE}; "
                          f"{len(agent_ids)} asked for")
        out = []
        for cid, agent_id in zip(free, agent_ids):
            self.record(self.CidAssigned, ctx, cid=cid, agent_id=agent_id)
            out.append(cid)
        return out

    def holds(self, cid: int) -> bool:
        return str(cid) in self.cids

    def release(self, ctx: Context, cid: int) -> None:
        if str(cid) in self.cids or str(cid) in getattr(self, "away", {}):
            self.record(self.CidReleased, ctx, cid=cid)

    def agent_of(self, cid: int) -> uuid.UUID:
        found = self.cids.get(str(cid))
        if found is None:
            raise Refusal("unknown_agent", f"no agent with cid {cid}")
        return uuid.UUID(found)


class Agent(PlazaAggregate):
    family = "agent"

    class Created(PlazaAggregate.Created):
        cid: int
        role: str
        node: str
        model: str | None
        #: Kept so that agents created before the conduct alone kept the mode still replay: it is
        #: no state of the agent's (new agents record none; ``Conduct`` holds the mode).
        permission_mode: str | None = None
        forked_from: int | None = None  # a fork: the agent whose machine it starts from ...
        fork_checkpoint: str | None = None  # ... at this checkpoint of that machine
        volumes: list[str] | None = None  # the data volumes its VM mounts, in order (``domain.volumes``)

    class Named(PlazaAggregate.Event):
        """The agent chose its own name (once)."""
        name: str

        def apply(self, a: Agent) -> None:
            a.name = self.name

    class Renamed(PlazaAggregate.Event):
        """The owner renamed it."""
        name: str

        def apply(self, a: Agent) -> None:
            a.name = self.name

    class ModelSet(PlazaAggregate.Event):
        model: str | None

        def apply(self, a: Agent) -> None:
            a.model = self.model

    class ModeSet(PlazaAggregate.Event):
        """Recorded before the conduct alone kept the mode (always with a ``Conduct.ModeSet`` in the same
        commit): it still replays, and changes nothing of the agent's."""
        permission_mode: str

        def apply(self, a: Agent) -> None:
            pass

    class Connected(PlazaAggregate.Event):
        """Its harness said hello over the channel: ready for work."""

        def apply(self, a: Agent) -> None:
            a.status = "idle" if a.working is None else "working"

    class Disconnected(PlazaAggregate.Event):
        why: str

        def apply(self, a: Agent) -> None:
            a.status = "offline"

    class Told(PlazaAggregate.Event):
        """Work for it: a message (from the owner, or another agent), or work the hub delivers."""
        item: str
        text: str
        ref: str | None = None  # what the hub delivered (a task to do or review): told once

        def apply(self, a: Agent) -> None:
            a.queue.append({"item": self.item, "text": self.text, "from": self.actor})
            if self.ref is not None:
                _remember_delivery(a, self.ref)

    class Delivered(PlazaAggregate.Event):
        """Work the hub would deliver that the agent took itself (a task it claimed): never told to it."""
        ref: str

        def apply(self, a: Agent) -> None:
            _remember_delivery(a, self.ref)

    class WorkStarted(PlazaAggregate.Event):
        item: str

        def apply(self, a: Agent) -> None:
            a.queue = [q for q in a.queue if q["item"] != self.item]
            a.working = self.item
            a.status = "working"

    class WorkWithdrawn(PlazaAggregate.Event):
        """A queued item taken back before the agent started it (an editor cancelled its prompt)."""
        item: str

        def apply(self, a: Agent) -> None:
            a.queue = [q for q in a.queue if q["item"] != self.item]

    class WorkFinished(PlazaAggregate.Event):
        item: str
        outcome: str  # done, failed, cancelled

        def apply(self, a: Agent) -> None:
            a.working = None
            if a.status == "working":
                a.status = "idle"

    class Slept(PlazaAggregate.Event):
        """Its VM was saved and stopped; its memory is free."""

        def apply(self, a: Agent) -> None:
            a.status = "asleep"

    class Woke(PlazaAggregate.Event):
        """Its VM is restored where it was (by the owner, or because work came for it)."""

        def apply(self, a: Agent) -> None:
            a.status = "idle"

    class Moved(PlazaAggregate.Event):
        """Its machine was copied to another node, asleep, and that node runs it from now on (the guide's
        "records the new placement"); its CID is kept."""
        source: str
        target: str
        bytes_moved: int
        seconds: float

        def apply(self, a: Agent) -> None:
            a.node = self.target

    class Stopped(PlazaAggregate.Event):
        def apply(self, a: Agent) -> None:
            a.run = "stopped"
            a.status = "offline"
            a.working = None

    class Restarted(PlazaAggregate.Event):
        generation: int

        def apply(self, a: Agent) -> None:
            a.run = "running"
            a.status = "offline"
            a.working = None
            a.generation = self.generation

    class Wiped(PlazaAggregate.Event):
        generation: int

        def apply(self, a: Agent) -> None:
            a.run = "running"
            a.status = "offline"
            a.working = None
            a.queue = []
            a.generation = self.generation
            a.wipes += 1

    class Retired(PlazaAggregate.Event):
        def apply(self, a: Agent) -> None:
            a.run = "retired"
            a.status = "offline"
            a.working = None
            a.queue = []

    class Deleted(PlazaAggregate.Event):
        def apply(self, a: Agent) -> None:
            a.deleted = True
            a.status = "offline"
            a.working = None
            a.queue = []

    def __init__(self, cid: int, role: str, node: str, model: str | None, permission_mode: str | None = None,
                 forked_from: int | None = None, fork_checkpoint: str | None = None,
                 volumes: list[str] | None = None):
        del permission_mode  # an old event's: the conduct keeps the mode
        self.cid = cid
        self.volumes: list[str] = list(volumes or ())
        self.forked_from, self.fork_checkpoint = forked_from, fork_checkpoint
        self.role = role
        self.node = node
        self.model = model
        self.name: str | None = None
        self.status = "offline"
        self.run = "running"
        self.generation = 0
        self.wipes = 0
        self.queue: list[dict] = []  # {"item", "text"}, oldest first
        self.working: str | None = None
        self.deleted = False
        self.delivered: list[str] = []  # the refs of the hub's deliveries, newest last

    @property
    def tier(self) -> str:
        return tier_of(self.role)

    # -- the owner ------------------------------------------------------------------------------
    @classmethod
    def spawn(cls, ctx: Context, *, agent_id: uuid.UUID, cid: int, role: str, node: str,
              model: str | None, volumes: list[str] | None = None) -> Agent:
        """``volumes``: its role's list at this spawn (kept for the agent's life: a later list is for later agents)."""
        if ctx.actor != "owner":
            raise Refusal("owner_only", "only the owner starts agents (C-005)")
        known_role(role)
        check_model(model)
        extra = {"volumes": list(volumes)} if volumes else {}
        return cls.start(ctx, id=agent_id, cid=cid, role=role, node=node, model=model, **extra)

    def fork(self, ctx: Context, *, agent_id: uuid.UUID, cid: int, checkpoint: str) -> Agent:
        """A copy of this agent: the same role and model, a name of its own (it names itself), its machine
        started from a copy of this one's at ``checkpoint``. (Its permission mode is its conduct's: the
        fork command gives the copy's conduct the source's mode, ``conduct.conduct_for_new_agent``.)"""
        if ctx.actor != "owner":
            raise Refusal("owner_only", "only the owner starts agents (C-005)")
        self._not_retired("be forked")
        if not isinstance(checkpoint, str) or not CHECKPOINT_RE.fullmatch(checkpoint):
            raise Refusal("invalid_checkpoint", f"{checkpoint!r} is not a checkpoint name")
        vols = getattr(self, "volumes", None)   # a fork mounts its source's volumes (its memory expects them)
        return type(self).start(ctx, id=agent_id, cid=cid, role=self.role, node=self.node, model=self.model,
                                forked_from=self.cid, fork_checkpoint=checkpoint,
                                **({"volumes": list(vols)} if vols else {}))

    def _alive(self) -> None:
        if self.deleted:
            raise Refusal("unknown_agent", f"agent {self.cid} was deleted")

    def _not_retired(self, what: str) -> None:
        self._alive()
        if self.run == "retired":
            raise Refusal("agent_retired", f"agent {self.cid} is retired; it cannot {what}")

    def rename(self, ctx: Context, name: str) -> None:
        self._alive()
        name = check_name(name)
        if name != self.name:
            self.record(self.Renamed, ctx, name=name)

    def set_model(self, ctx: Context, model: str | None) -> None:
        self._alive()
        check_model(model)
        if model != self.model:
            self.record(self.ModelSet, ctx, model=model)

    def was_delivered(self, ref: str) -> bool:
        # getattr: an agent restored from a snapshot taken before deliveries were recorded has none
        return ref in getattr(self, "delivered", ())

    def tell(self, ctx: Context, item: str, text: str, ref: str | None = None, limit: int = MAX_TELL_CHARS) -> None:
        """Queue work. A delivery the hub already made (the same ``ref``) is not told again.  ``limit``: an
        editor's prompt over ACP may carry its attachments too (``domain.acp.MAX_PROMPT_CHARS``)."""
        self._not_retired("take work")
        if ref is not None and self.was_delivered(ref):
            raise Refusal("already_delivered", f"agent {self.cid} was already given {ref}")
        if self.run == "stopped":
            raise Refusal("agent_stopped", f"agent {self.cid} is stopped; restart it first")
        if not text.strip():
            raise Refusal("empty_message", "the message is empty")
        if len(text) > limit:
            raise Refusal("message_too_long", f"a message is at most {limit} characters")
        if self.status == "asleep":  # work wakes a sleeping agent first
            self.record(self.Woke, ctx)
        self.record(self.Told, ctx, item=item, text=text, ref=ref)

    def took_itself(self, ctx: Context, ref: str) -> None:
        """The agent took this delivery itself (it claimed the task): the hub does not tell it."""
        self._alive()
        if not self.was_delivered(ref):
            self.record(self.Delivered, ctx, ref=ref)

    def sleep(self, ctx: Context) -> None:
        """Only an idle agent with nothing queued sleeps."""
        self._not_retired("sleep")
        if self.status == "asleep":
            raise Refusal("agent_asleep", f"agent {self.cid} is already asleep")
        if self.run != "running" or self.status == "offline":
            raise Refusal("agent_offline", f"agent {self.cid} is not running")
        if self.working is not None or self.queue:
            raise Refusal("agent_busy", f"agent {self.cid} has work; it sleeps only when its queue is empty")
        self.record(self.Slept, ctx)

    def wake(self, ctx: Context) -> None:
        self._not_retired("wake")
        if self.status != "asleep":
            raise Refusal("agent_awake", f"agent {self.cid} is not asleep")
        self.record(self.Woke, ctx)

    def check_movable(self, target: str) -> None:
        """The guide's move starts with a sleep: only a running agent that is idle (or asleep already) with
        nothing queued moves, and never to the node it is on."""
        self._not_retired("move")
        if target == self.node:
            raise Refusal("same_node", f"agent {self.cid} is on node {target} already")
        if self.run != "running":
            raise Refusal("agent_stopped", f"agent {self.cid} is stopped; start it before moving it")
        if self.status == "offline":
            raise Refusal("agent_offline", f"agent {self.cid} is not running; it moves once its machine is up")
        if self.working is not None or self.queue:
            raise Refusal("agent_busy", f"agent {self.cid} has work; it moves only when its queue is empty")

    def moved(self, ctx: Context, target: str, bytes_moved: int, seconds: float) -> None:
        """The move's finish: the new placement. The machine slept first (it is asleep now)."""
        self._not_retired("move")
        if self.status != "asleep":
            raise Refusal("agent_awake", f"agent {self.cid} must be asleep while its machine moves")
        if target == self.node:
            raise Refusal("same_node", f"agent {self.cid} is on node {target} already")
        self.record(self.Moved, ctx, source=self.node, target=target, bytes_moved=bytes_moved,
                    seconds=round(seconds, 3))

    def stop(self, ctx: Context) -> None:
        self._not_retired("stop")
        if self.run == "stopped":
            raise Refusal("agent_stopped", f"agent {self.cid} is already stopped")
        self.record(self.Stopped, ctx)

    def restart(self, ctx: Context) -> None:
        """Stop (if running) and boot again; the workspace is kept."""
        self._not_retired("restart")
        self.record(self.Restarted, ctx, generation=self.generation + 1)

    def wipe(self, ctx: Context) -> None:
        """Stop, make the workspace new, boot again; its queue is dropped."""
        self._not_retired("be wiped")
        self.record(self.Wiped, ctx, generation=self.generation + 1)

    def retire(self, ctx: Context) -> None:
        """Stop for good. The record (transcript, wallet, reputation) stays; it never runs again."""
        self._not_retired("retire again")
        self.record(self.Retired, ctx)

    def delete(self, ctx: Context) -> None:
        """Stop and delete its VM run; its CID is free again."""
        self._alive()
        self.record(self.Deleted, ctx)

    # -- its harness, through the hub -----------------------------------------------------------
    def name_self(self, ctx: Context, name: str) -> None:
        self._alive()
        if self.name is not None:
            raise Refusal("already_named", f"agent {self.cid} already has its name ({self.name}); only the owner renames it")
        self.record(self.Named, ctx, name=check_name(name))

    def connected(self, ctx: Context) -> None:
        self._alive()
        if self.run == "running" and self.status in ("offline", "asleep"):
            self.record(self.Connected, ctx)

    def disconnected(self, ctx: Context, why: str) -> None:
        if self.status not in ("offline", "asleep") and not self.deleted:
            self.record(self.Disconnected, ctx, why=cut(why, 200))

    def take_work(self, ctx: Context) -> dict | None:
        """The next queued item ({"item", "text"}), now running; None if there is none or one runs."""
        if self.deleted or self.run != "running" or self.working is not None or not self.queue:
            return None
        item = dict(self.queue[0])
        self.record(self.WorkStarted, ctx, item=item["item"])
        return item

    def withdraw(self, ctx: Context, item: str) -> None:
        if not any(q["item"] == item for q in self.queue):
            raise Refusal("not_working_on", f"agent {self.cid} has no queued item {item}")
        self.record(self.WorkWithdrawn, ctx, item=item)

    def finish_work(self, ctx: Context, item: str, outcome: str) -> None:
        if self.working != item:
            raise Refusal("not_working_on", f"agent {self.cid} is not working on {item}")
        if outcome not in ("done", "failed", "cancelled"):
            raise Refusal("invalid_outcome", "outcome is done, failed or cancelled")
        self.record(self.WorkFinished, ctx, item=item, outcome=outcome)


class Transcript(PlazaAggregate):
    """One agent's transcript: every entry an event, in order."""

    family = "agent"

    class Created(PlazaAggregate.Created):
        agent_id: str
        cid: int

    class Entry(PlazaAggregate.Event):
        cid: int
        seq: int
        kind: str
        text: str | None
        tool: str | None
        detail: dict

        def apply(self, t: Transcript) -> None:
            t.count = self.seq

    def __init__(self, agent_id: str, cid: int):
        self.agent_id = agent_id
        self.cid = cid
        self.count = 0

    @classmethod
    def open(cls, ctx: Context, agent_id: uuid.UUID, cid: int) -> Transcript:
        return cls.start(ctx, id=transcript_id(agent_id), agent_id=agent_id.hex, cid=cid)

    def add(self, ctx: Context, kind: str, text: str | None = None, tool: str | None = None,
            detail: dict | None = None) -> int:
        if kind not in ENTRY_KINDS:
            raise ValueError(f"unknown transcript entry kind {kind!r}")
        seq = self.count + 1
        self.record(self.Entry, ctx, cid=self.cid, seq=seq, kind=kind, text=cut(text), tool=tool,
                    detail=_cut_detail(detail or {}))
        return seq


def _cut_detail(detail: dict) -> dict:
    out = {}
    for k, v in detail.items():
        if isinstance(v, str):
            v = cut(v)
        out[str(k)] = v
    return out


#: The 17 built-in roles, grouped by what they do (``agentplaza society roles``).
ROLE_INFO: dict[str, tuple[str, str]] = {
    "orchestrator": ("plans and offices", "plans the work, posts and assigns tasks, proposes agents only when the owner asks"),
    "mayor": ("plans and offices", "approves project plans and merges; holds a council seat"),
    "finance": ("council seats", "head of Finance: reports on the books; a council seat"),
    "counsel": ("council seats", "Legal, the agents' counsel: defends agents in cases; a council seat"),
    "incident": ("council seats", "head of Incident response: opens incidents, steers harnesses; a council seat"),
    "judge": ("courts", "rules on cases; never sits on the council"),
    "prosecutor": ("courts", "files cases; never sits on the council"),
    "architect": ("project work", "designs, researches, plans, builds and reviews"),
    "planner": ("project work", "writes a project's proposal and tasks document"),
    "researcher": ("project work", "attaches approaches, references and tools"),
    "builder": ("project work", "writes code, runs engines, uses workstations"),
    "reviewer": ("project work", "reviews and merges pull requests"),
    "tester": ("project work", "tests, runs engines, uses workstations"),
    "writer": ("project work", "writes documents and deliverables"),
    "designer": ("project work", "images and design work; uses workstations"),
    "breeder": ("Foundry", "exports data, writes and submits training jobs, asks for shadow mode"),
    "sandbox": ("outside", "an E2B sandbox: its own party; its only tool is an outbound connection"),
}
assert tuple(ROLE_INFO) == ROLES, "ROLE_INFO must list jhrl's 17 roles in order"


def roles() -> list[dict]:
    return [{"role": r, "tier": tier_of(r), "group": g, "what": w} for r, (g, w) in ROLE_INFO.items()]
