"""The agents' commands: spawn, the owner's lifecycle actions, and what their harnesses report.

Each command loads node n0 (the CID registry), the agent and, where it writes one, the agent's
transcript, and commits them together.
"""

from __future__ import annotations

import uuid
from typing import Any

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
from .unit import Commands


def node(cmds: Commands, name: str = LOCAL_NODE) -> Node:
    found = cmds.store.get(node_id(name))
    if found is None:
        raise Refusal("unknown_agent", "no agent has been started yet")
    return found


def node_or_new(cmds: Commands, ctx: Context) -> Node:
    """Node n0, made with its CID range by the plaza's first spawn."""
    found = cmds.store.get(node_id(LOCAL_NODE))
    return found if found is not None else Node.found_local(ctx)


def agent(cmds: Commands, cid: int) -> Agent:
    n = node(cmds)
    return cmds.store.get(n.agent_of(cid))


def transcript_of(cmds: Commands, a: Agent) -> Transcript:
    return cmds.store.get(transcript_id(a.id))


def spawn(cmds: Commands, ctx: Context, role: str, count: int = 1, model: str | None = None) -> list[int]:
    """Start ``count`` agents of ``role`` (1-16); returns their CIDs."""
    check_count(count)
    ids = [uuid.UUID(hex=cmds.new_id()) for _ in range(count)]
    out: list[int] = []

    def decide():
        n = node_or_new(cmds, ctx)
        cids = n.assign(ctx, [i.hex for i in ids])
        made: list[Any] = [n]
        for agent_id, cid in zip(ids, cids):
            a = Agent.spawn(ctx, agent_id=agent_id, cid=cid, role=role, node=n.name, model=model)
            t = Transcript.open(ctx, agent_id, cid)
            made += [a, t, Conduct.for_new_agent(ctx, cmds.store.get(conduct_id(cid)), cid)]
        out[:] = cids
        return made

    cmds.run_aggregates(decide)
    _open_wallets(cmds, ctx, out, role)
    return out


def fork(cmds: Commands, ctx: Context, source: int, count: int, checkpoint: str) -> list[int]:
    """``count`` copies of agent ``source`` (1-16) from its machine's ``checkpoint``; returns their CIDs.
    The runtime makes each one's machine from that checkpoint (``runtime.fleet``)."""
    check_count(count, "fork")
    ids = [uuid.UUID(hex=cmds.new_id()) for _ in range(count)]
    out: list[int] = []

    def decide():
        src = agent(cmds, source)
        n = node_or_new(cmds, ctx)
        cids = n.assign(ctx, [i.hex for i in ids])
        made: list[Any] = [n]
        for agent_id, cid in zip(ids, cids):
            made += [src.fork(ctx, agent_id=agent_id, cid=cid, checkpoint=checkpoint),
                     Transcript.open(ctx, agent_id, cid),
                     Conduct.for_new_agent(ctx, cmds.store.get(conduct_id(cid)), cid,
                                           mode_of(cmds.store.get, src.cid))]
        out[:] = cids
        return made

    cmds.run_aggregates(decide)
    _open_wallets(cmds, ctx, out, agent(cmds, source).role)
    return out


def _open_wallets(cmds: Commands, ctx: Context, cids: list[int], role: str) -> None:
    from . import treasury

    for cid in cids:  # each new agent's wallet, at zero
        try:
            treasury.open_wallet(cmds, ctx, str(cid), f"agent-{cid}", role)
        except Refusal as r:
            if r.code != "wallet_exists":  # a CID freed by a delete keeps its wallet (keyed by CID)
                raise


def _on_agent(cmds: Commands, cid: int, act) -> list[int]:
    def decide():
        a = agent(cmds, cid)
        act(a)
        return [a]

    return cmds.run_aggregates(decide)


def rename(cmds: Commands, ctx: Context, cid: int, name: str) -> list[int]:
    return _on_agent(cmds, cid, lambda a: a.rename(ctx, name))


def set_model(cmds: Commands, ctx: Context, cid: int, model: str | None) -> list[int]:
    return _on_agent(cmds, cid, lambda a: a.set_model(ctx, model))


def _with_conduct(cmds: Commands, ctx: Context, a: Agent, mode: str) -> list:
    """The agent's permission mode is its conduct's alone (``domain.conduct``)."""
    c = cmds.store.get(conduct_id(str(a.cid))) or Conduct.open(ctx, str(a.cid))
    c.ensure_mode(ctx, mode)
    return [c]


def set_mode(cmds: Commands, ctx: Context, cid: int, mode: str) -> list[int]:
    def decide():
        return _with_conduct(cmds, ctx, agent(cmds, cid), mode)

    return cmds.run_aggregates(decide)


def update(cmds: Commands, ctx: Context, cid: int, changes: dict) -> list[int]:
    """PATCH: name, model (None clears it), permission_mode, in one commit."""

    def decide():
        a = agent(cmds, cid)
        out: list = [a]
        if "name" in changes:
            a.rename(ctx, changes["name"])
        if "model" in changes:
            a.set_model(ctx, changes["model"])
        if "permission_mode" in changes:
            out += _with_conduct(cmds, ctx, a, changes["permission_mode"])
        return out

    return cmds.run_aggregates(decide)


def tell(cmds: Commands, ctx: Context, cid: int, text: str, ref: str | None = None) -> str:
    """Queue a work item; returns its id. ``ref`` names a delivery of the hub's (a task to do or to
    review), refused as ``already_delivered`` when the agent was given it before (a restarted hub)."""
    item = "w-" + cmds.new_id()[:12]

    def decide():
        a = agent(cmds, cid)
        a.tell(ctx, item, text, ref)
        t = transcript_of(cmds, a)
        t.add(ctx, "told", text=text, detail={"item": item, "from": ctx.actor})
        return [a, t]

    cmds.run_aggregates(decide)
    return item


def took_itself(cmds: Commands, ctx: Context, cid: int, ref: str) -> list[int]:
    """The agent took a delivery itself (``ref`` as ``tell`` names it): the hub will not tell it."""
    return _on_agent(cmds, cid, lambda a: a.took_itself(ctx, ref))


def _lifecycle(name: str):
    def command(cmds: Commands, ctx: Context, cid: int) -> list[int]:
        def decide():
            a = agent(cmds, cid)
            getattr(a, name)(ctx)
            t = transcript_of(cmds, a)
            t.add(ctx, "note", text=f"{name} by {ctx.actor}" + (f": {ctx.reason}" if ctx.reason else ""),
                  detail={"action": name})
            return [a, t]

        return cmds.run_aggregates(decide)

    command.__name__ = name
    return command


sleep = _lifecycle("sleep")
wake = _lifecycle("wake")
stop = _lifecycle("stop")
restart = _lifecycle("restart")
wipe = _lifecycle("wipe")
retire = _lifecycle("retire")


def delete(cmds: Commands, ctx: Context, cid: int) -> list[int]:
    def decide():
        n = node(cmds)
        a = cmds.store.get(n.agent_of(cid))
        a.delete(ctx)
        n.release(ctx, cid)
        return [a, n]

    return cmds.run_aggregates(decide)


# -- what the hub records for a harness -------------------------------------------------------------
def connected(cmds: Commands, ctx: Context, cid: int) -> list[int]:
    return _on_agent(cmds, cid, lambda a: a.connected(ctx))


def disconnected(cmds: Commands, ctx: Context, cid: int, why: str) -> list[int]:
    return _on_agent(cmds, cid, lambda a: a.disconnected(ctx, why))


def name_self(cmds: Commands, ctx: Context, cid: int, name: str) -> list[int]:
    return _on_agent(cmds, cid, lambda a: a.name_self(ctx, name))


def take_work(cmds: Commands, ctx: Context, cid: int) -> dict | None:
    """The next work item for the agent ({"item", "kind", "text"}), marked as running; None if none."""
    got: list = []

    def decide():
        got.clear()
        a = agent(cmds, cid)
        item = a.take_work(ctx)
        if item is None:
            return []
        got.append(dict(item, kind="tell"))
        return [a]

    cmds.run_aggregates(decide)
    return got[0] if got else None


def finish_work(cmds: Commands, ctx: Context, cid: int, item: str, outcome: str, text: str | None = None) -> list[int]:
    def decide():
        a = agent(cmds, cid)
        a.finish_work(ctx, item, outcome)
        t = transcript_of(cmds, a)
        t.add(ctx, "done", text=text, detail={"item": item, "outcome": outcome})
        return [a, t]

    return cmds.run_aggregates(decide)


def add_entry(cmds: Commands, ctx: Context, cid: int, kind: str, text: str | None = None,
              tool: str | None = None, detail: dict | None = None) -> list[int]:
    def decide():
        a = agent(cmds, cid)
        t = transcript_of(cmds, a)
        t.add(ctx, kind, text=text, tool=tool, detail=detail)
        return [t]

    return cmds.run_aggregates(decide)
