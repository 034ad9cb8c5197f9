"""The agents' commands: spawn, fork, the owner's lifecycle actions, and what their harnesses report.

Each command loads node n0 (the CID registry), the agent and, where it writes one, the agent's
transcript, and commits them together.  A new agent's wallet opens in the same commit as the agent.
``spawn_in`` is the spawn's decision on its own, for another command's unit (approving an agent
proposal spawns in the approval's own commit).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from ..domain import treasury as t
from ..domain.agents import (
    LOCAL_NODE,
    Agent,
    Node,
    Transcript,
    check_count,
    node_id,
    transcript_id,
)
from ..domain.base import Context, Refusal
from ..domain.conduct import Conduct, conduct_id, mode_of
from ..domain.floor import FLOOR_ID, Floor
from ..domain.nodes import REGISTRY_ID, range_node
from ..domain.plaza import require_running
from . import volumes as cv
from .unit import Commands, Done, Unit


def node(cmds: Commands, name: str = LOCAL_NODE) -> Node:
    found = cmds.store.get(node_id(name))
    if found is None:
        raise Refusal("unknown_agent", "no agent has been started yet")
    return found


def holder(get: Callable, cid: int) -> Node:
    """The node that holds ``cid`` now: the one whose range holds it, or the one its agent moved to
    (the range's node remembers where, ``Node.placed_at``)."""
    home = get(node_id(range_node(cid) or LOCAL_NODE))
    where = home.placed_at(cid) if home is not None else None
    found = home if where == (home.name if home is not None else None) else (get(node_id(where)) if where else None)
    if found is None:
        raise Refusal("unknown_agent", "no agent has been started yet" if home is None else f"no agent with cid {cid}")
    return found


def agent(cmds: Commands, cid: int) -> Agent:
    return cmds.store.get(holder(cmds.store.get, cid).agent_of(cid))


def transcript_of(cmds: Commands, a: Agent) -> Transcript:
    return cmds.store.get(transcript_id(a.id))


# -- in a unit ----------------------------------------------------------------------------------------
def agent_in(unit: Unit, cid: int) -> Agent:
    return unit.get(holder(unit.get, cid).agent_of(cid))


def registries_in(unit: Unit) -> list[Node]:
    """Every machine's CID registry: n0's, then each joined node's in the order they joined."""
    reg = unit.get(REGISTRY_ID)
    names = [LOCAL_NODE, *(reg.joined if reg is not None else ())]
    return [n for n in (unit.get(node_id(name)) for name in names) if n is not None]


def transcript_in(unit: Unit, a: Agent) -> Transcript:
    return unit.get(transcript_id(a.id))


def new_ids(cmds: Commands, count: int) -> list[uuid.UUID]:
    """The new agents' ids, made before the decision (a retried decision makes the same agents)."""
    return [uuid.UUID(hex=cmds.new_id()) for _ in range(count)]


def _open_wallets(unit: Unit, ctx: Context, cids: list[int], role: str) -> None:
    """Each new agent's wallet, at zero; a CID freed by a delete keeps its wallet (keyed by CID)."""
    for cid in cids:
        if unit.get(t.account_id(t.wallet_key(cid))) is None:
            unit.add(t.open_wallet(ctx, None, str(cid), f"agent-{cid}", role))


def _assign(unit: Unit, ctx: Context, ids: list[uuid.UUID], where: str = LOCAL_NODE) -> tuple[Node, list[int]]:
    """The node placement chose gives the new agents their CIDs: n0 (made with its CID range by the
    plaza's first spawn), or a joined node, checked here on fresh state (never a revoked or draining one)."""
    if where == LOCAL_NODE:
        n = unit.get(node_id(LOCAL_NODE)) or Node.found_local(ctx)
    else:
        registry = unit.get(REGISTRY_ID)
        n = unit.get(node_id(where))
        if registry is None or n is None:
            raise Refusal("unknown_node", f"no joined node {where!r}")
        if registry.revoked(where):
            raise Refusal("node_revoked", f"node {where} is revoked; it takes no agents")
        if registry.draining(where):
            raise Refusal("node_draining", f"node {where} is draining; it takes no new agents")
    cids = n.assign(ctx, [i.hex for i in ids])
    unit.add(n)
    return n, cids


def _deal_species(unit: Unit, ctx: Context, cids: list[int], role: str) -> None:
    """Each new agent's species on the floor, dealt the first time the plaza sees it (``domain.floor``)."""
    floor = unit.get(FLOOR_ID) or Floor.open(ctx)
    for cid in cids:
        floor.deal(ctx, cid, role)
    unit.add(floor)


def spawn_in(unit: Unit, ctx: Context, ids: list[uuid.UUID], role: str, model: str | None = None,
             where: str = LOCAL_NODE) -> list[int]:
    """Start one agent of ``role`` per id on node ``where``, each with its transcript and wallet; their CIDs."""
    check_count(len(ids))
    n, cids = _assign(unit, ctx, ids, where)
    vols = cv.for_spawn_in(unit, role)  # the role's volumes at this spawn
    cv.attach_in(unit, ctx, list(zip(ids, cids)), vols)
    for agent_id, cid in zip(ids, cids):
        unit.add(Agent.spawn(ctx, agent_id=agent_id, cid=cid, role=role, node=n.name, model=model, volumes=vols),
                 Transcript.open(ctx, agent_id, cid),
                 Conduct.for_new_agent(ctx, unit.get(conduct_id(cid)), cid))
    _open_wallets(unit, ctx, cids, role)
    _deal_species(unit, ctx, cids, role)
    return cids


def spawn(cmds: Commands, ctx: Context, role: str, count: int = 1, model: str | None = None,
          where: str = LOCAL_NODE) -> Done[list[int]]:
    """Start ``count`` agents of ``role`` (1-16) on node ``where`` (placement's choice); their CIDs."""
    check_count(count)
    ids = new_ids(cmds, count)
    return cmds.run(lambda unit: spawn_in(unit, ctx, ids, role, model, where))


def fork(cmds: Commands, ctx: Context, source: int, count: int, checkpoint: str) -> Done[list[int]]:
    """``count`` copies of agent ``source`` (1-16) from its machine's ``checkpoint``; their CIDs.
    The runtime makes each one's machine from that checkpoint (``runtime.fleet``)."""
    check_count(count, "fork")
    ids = new_ids(cmds, count)

    def decide(unit: Unit) -> list[int]:
        src = agent_in(unit, source)
        _, cids = _assign(unit, ctx, ids, src.node)  # a fork starts from its source's checkpoint, on its machine
        cv.attach_in(unit, ctx, list(zip(ids, cids)), list(getattr(src, "volumes", ())))  # the source's volumes
        for agent_id, cid in zip(ids, cids):
            unit.add(src.fork(ctx, agent_id=agent_id, cid=cid, checkpoint=checkpoint),
                     Transcript.open(ctx, agent_id, cid),
                     Conduct.for_new_agent(ctx, unit.get(conduct_id(cid)), cid, mode_of(unit.get, src.cid)))
        _open_wallets(unit, ctx, cids, src.role)
        _deal_species(unit, ctx, cids, src.role)
        return cids

    return cmds.run(decide)


def _on_agent(cmds: Commands, cid: int, act: Callable[[Agent], None]) -> Done[None]:
    def decide(unit: Unit) -> None:
        a = agent_in(unit, cid)
        act(a)
        unit.add(a)

    return cmds.run(decide)


def rename(cmds: Commands, ctx: Context, cid: int, name: str) -> Done[None]:
    return _on_agent(cmds, cid, lambda a: a.rename(ctx, name))


def set_model(cmds: Commands, ctx: Context, cid: int, model: str | None) -> Done[None]:
    return _on_agent(cmds, cid, lambda a: a.set_model(ctx, model))


def _set_mode(unit: Unit, ctx: Context, a: Agent, mode: str) -> None:
    """The agent's permission mode is its conduct's alone (``domain.conduct``)."""
    c = unit.get(conduct_id(str(a.cid))) or Conduct.open(ctx, str(a.cid))
    c.ensure_mode(ctx, mode)
    unit.add(c)


def set_mode(cmds: Commands, ctx: Context, cid: int, mode: str) -> Done[None]:
    return cmds.run(lambda unit: _set_mode(unit, ctx, agent_in(unit, cid), mode))


def update(cmds: Commands, ctx: Context, cid: int, changes: dict) -> Done[None]:
    """PATCH: name, model (None clears it), permission_mode, in one commit."""

    def decide(unit: Unit) -> None:
        a = agent_in(unit, cid)
        if "name" in changes:
            a.rename(ctx, changes["name"])
        if "model" in changes:
            a.set_model(ctx, changes["model"])
        unit.add(a)
        if "permission_mode" in changes:
            _set_mode(unit, ctx, a, changes["permission_mode"])

    return cmds.run(decide)


def tell(cmds: Commands, ctx: Context, cid: int, text: str, ref: str | None = None,
         then: Callable[[Unit, str], None] | None = None, **limit: int) -> Done[str]:
    """Queue a work item; its id. ``ref`` names a delivery of the hub's (a task to do or to
    review), refused as ``already_delivered`` when the agent was given it before (a restarted hub)."""
    item = "w-" + cmds.new_id()[:12]

    def decide(unit: Unit) -> str:
        a = agent_in(unit, cid)
        a.tell(ctx, item, text, ref, **limit)
        tr = transcript_in(unit, a)
        tr.add(ctx, "told", text=text, detail={"item": item, "from": ctx.actor})
        unit.add(a, tr)
        if then is not None:  # more of the same commit (an editor session's prompt)
            then(unit, item)
        return item

    return cmds.run(decide)


def took_itself(cmds: Commands, ctx: Context, cid: int, ref: str) -> Done[None]:
    """The agent took a delivery itself (``ref`` as ``tell`` names it): the hub will not tell it."""
    return _on_agent(cmds, cid, lambda a: a.took_itself(ctx, ref))


def _lifecycle(name: str) -> Callable[[Commands, Context, int], Done[None]]:
    def command(cmds: Commands, ctx: Context, cid: int) -> Done[None]:
        def decide(unit: Unit) -> None:
            a = agent_in(unit, cid)
            if name in ("restart", "wipe"):  # its VM starts again: with the volumes it was spawned with
                cv.present_in(unit, cid, getattr(a, "volumes", []))
            getattr(a, name)(ctx)
            tr = transcript_in(unit, a)
            tr.add(ctx, "note", text=f"{name} by {ctx.actor}" + (f": {ctx.reason}" if ctx.reason else ""),
                   detail={"action": name})
            unit.add(a, tr)

        return cmds.run(decide)

    command.__name__ = name
    return command


sleep = _lifecycle("sleep")
wake = _lifecycle("wake")
stop = _lifecycle("stop")
restart = _lifecycle("restart")
wipe = _lifecycle("wipe")
retire = _lifecycle("retire")


def delete(cmds: Commands, ctx: Context, cid: int) -> Done[None]:
    def decide(unit: Unit) -> None:
        n = holder(unit.get, cid)
        a = unit.get(n.agent_of(cid))
        a.delete(ctx)
        n.release(ctx, cid)
        unit.add(a, n)
        home = unit.get(node_id(range_node(cid) or LOCAL_NODE))
        if home is not None and home is not n:  # deleted while away: its range's node frees the CID too
            home.release(ctx, cid)
            unit.add(home)

    return cmds.run(decide)


# -- what the hub records for a harness -------------------------------------------------------------
def connected(cmds: Commands, ctx: Context, cid: int) -> Done[None]:
    return _on_agent(cmds, cid, lambda a: a.connected(ctx))


def disconnected(cmds: Commands, ctx: Context, cid: int, why: str) -> Done[None]:
    return _on_agent(cmds, cid, lambda a: a.disconnected(ctx, why))


def name_self(cmds: Commands, ctx: Context, cid: int, name: str) -> Done[None]:
    return _on_agent(cmds, cid, lambda a: a.name_self(ctx, name))


def take_work(cmds: Commands, ctx: Context, cid: int) -> Done[dict | None]:
    """The next work item for the agent ({"item", "kind", "text"}), marked as running; None if none."""

    def decide(unit: Unit) -> dict | None:
        a = agent_in(unit, cid)
        item = a.take_work(ctx)
        if item is None:
            return None
        unit.add(a)
        return dict(item, kind="tell")

    return cmds.run(decide)


def finish_work(cmds: Commands, ctx: Context, cid: int, item: str, outcome: str,
                text: str | None = None) -> Done[None]:
    def decide(unit: Unit) -> None:
        a = agent_in(unit, cid)
        a.finish_work(ctx, item, outcome)
        tr = transcript_in(unit, a)
        tr.add(ctx, "done", text=text, detail={"item": item, "outcome": outcome})
        unit.add(a, tr)

    return cmds.run(decide)


def withdraw(cmds: Commands, ctx: Context, cid: int, item: str, why: str) -> Done[None]:
    """Take a queued item back before the agent starts it; it ends cancelled in the transcript."""

    def decide(unit: Unit) -> None:
        a = agent_in(unit, cid)
        a.withdraw(ctx, item)
        tr = transcript_in(unit, a)
        tr.add(ctx, "done", text=why, detail={"item": item, "outcome": "cancelled"})
        unit.add(a, tr)

    return cmds.run(decide)


def add_entry_in(unit: Unit, ctx: Context, cid: int, kind: str, text: str | None = None,
                 tool: str | None = None, detail: dict | None = None) -> None:
    """One transcript entry, for another command's unit (a tool call's check and its entry)."""
    tr = transcript_in(unit, agent_in(unit, cid))
    tr.add(ctx, kind, text=text, tool=tool, detail=detail)
    unit.add(tr)


def add_entry(cmds: Commands, ctx: Context, cid: int, kind: str, text: str | None = None,
              tool: str | None = None, detail: dict | None = None) -> Done[None]:
    return cmds.run(lambda unit: add_entry_in(unit, ctx, cid, kind, text, tool, detail))


# -- moves (the guide's "Placement and moves"; the runtime copies the machine, ``runtime.moves``) ------
def _move_target_in(unit: Unit, ctx: Context, target: str) -> Node:
    """The node an agent may move to, on fresh state: a node the plaza has, not revoked, not draining
    (n0 is the hub's own machine: its registry is made by the first agent placed there, or by this move)."""
    found = unit.get(node_id(target)) if isinstance(target, str) else None
    if found is None and target == LOCAL_NODE:
        found = Node.found_local(ctx)
    reg = unit.get(REGISTRY_ID)
    joined = reg.joined.get(target, {}) if reg is not None else {}
    if found is None or (target != LOCAL_NODE and not joined):
        raise Refusal("unknown_node", f"no node {target!r} (see nodes list)")
    if joined.get("revoked"):
        raise Refusal("node_revoked", f"node {target} is revoked; it takes no agents")
    if joined.get("draining"):
        raise Refusal("node_draining", f"node {target} is draining; it takes no agents")
    return found


def movable_in(unit: Unit, ctx: Context, cid: int, target: str) -> tuple[Agent, Node, Node]:
    """Every refusal of a move that the records decide, before anything moves: the plaza held, an
    unknown agent or node, the same node, a node revoked or draining, an agent that cannot move now."""
    require_running(unit.get)
    source = holder(unit.get, cid)
    a = unit.get(source.agent_of(cid))
    dest = _move_target_in(unit, ctx, target)
    a.check_movable(dest.name)
    return a, source, dest


def check_move(cmds: Commands, cid: int, target: str) -> dict:
    """The refusals of a move of ``cid`` to ``target`` as the records stand (nothing is written)."""
    ctx = cmds.context("hub")
    return cmds.run(lambda unit: {"source": movable_in(unit, ctx, cid, target)[1].name}).value


def moved(cmds: Commands, ctx: Context, cid: int, target: str, figures: dict) -> Done[str]:
    """The move's finish, in one commit: the agent's node is the target; its CID leaves the source's
    registry for the target's, and the node whose range holds it remembers where it is; a transcript
    entry says what moved. Returns the source's name."""

    def decide(unit: Unit) -> str:
        require_running(unit.get)
        source = holder(unit.get, cid)
        a = unit.get(source.agent_of(cid))
        dest = _move_target_in(unit, ctx, target)
        a.moved(ctx, dest.name, int(figures["bytes_moved"]), float(figures["seconds"]))
        source.move_out(ctx, cid, dest.name)
        dest.move_in(ctx, cid, a.id.hex, source.name)
        home = unit.get(node_id(range_node(cid) or LOCAL_NODE))
        home.place(ctx, cid, dest.name)
        tr = transcript_in(unit, a)
        mb = figures["bytes_moved"] / 1e6
        tr.add(ctx, "note", text=f"moved from node {source.name} to node {dest.name}: {mb:.1f} MB in "
                                 f"{figures['seconds']:.1f} s", detail={"action": "move", "from": source.name,
                                                                       "to": dest.name, **figures})
        unit.add(a, source, dest, home, tr)
        return source.name

    return cmds.run(decide)
