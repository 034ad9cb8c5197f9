"""A hub in this process with a real noded ``n0`` serving on a socket beside it and the agent runtime
over that socket: the set-up of the VM tests that drive the runtime directly (no apid process)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.deadline import until

from agentplaza.adapters.kvm.noded import Node
from agentplaza.api.hub import Hub
from agentplaza.runtime.fleet import AgentRuntime

#: How long noded may take to make its socket.
NODED_SOCKET_S = 10


def serve(node: Node, sock: Path) -> threading.Event:
    """``node`` serving on ``sock`` in a thread; set the event it returns to stop it."""
    stop = threading.Event()
    threading.Thread(target=node.serve, args=(sock, stop), daemon=True).start()
    until("noded's socket", sock.exists, NODED_SOCKET_S, every=0.2)
    return stop


@contextmanager
def hub_with_node(folders, image, tmp_path, **node_kw) -> Iterator[tuple[Hub, Node, AgentRuntime]]:
    """``(hub, node, runtime)``, the runtime started; everything stopped after (every VM of the node too).
    ``tmp_path`` is opened to others (0755) so the jailed QEMU can reach the VMs' folders below it.
    ``node_kw``: more of ``Node``'s arguments (``templates_dir``...)."""
    os.chmod(tmp_path, 0o755)
    hub = Hub.open(folders)
    node = Node("n0", folders.data / "vms", image=image, **node_kw)
    sock = folders.state / "node.sock"
    stop = serve(node, sock)
    rt = AgentRuntime(hub, node=str(sock))
    hub.runtime = rt
    rt.start()
    try:
        yield hub, node, rt
    finally:
        rt.close()
        stop.set()
        node.stop_all()
        hub.close()
