"""The guests, played where the runtime meets the channel: the hub's real side of the harness
protocol (``runtime.session.HarnessSession`` on a ``runtime.fleet.AgentRuntime``, as the node's
streams reach it) reads what a simulated guest writes on its stream.

A guest is a script of bytes: the requests a harness sends, one JSON object a line, or garbage (not
JSON, not an object, unknown ops, fields of the wrong type, frames the channel's own decoder
refuses), or too much (a line over ``contract.LINE_BYTES_MAX``, a string over the gate's channel
limit, a shared file over ``contract.MAX_FILE``, an output far over what a transcript keeps), or
nothing (it takes a work item and goes silent until its channel closes).

The session runs on a thread of its own, as on a hub, but in lock step with the simulator: the
simulator hands the stream its next bytes and waits until the session is reading again (or has
ended), so every commit the session makes falls at the same place in the log in every run of a
seed.  A hub crash leaves the session where it was: its thread never runs again (the process that
ran it is gone) and the guest reconnects to the hub that starts next.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vmm.channel import HEADER, FrameDecoder, ProtocolError, StreamReset, encode
from vmm.guest import contract

from ..commands import agents as agent_commands
from ..domain.agents import LOCAL_NODE
from ..events.bus import Bus
from ..projections.agents import agents_table
from ..runtime.fleet import AgentRuntime
from ..runtime.session import HarnessSession

if TYPE_CHECKING:
    from .world import World

#: How long the simulator waits for a session to read again before it calls the session stuck (real
#: seconds; a session answers a line in milliseconds, so this is only ever reached by a hang).
STUCK_S = 60.0
#: The behaviours a guest fault draws from (``fault:guest_garbage`` and its kin).
BEHAVIOURS = ("garbage", "bad_frames", "line_too_long", "too_much", "silent", "well")


class HubDied(BaseException):
    """The hub's process is gone: whatever its threads would do next never happens."""


class _Dead:
    def __getattr__(self, name: str) -> Any:
        raise HubDied


@dataclass
class SimHub:
    """What the runtime reads of a hub (``hub.commands``, ``hub.read_models``, ``hub.folders``,
    ``hub.bus``, ``hub.vault``), made of the world's parts."""

    commands: Any
    read_models: Any
    folders: Any
    vault: Any
    bus: Bus = field(default_factory=Bus)
    e2b: Any = None


class _Channel:
    closed = False


class SimStream:
    """A guest's harness stream as the hub's session sees it: ``read`` gives what the guest wrote
    (through the channel's frame decoder when the guest writes frames), ``write`` keeps the answers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._rx: list[bytes] = []
        self._frames: list[bytes] = []
        self.waiting = False
        self.ended = False
        self.dead = False  # the hub crashed: this stream's session never runs again
        self.answers: list[bytes] = []
        # what ``HarnessSession.gone`` reads of a channel stream
        self._reset: str | None = None
        self._remote_closed = False
        self.channel = _Channel()

    # -- the session's side (its thread) ------------------------------------------------------------
    def read(self, n: int = 65536, timeout: float | None = None) -> bytes:
        with self._cond:
            while True:
                if self.dead:
                    raise HubDied
                if self._frames:  # raw channel bytes: what the channel's reader makes of them
                    raw = self._frames.pop(0)
                    try:
                        frames = FrameDecoder().feed(raw)
                    except ProtocolError as e:  # the channel dies: every stream on it is reset
                        self._reset = str(e)
                        raise StreamReset(f"the channel died: {e}") from None
                    self._rx[:0] = [payload for _t, _s, payload in frames]
                    continue
                if self._rx:
                    return self._rx.pop(0)
                if self._remote_closed:
                    return b""
                self.waiting = True
                self._cond.notify_all()
                self._cond.wait()
                self.waiting = False

    def write(self, data: bytes, timeout: float | None = None) -> None:
        if self.dead:
            raise HubDied
        self.answers.append(data)

    # -- the guest's side (the simulator) -----------------------------------------------------------
    def _settle(self, thread: threading.Thread) -> None:
        """Wait until the session has taken everything and reads again, or has ended."""
        with self._cond:
            self._cond.notify_all()
            ok = self._cond.wait_for(lambda: self.ended or (self.waiting and not self._rx and not self._frames),
                                     STUCK_S)
        if not ok:
            raise RuntimeError("the harness session did not read again: it hangs")
        thread.join(0 if not self.ended else STUCK_S)

    def send(self, thread: threading.Thread, data: bytes, *, framed: bool = False) -> None:
        with self._cond:
            (self._frames if framed else self._rx).append(data)
            self.waiting = False  # until the session has taken it and reads again
        self._settle(thread)

    def close(self, thread: threading.Thread) -> None:
        """The guest's side closes (its VM went, or it exited): the session reads the end."""
        with self._cond:
            self._remote_closed = True
            self.waiting = False  # until the session has read the end (and so has ended)
        self._settle(thread)


class Guest:
    """One connection of a simulated harness: the real session on its thread, and its stream."""

    def __init__(self, rt: AgentRuntime, cid: int, works: bool = False):
        self.cid = cid
        self.rt = rt
        #: A harness that works its queue whenever time passes (``hub_passes``); the others (a silent
        #: one, one that misbehaved) only do what their script says.
        self.works = works
        self.stream = SimStream()
        self.session = HarnessSession(rt, cid, self.stream)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"sim-guest-{cid}")
        self.thread.start()
        self.stream._settle(self.thread)

    def _run(self) -> None:
        try:
            self.session.run()
        except HubDied:
            pass
        finally:
            with self.stream._cond:
                self.stream.ended = True
                self.stream._cond.notify_all()

    @property
    def ended(self) -> bool:
        return self.stream.ended

    def ask(self, req: dict | bytes) -> dict | None:
        """Send one request line; the answer, parsed (None if the session ended instead)."""
        before = len(self.stream.answers)
        line = req if isinstance(req, bytes) else json.dumps(req).encode() + b"\n"
        self.stream.send(self.thread, line)
        if len(self.stream.answers) == before:
            return None
        return json.loads(self.stream.answers[-1])

    def frames(self, raw: bytes) -> None:
        self.stream.send(self.thread, raw, framed=True)

    def close(self) -> None:
        if not self.ended:
            self.stream.close(self.thread)

    def abandon(self) -> None:
        """The hub died under this session: it never runs again, and writes nothing more."""
        self.rt.hub = _Dead()
        with self.stream._cond:
            self.stream.dead = True
            self.stream._cond.notify_all()
        self.thread.join(STUCK_S)


class SimNode:
    """Node n0 as the runtime's link sees it (``NodeLink.request`` and ``events``): every request is
    answered at once, and the events it reports are the ones the simulator queues."""

    def __init__(self) -> None:
        self.queued: list[dict] = []
        self.requests: list[tuple[str, int | None]] = []
        self.running: set[int] = set()
        self.up = True  # connected, as the fleet's link_of asks

    def request(self, op: str, timeout: float | None = None, **kw: Any) -> dict:
        cid = kw.get("cid")
        self.requests.append((op, cid))
        if op == "start":
            self.running.add(cid)
            return {"boot_s": 1.5, "jailed": True}
        if op in ("stop", "delete", "sleep"):
            self.running.discard(cid)
        if op == "wake":
            self.running.add(cid)
            return {"wake_s": 0.2}
        return {}

    def events(self):
        while self.queued:
            yield self.queued.pop(0)

    def close(self) -> None:
        pass


class ByCid:
    """The read models as the simulated runtime reads them: the agents' rows by CID, the same on SQLite
    and PostgreSQL (whose heap order moves a row once it is updated), so the runtime's passes over the
    agents (idle sleep, outreach) commit in one order on both. Everything else as it is."""

    def __init__(self, rm: Any):
        self._rm = rm

    def rows(self, table: Any, *where: Any, order_by: Any = None, limit: int | None = None) -> list[dict]:
        if table is agents_table and order_by is None and limit is None:
            return sorted(self._rm.rows(table, *where), key=lambda r: r["cid"])
        return self._rm.rows(table, *where, order_by=order_by, limit=limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rm, name)


def runtime_of(w: World) -> AgentRuntime:
    """The hub's runtime on a simulated node n0 (its guests are the simulator's), made anew after a
    crash.  Its node requests run in the step that makes them, not on threads of their own, so their
    commits fall in the same order in every run."""
    rt = AgentRuntime(SimHub(w.cmds, ByCid(w.rm), w.folders, w.vault), node="off")
    rt.links[LOCAL_NODE] = SimNode()  # type: ignore[assignment]
    pending: list[tuple] = []
    rt.sim_pending = pending  # type: ignore[attr-defined]

    def spawn_later(fn, cid: int, *args) -> None:  # reconcile spawns under its lock: run after it
        rt.busy.add(cid)
        pending.append((fn, cid, args))

    rt._spawn = spawn_later  # type: ignore[method-assign]
    return rt


def reconcile(rt: AgentRuntime) -> None:
    """One pass of the runtime's reconcile, and the node requests it made, in the order it made them
    (on read models that follow the log, as the hub's follower keeps them)."""
    rt.hub.read_models.catch_up()
    rt.reconcile()
    pending = rt.sim_pending  # type: ignore[attr-defined]
    # The hub makes these requests at once, each on a thread of its own; here one after another, by CID
    # (a stable sort: one agent's keep their order). The pass reads the agents' rows in the order the
    # store gives them, which is not the same on PostgreSQL (an updated row moves) as on SQLite.
    pending.sort(key=lambda p: p[1])
    while pending:
        fn, cid, args = pending.pop(0)
        try:
            fn(cid, *args)
        finally:
            rt.busy.discard(cid)


def node_lost(w: World, n: int) -> str:
    """Node n0 disappears with every guest on it at once and comes back: each guest's channel closes,
    the node reports each VM exited, then the runtime's reconcile boots every agent the plaza runs
    again and the guests that were connected reconnect.  Afterwards the node runs exactly the agents
    the plaza says run (raises ``AssertionError`` when not)."""
    rt = w.runtime
    reconcile(rt)  # what the node ran before it went
    was = {cid: w.guests.pop(cid) for cid in sorted(w.guests)}  # (kept: a working harness reconnects working)
    for g in was.values():
        g.close()
    node: SimNode = rt.links[LOCAL_NODE]  # type: ignore[assignment]
    node.queued = [{"event": "exited", "cid": cid, "exit": (137, 0)[n % 2]} for cid in sorted(rt.applied)]
    lost = len(node.queued)
    node.running.clear()
    rt.follow_node_events(LOCAL_NODE, node)
    reconcile(rt)  # the node is back: the runtime boots what the plaza runs
    w.guests.update(was)
    w.reconnect()
    w.rm.catch_up()
    running = {r["cid"] for r in w.rm.rows(agents_table) if r["run"] == "running"}
    if set(rt.applied) != running or node.running != running:
        raise AssertionError(f"after the node came back it runs {sorted(node.running)}; the plaza runs "
                             f"{sorted(running)}")
    return f"node n0 lost {lost} VMs and {len(was)} guests; it runs {len(running)} again, {len(w.guests)} reconnected"


def bad_frames() -> bytes:
    """A DATA frame of the harness stream, then a frame type the channel does not know."""
    hello = json.dumps({"op": "hello"}).encode() + b"\n"
    return encode(1, 1, hello) + HEADER.pack(0xEE, 0, 0, 1, 4) + b"junk"


def script(behaviour: str, item: str | None, n: int) -> list[tuple[str, Any]]:
    """What a guest of ``behaviour`` writes once it has said hello and asked for work (``item``: the
    work item it was handed, if any): ``("line", bytes)``, ``("frames", bytes)``, ``("close", None)``
    (its channel closes) or ``("quiet", None)`` (it stops talking and keeps its channel open)."""
    done = [("line", json.dumps({"op": "done", "item": item, "outcome": ("done", "failed")[n % 2],
                                 "text": "finished"}).encode() + b"\n")] if item else []
    if behaviour == "garbage":
        lines = [b"\x00\xff\xfe not json at all\n", b"[1, 2, 3]\n", b'{"op": "launch_missiles"}\n',
                 b'{"op": "decide", "tool": 7, "args": "rm -rf /"}\n', b'{"op": "done", "item": 5}\n',
                 b'{"op": "result", "ok": "yes", "meta": {"status": [1], "bytes": true}}\n',
                 b"[" * 200 + b"]" * 200 + b"\n", b'{"op": "share", "path": 3, "content": "%%%"}\n',
                 b'{"op": "next", "wait": "forever"}\n', b'{"op": "name", "name": "\\u0000"}\n']
        out = [("line", lines[(n + i) % len(lines)]) for i in range(4 + n % 4)]
        return out + (done if n % 3 else [("close", None)])
    if behaviour == "bad_frames":
        return [("frames", bad_frames())]
    if behaviour == "line_too_long":
        return [("line", b'{"op": "result", "output": "' + b"x" * (contract.LINE_BYTES_MAX + 1))]
    if behaviour == "too_much":
        big = "y" * (3 * contract.MAX_OUTPUT)
        over_gate = "z" * (2 * 1024 * 1024 + 1)
        share = base64.b64encode(b"w" * (contract.MAX_FILE + 1)).decode()
        lines = [{"op": "result", "ok": True, "tool": "vm.shell", "output": big,
                  "meta": {k: "m" * 10_000 for k in contract.RESULT_META}},
                 {"op": "result", "ok": True, "tool": "vm.shell", "output": over_gate},
                 {"op": "share", "path": "big.bin", "content": share}]
        return [("line", json.dumps(x).encode() + b"\n") for x in lines] + done
    if behaviour == "silent":
        return [("quiet", None)]
    return [("line", json.dumps({"op": "decide", "tool": "vm.read_file", "args": {"path": "notes.txt"},
                                 "call_id": f"c{n % 100}"}).encode() + b"\n"), *done]


def play(w: World, guests: dict[int, Guest], cid: int, behaviour: str, n: int) -> str:
    """The owner gives agent ``cid`` a work item (and the runtime delivers the tasks it was given);
    its guest connects, asks for work and behaves as ``behaviour`` says.  Returns what happened.
    The hub must answer every line it reads with one JSON object (checked here)."""
    old = guests.pop(cid, None)
    if old is not None:
        old.close()
    rt = w.runtime
    try:
        agent_commands.tell(w.cmds, w.cmds.context("owner"), cid, f"work number {n % 1000}")
    except Exception:  # noqa: BLE001 - a refusal (stopped, retired) leaves the queue as it was
        pass
    rt.deliver_work()
    g = Guest(rt, cid)
    hello = g.ask({"op": "hello", "role": "mayor", "cid": 1})  # the guest's claims are ignored
    item = None
    nxt = g.ask({"op": "next", "wait": 0})
    if isinstance(nxt, dict) and isinstance(nxt.get("item"), dict):
        item = nxt["item"]["item"]
    said = []
    for kind, data in script(behaviour, item, n):
        if g.ended:
            break
        if kind == "line":
            before = len(g.stream.answers)
            g.stream.send(g.thread, data)
            if not g.ended:
                for raw in g.stream.answers[before:]:
                    answer = json.loads(raw)
                    if not isinstance(answer, dict):
                        raise AssertionError(f"the hub answered a line with {raw[:80]!r}")
                    said.append((answer.get("error") or {}).get("code", "ok"))
        elif kind == "frames":
            g.frames(data)
        elif kind == "close":
            g.close()
        elif kind == "quiet":
            guests[cid] = g
            return f"agent {cid}'s guest took {item} and went silent"
    if not g.ended:
        guests[cid] = g  # it stays connected
    state = "ended" if g.ended else "connected"
    return (f"agent {cid}'s guest ({behaviour}) {'took ' + item if item else 'had no work'}, was answered "
            f"{', '.join(said) or 'nothing'}; its session {state}"
            + ("" if isinstance(hello, dict) and "error" not in hello else " (hello refused)"))


#: The most passes of the runtime's reconcile one simulated stretch of time runs (the hub runs one every
#: second; a pass that boots an agent leaves its sleep to the next).
MAX_PASSES = 4


def hub_passes(w: World) -> tuple[int, int, int]:
    """The runtime's reconcile as time passes, until it asks the node for nothing more: the work the
    scheduler gave delivered (a sleeping agent woken by it), idle agents gone looking for people,
    idle agents put to sleep by the policy's rule (``AgentRuntime.idle_sleep``), the node told to
    sleep and wake them.  Afterwards the node sleeps exactly the agents the plaza has asleep (raises
    ``AssertionError`` when not).  (How many are asleep, how many the node put to sleep, how many it woke.)"""
    rt = w.runtime
    node: SimNode = rt.links[LOCAL_NODE]  # type: ignore[assignment]
    before = len(node.requests)
    for _ in range(MAX_PASSES):  # until a pass changes nothing (it reads what the one before wrote)
        seen, position = len(node.requests), w.store.max_position()
        reconcile(rt)
        work_queues(w)
        if len(node.requests) == seen and w.store.max_position() == position:
            break
    w.rm.catch_up()
    rows = [r for r in w.rm.rows(agents_table) if r["run"] == "running"]
    asleep = {r["cid"] for r in rows if r["status"] == "asleep"}
    if asleep & set(rt.applied) != rt.asleep or asleep & node.running:
        raise AssertionError(f"the plaza has {sorted(asleep)} asleep; the runtime sleeps {sorted(rt.asleep)} and the "
                             f"node runs {sorted(asleep & node.running)} of them")
    ops = [op for op, _ in node.requests[before:]]
    return len(asleep), ops.count("sleep"), ops.count("wake")


#: The most items a working harness takes in one stretch of time.
MAX_ITEMS = 5


def take_and_do(g: Guest) -> str | None:
    """A harness asks for its next item and, handed one, does it; the item (None: nothing queued)."""
    nxt = g.ask({"op": "next", "wait": 0}) if not g.ended else None
    item = nxt["item"]["item"] if isinstance(nxt, dict) and isinstance(nxt.get("item"), dict) else None
    if item is not None and not g.ended:
        g.ask({"op": "done", "item": item, "outcome": "done", "text": "finished"})
    return item


def work_queues(w: World) -> int:
    """Every connected harness that works (``Guest.works``) takes its queued items and does them; how many."""
    done = 0
    for cid in sorted(w.guests):
        g = w.guests[cid]
        for _ in range(MAX_ITEMS if g is not None and g.works else 0):
            if take_and_do(g) is None:
                break
            done += 1
        if g is not None and g.ended:
            del w.guests[cid]
    return done
