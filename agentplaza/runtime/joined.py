"""The hub's side of the nodes that joined it: their signed messages, their links, their liveness.

The guide, "Joining a machine": "A node never needs an open port. It opens an outgoing connection to
the hub, keeps it open, and waits there for commands. It also sends a heartbeat on a regular timer.
Each request it sends is signed with its own key."

- **The connection.** A node opens a WebSocket at ``/v1/node/connect`` (``api.routes.nodelink``) over
  the hub's HTTPS and sends a signed ``hello`` (``agentplaza.nodesign``) before anything else. The hub
  checks it here (``hello``): the node is in the log's registry and not revoked, the signature is its
  key's, made for this hub, within ``SKEW_S_MAX`` of the hub's clock, with a nonce never seen. Then
  the ``vmm.channel`` protocol runs over the WebSocket, bridged to a socketpair, so the hub's end is a
  ``NodeLink`` like n0's (``attach``) and noded's serve loop is the same on both kinds of node.
- **Heartbeats.** Every ``beat`` is signed and checked the same way; one that fails ends the connection.
  A node not heard from (hello or beat) for ``OFFLINE_AFTER_S`` shows offline. Liveness is kept live
  here, never as events; joining and revoking are events.
- **Revocation.** ``revoked`` (called as the runtime follows ``NodeRegistry.NodeRevoked``, and on every
  check) drops the node's link, which closes its connection; its hellos and beats are refused from
  then on, and its guests' streams are refused (``AgentRuntime._on_stream``).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from ..adapters.kvm.link import NodeError, NodeLink
from ..commands import nodes as node_commands
from ..nodesign import SKEW_S_MAX, BadSignature, Message, Replay, parse, verify

log = logging.getLogger("apid.nodes")

#: The guide, "A machine shows as offline": "A node is offline when it has not contacted the hub for
#: more than 60 seconds."
OFFLINE_AFTER_S = 60
#: How long the hub waits for a node's first facts after its hello.
FACTS_TIMEOUT_S = 30.0

__all__ = ["JoinedNodes", "OFFLINE_AFTER_S", "SKEW_S_MAX"]


class JoinedNodes:
    def __init__(self, runtime: Any, clock=time.time):
        self.rt = runtime
        self.clock = clock
        self.replay = Replay(clock)
        self.heard: dict[str, float] = {}   # name -> when the hub last heard from it (its clock, seconds)
        self.facts: dict[str, dict] = {}    # name -> the machine's facts, as its noded last reported them
        self.revoked_names: set[str] = set()
        self.lock = threading.Lock()

    # -- signed messages ---------------------------------------------------------------------------
    def audience(self) -> str:
        """The hub's address as a node signs for it: the one its join code named."""
        hub = self.rt.hub
        return getattr(hub, "public_url", "") or getattr(hub, "address", "")

    def check(self, text: str, kind: str, node: str | None = None) -> Message:
        """A signed message of ``kind`` (from ``node``, where the connection already names one), or
        ``BadSignature``: malformed, from no joined node, from a revoked one, not its key's, stale or
        replayed."""
        m = parse(text)
        if m.kind != kind or (node is not None and m.node != node):
            raise BadSignature(f"expected a {kind} from {node or 'a joined node'}")
        with self.rt.cmds.store.fresh():  # another hub may have revoked it: the registry as stored
            registry = node_commands.registry(self.rt.cmds)
        entry = registry.joined.get(m.node) if registry is not None else None
        if entry is None:
            raise BadSignature(f"no joined node {m.node}")
        if entry.get("revoked") or m.node in self.revoked_names:
            self.revoked_names.add(m.node)
            raise BadSignature(f"node {m.node} is revoked")
        verify(m, entry["public_key"], self.audience())
        self.replay.accept(m)
        self.heard[m.node] = self.clock()
        return m

    def hello(self, text: str) -> str:
        return self.check(text, "hello").node

    def beat(self, node: str, text: str) -> None:
        self.check(text, "beat", node)

    # -- links -------------------------------------------------------------------------------------
    def attach(self, name: str, sock: socket.socket) -> NodeLink:
        """The hub's end of a node's connection (its newest wins), its facts asked for once."""
        link = NodeLink.attached(sock, lambda service, cid, st: self.rt.on_stream_from(name, service, cid, st), name)
        with self.lock:
            old = self.rt.links.get(name)
            self.rt.links[name] = link
        if old is not None:
            old.close()
        # Its own threads: the connection's bytes flow only once the caller's pumps run.
        threading.Thread(target=self._first_facts, args=(name, link), daemon=True, name=f"node-{name}-facts").start()
        threading.Thread(target=self.rt.follow_node_events, args=(name, link), daemon=True,
                         name=f"node-{name}-events").start()
        return link

    def _first_facts(self, name: str, link: NodeLink) -> None:
        try:
            self.facts[name] = link.request("facts", timeout=FACTS_TIMEOUT_S)["facts"]
        except (NodeError, KeyError) as e:
            log.warning("node %s gave no facts: %s", name, e)
        self.rt.node_connected(name)

    def detach(self, name: str, link: NodeLink) -> None:
        with self.lock:
            if self.rt.links.get(name) is link:
                del self.rt.links[name]
        link.close()

    def revoked(self, name: str) -> None:
        """Revoked now: its connection closes, and nothing of it is accepted from here on."""
        self.revoked_names.add(name)
        with self.lock:
            link = self.rt.links.pop(name, None)
        if link is not None:
            link.close()

    # -- liveness ----------------------------------------------------------------------------------
    def online(self, name: str) -> bool:
        link = self.rt.links.get(name)
        heard = self.heard.get(name)
        return (link is not None and link.up and heard is not None and self.clock() - heard <= OFFLINE_AFTER_S
                and name not in self.revoked_names)

    def last_heard(self, name: str) -> float | None:
        return self.heard.get(name)
