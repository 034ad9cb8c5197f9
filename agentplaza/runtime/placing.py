"""Placement as the hub does it (the guide's "Placement and moves"): the facts each joined node's noded
gives now, handed to the pure rule in ``domain.placement``. ``AgentRuntime.place`` calls it."""

from __future__ import annotations

from typing import Any

from ..adapters.kvm.link import NodeError
from ..commands import nodes as node_commands
from ..domain.agents import LOCAL_NODE, node_id
from ..domain.base import Refusal
from ..domain.placement import Candidate
from ..domain.placement import place as choose
from ..projections import volumes as volumes_rm
from ..projections.agents import agents_on
from .fleet import NODE_QUERY_TIMEOUT_S  # the fleet's one wait for a node's facts or templates


def place(rt: Any, role: str, count: int = 1, memory_mib: int = 256, vcpus: int = 1) -> str:
    """Where new agents go: the eligible joined node with the highest score, else n0 (whose noded says
    whether it fits: ``boot_blockers``). Each candidate's free memory and warm templates are asked of its
    noded now. An agent whose role mounts volumes goes to n0: "A volume is an ext4 image that lives on
    the hub's machine" (a joined node has none of them)."""
    if volumes_rm.role_list(rt.hub.read_models, role):
        return LOCAL_NODE
    reg = node_commands.registry(rt.cmds)
    out = []
    for name, entry in (reg.joined.items() if reg is not None else ()):
        online = rt.online(name)
        free_mib, warm = 0, False
        if online:
            try:
                link = rt.link_of(name)
                facts = link.request("facts", timeout=NODE_QUERY_TIMEOUT_S)["facts"]
                rt.joined.facts[name] = facts
                free_mib = int(facts.get("memory_free_mib") or 0)
                temps = link.request("templates", timeout=NODE_QUERY_TIMEOUT_S).get("templates") or []
                warm = any(t.get("vcpus") == vcpus and t.get("memory_mib") == memory_mib for t in temps)
            except (NodeError, Refusal, KeyError, TypeError, ValueError):
                online = False
        node = rt.cmds.store.get(node_id(name))
        free_cids = len(node.free_cids()) if node is not None else 0
        out.append(Candidate(name, free_mib=free_mib // max(1, count) if count > 1 else free_mib,
                             agents=agents_on(rt.hub.read_models, name), free_cids=free_cids - (count - 1),
                             online=online, draining=bool(entry.get("draining")),
                             revoked=bool(entry.get("revoked")), warm=warm))
    return choose(out, memory_mib)
