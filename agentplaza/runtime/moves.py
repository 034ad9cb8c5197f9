"""Moving an agent to another node, and draining a node (the guide's "Placement and moves").

``move`` runs the guide's five steps with the agent's machine held busy (reconcile leaves it alone):

1. Sleep: the agent sleeps (an event) and its machine is saved and stopped on the source.
2. Export: the source holds the sleeping machine's files open (``export_open``); nothing else stops.
3. Copy: the source streams its non-zero 512 KiB pieces (read in 4 MiB blocks) and the hub relays
   them to the target's import as they come (``relay``): it holds a stream's window, never an image.
4. Finish: the target checks every digest and holds the machine as a sleeping run; then the new
   placement is recorded (``commands.agents.moved``: the agent's node, the CID from the source's
   registry to the target's, a transcript entry) and the agent wakes on the target.
5. Release: the source closes the export and deletes its copy of the machine.

A failure before the finish drops the import and wakes the agent where it was. What the records
refuse (``commands.agents.movable_in``: plaza held, unknown agent or node, same node, a revoked or
draining node, an agent with work) and what the hub sees live (a node offline, a machine busy with
another request, a volume the target lacks) is refused before the first step, and changes nothing.

``drain`` moves every agent off a node, one at a time (``nodes drain`` calls it).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from ..adapters.kvm.link import NodeError
from ..commands import agents as ac
from ..domain.agents import LOCAL_NODE, node_id
from ..domain.base import Refusal
from ..domain.nodes import REGISTRY_ID

log = logging.getLogger("apid.moves")

#: The longest one node request of a move waits (a sleep writes the guest's memory; a finish fsyncs).
MOVE_REQUEST_TIMEOUT_S = 300.0
#: The longest the relay waits for the next piece, or for the target to take one.
RELAY_TIMEOUT_S = 120.0
#: The relay's reads: at most this much of an image is in the hub at once (plus the streams' windows).
RELAY_READ_BYTES = 1 << 20


def relay(src, dst) -> int:
    """Carry the source's pieces to the target's import as they come; the bytes carried."""
    carried = 0
    while True:
        data = src.read(RELAY_READ_BYTES, timeout=RELAY_TIMEOUT_S)
        if not data:
            break
        dst.write(data, timeout=RELAY_TIMEOUT_S)
        carried += len(data)
    dst.close()
    return carried


def volumes_missing(rt: Any, agent: Any, target: str) -> list[str]:
    """The guide: "A VM moved to another node needs a volume with the same name on that node." The
    agent's volumes (none until volumes are built: then this passes) that the target does not have."""
    names = list(getattr(agent, "volumes", None) or [])
    if not names:
        return []
    try:
        have = set(rt.link_of(target).request("volumes", timeout=60).get("volumes") or [])
    except NodeError:
        have = set()
    return [n for n in names if n not in have]


def check(rt: Any, cid: int, target: str) -> str:
    """Every refusal of a move before anything happens; the source node's name."""
    source = ac.check_move(rt.cmds, cid, target)["source"]
    rt.link_of(target)
    rt.link_of(source)
    missing = volumes_missing(rt, ac.agent(rt.cmds, cid), target)
    if missing:
        raise Refusal("volume_missing", f"node {target} has no volume named {', '.join(missing)}; "
                                        "a moved agent needs its volumes there")
    return source


def move(rt: Any, cid: int, target: str, ctx) -> dict:
    """``agents move CID NODE``: the figures (bytes moved, time taken, where from and to)."""
    source = check(rt, cid, target)
    with rt.lock:
        if cid in rt.busy:
            raise Refusal("agent_busy", f"agent {cid}'s machine is busy with another request; try again")
        rt.busy.add(cid)
    try:
        return _move(rt, cid, source, target, ctx)
    finally:
        rt.hub.read_models.catch_up()  # reconcile reads the roster: it must see the wake before it looks again
        with rt.lock:
            rt.busy.discard(cid)
        rt.kick()


def _move(rt: Any, cid: int, source: str, target: str, ctx) -> dict:
    src, dst = rt.link_of(source), rt.link_of(target)
    actor = f"node:{source}"
    t0 = time.monotonic()
    slept = False
    if ac.agent(rt.cmds, cid).status != "asleep":
        ac.sleep(rt.cmds, ctx, cid)
        slept = True
    held: dict = {}
    try:
        if cid not in rt.asleep:  # 1. sleep
            src.request("sleep", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid)
            with rt.lock:
                rt.asleep.add(cid)
        copied = copy_machine(src, dst, cid, held)  # 2. export, 3. copy, 4. finish
    except Exception as e:  # noqa: BLE001 - any failure before the finish: drop the import, wake where it was
        for st in (held.get("reader"), held.get("writer")):  # neither end waits on a stream the hub gave up
            if st is not None:
                try:
                    st.reset("the move failed")
                except Exception:  # noqa: BLE001 - a gone channel
                    pass
        _undo(rt, cid, src, dst, held.get("export"), held.get("import"), ctx, e, target, slept)
        raise Refusal("move_failed", f"the move of agent {cid} to node {target} failed ({e}); "
                                     f"it is back on node {source}") from None
    exp = held["export"]
    out = {"cid": cid, "from": source, "to": target, **copied, "seconds": round(time.monotonic() - t0, 3)}
    ac.moved(rt.cmds, ctx, cid, target, out)
    with rt.lock:
        rt.where[cid] = target
    rt.hub.read_models.catch_up()
    try:  # the agent wakes on the target (left asleep there, with the error in its transcript, if it cannot)
        woke = dst.request("wake", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid)
        with rt.lock:
            rt.asleep.discard(cid)
        if slept:   # unless its harness said hello first (the woken guest's connects again at once): awake then
            rt._safely(ac.wake, ctx, cid)
        out["wake_s"] = woke.get("wake_s")
    except NodeError as e:
        rt._entry(cid, "error", f"moved to node {target}, but it did not wake there: {e}", actor=f"node:{target}")
    _release(rt, cid, src, exp, actor)  # 5. release
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def copy_machine(src, dst, cid: int, held: dict) -> dict:
    """Steps 2 to 4 between two node links: the source's export, the pieces relayed into the target's
    import, the target's finish into a sleeping run. ``held`` names what is open (for an undo). The
    figures: data bytes moved, bytes on the wire (with each piece's header), the files' size, seconds."""
    exp = held["export"] = src.request("export_open", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid)
    imp = held["import"] = dst.request("import_open", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid,
                                       body={"files": exp["files"]})
    t0 = time.monotonic()
    reader = held["reader"] = src.stream("export_read", export=exp["export"])
    reader.close()  # the hub sends the source nothing on it
    writer = held["writer"] = dst.stream("import_write", **{"import": imp["import"]})
    wire_bytes = relay(reader, writer)
    wrote = json.loads(writer.read_all(RELAY_TIMEOUT_S) or b"{}")
    if "error" in wrote:
        raise NodeError(wrote["error"].get("message") or "the import failed", "node_failed")
    figures = src.request("export_manifest", timeout=MOVE_REQUEST_TIMEOUT_S, export=exp["export"])
    copy_s = time.monotonic() - t0
    dst.request("import_finish", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid, vcpus=exp["vcpus"],
                memory_mib=exp["memory_mib"], body={"manifest": figures["manifest"]}, **{"import": imp["import"]})
    held["import"] = None  # finished: nothing to drop
    return {"bytes_moved": figures["bytes_sent"], "wire_bytes": wire_bytes,
            "apparent_bytes": figures["apparent_bytes"], "copy_seconds": round(copy_s, 3)}


def _undo(rt: Any, cid: int, src, dst, exp, imp, ctx, why: Exception, target: str, slept: bool) -> None:
    for link, op, ids in ((dst, "import_abort", {"import": (imp or {}).get("import")}),
                          (src, "export_close", {"export": (exp or {}).get("export")})):
        if all(ids.values()):
            try:
                link.request(op, timeout=60, **ids)
            except NodeError as e:
                log.warning("move of %s: %s failed: %s", cid, op, e)  # the node drops it at its time limit
    if cid in rt.asleep:
        try:
            src.request("wake", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid)
            with rt.lock:
                rt.asleep.discard(cid)
        except NodeError as e:
            log.warning("move of %s: the wake on the source failed: %s", cid, e)
    if slept and cid not in rt.asleep:
        rt._safely(ac.wake, ctx, cid)
    rt._entry(cid, "error", f"the move to node {target} failed before the finish ({why}); the import was "
                            "dropped and the agent woke where it was", actor=ctx.actor,
              detail={"action": "move", "to": target, "failed": True})


def _release(rt: Any, cid: int, src, exp, actor: str) -> None:
    try:
        src.request("export_close", timeout=60, export=exp["export"])
        src.request("delete", timeout=MOVE_REQUEST_TIMEOUT_S, cid=cid)
    except NodeError as e:
        rt._entry(cid, "error", f"the source did not let go of its copy: {e}", actor=actor)


# -- draining -----------------------------------------------------------------------------------------
def target_for(rt: Any, source: str) -> str:
    """Where an agent leaving ``source`` goes: the node placement would choose among the others that are
    connected, not draining and not revoked (the fewest agents, then the first named), else n0."""
    reg = rt.cmds.store.get(REGISTRY_ID)
    joined = reg.joined if reg is not None else {}
    best = []
    for name, link in rt.links.items():
        info = joined.get(name, {})
        if name == source or not link.up or info.get("draining") or info.get("revoked"):
            continue
        n = rt.cmds.store.get(node_id(name))
        if n is None or (name != LOCAL_NODE and not info):
            continue
        best.append((len(n.cids), int(name[1:]) if name[1:].isdigit() else 1 << 30, name))
    return min(best)[2] if best else LOCAL_NODE


def drain(rt: Any, name: str, ctx, on_move=None) -> dict:
    """Move every agent off node ``name``, one at a time; what moved and what did not (with why)."""
    moved, left = [], []
    n = rt.cmds.store.get(node_id(name))
    for cid in sorted(int(c) for c in (n.cids if n is not None else {})):
        target = target_for(rt, name)
        try:
            out = move(rt, cid, target, ctx)
            moved.append(out)
            if on_move is not None:
                on_move(out)
        except Refusal as r:
            left.append({"cid": cid, "to": target, "code": r.code, "message": r.message})
    return {"node": name, "moved": moved, "left": left}
