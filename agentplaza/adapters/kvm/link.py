"""The hub's end of its link to a node daemon: requests out, the guests' streams in.

The link is one unix-socket connection carrying ``vmm.channel`` frames. ``request(op, **meta)``
opens a stream, waits for the node's JSON answer and returns it; a refusal (the guest contract's
error shape, ``{"error": {"code", "message"}}``) raises ``NodeError`` with its code and message. Streams the node opens carry a
guest's service and the CID the node knows the guest by; ``on_stream(service, cid, stream)`` gets
them. ``events()`` yields the node's event lines (machine and harness exits).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from vmm.channel import Channel, ChannelClosed, Stream, StreamReset
from vmm.guest.contract import error_of

#: How long the hub waits for a node daemon it started to listen.
NODE_START_TIMEOUT_S = 30.0


class NodeError(RuntimeError):
    def __init__(self, message: str, code: str = "node_error"):
        super().__init__(message)
        self.code = code


class NodeLink:
    def __init__(self, sock_path: Path, on_stream: Callable[[str, int, Stream], None]):
        self.sock_path = Path(sock_path)
        self.on_stream = on_stream
        self.channel: Channel | None = None

    def connect(self, timeout: float = NODE_START_TIMEOUT_S) -> NodeLink:
        end = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(self.sock_path))
                break
            except OSError as e:
                s.close()
                if time.monotonic() > end:
                    raise NodeError(f"no node daemon at {self.sock_path}: {e}") from None
                time.sleep(0.05)
        self.channel = Channel.over_socket(s, role="host", on_open=self._opened).start()
        return self

    @classmethod
    def attached(cls, sock: socket.socket, on_stream: Callable[[str, int, Stream], None], name: str) -> NodeLink:
        """A link over a socket already connected: a joined node's connection out to the hub, bridged to a
        socketpair (``runtime.joined``). The node is the channel's "guest" end, as noded is on n0's socket."""
        link = cls(Path(f"<node {name}>"), on_stream)
        link.channel = Channel.over_socket(sock, role="host", on_open=link._opened).start()
        return link

    @property
    def up(self) -> bool:
        return self.channel is not None and not self.channel.closed

    def _opened(self, st: Stream) -> None:
        service, cid = st.meta.get("service"), st.meta.get("cid")
        if not isinstance(cid, int) or not isinstance(service, str):
            st.reset("a guest stream needs a service and a cid")
            return
        self.on_stream(service, cid, st)

    def request(self, op: str, timeout: float = 120.0, body: dict | None = None, **meta) -> dict:
        """One op: its answer. ``body`` (JSON) goes in the stream, for what is too long for the open's
        meta (a move's file list and manifest)."""
        if not self.up:
            raise NodeError("the node is not connected")
        try:
            st = self.channel.open(op, **meta)
            if body is not None:
                st.write(json.dumps(body).encode(), timeout=timeout)
            st.close()
            raw = st.read_all(timeout)
        except (ChannelClosed, StreamReset, TimeoutError) as e:
            raise NodeError(f"node request {op} failed: {e}") from None
        answer = json.loads(raw or b"{}")
        err = error_of(answer)
        if err is not None:
            raise NodeError(err["message"] or f"node request {op} failed", err["code"])
        return answer

    def stream(self, op: str, **meta) -> Stream:
        """A raw stream of an op that carries bytes (a move's pieces: ``export_read``, ``import_write``)."""
        if not self.up:
            raise NodeError("the node is not connected")
        try:
            return self.channel.open(op, **meta)
        except ChannelClosed as e:
            raise NodeError(f"node stream {op} failed: {e}") from None

    def events(self) -> Iterator[dict]:
        st = self.channel.open("events")
        buf = b""
        while True:
            try:
                data = st.read()
            except (ChannelClosed, StreamReset):
                return
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield json.loads(line)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


#: noded's umask, not the hub's owner-only one: the jailed QEMU (an unprivileged uid) must pass through the
#: jail's folders noded makes, and noded sets the mode of each file it writes itself (0600: disks,
#: snapshots, sockets, this log).
NODED_UMASK = 0o022


def start_local_node(state_dir: Path, data_dir: Path, images_dir: str | None = None,
                     name: str = "n0") -> tuple[subprocess.Popen, Path]:
    """Start noded as the hub's child (node n0, or another local node in its own folders: a test's
    second node); its machines stop when the hub goes."""
    sock = Path(state_dir) / "node.sock"
    argv = [sys.executable, "-m", "agentplaza.adapters.kvm.noded", "--socket", str(sock), "--name", name,
            "--vms", str(Path(data_dir) / "vms"), "--templates", str(Path(data_dir) / "templates"),
            "--volumes", str(Path(data_dir) / "volumes"), "--exit-with-parent"]
    if images_dir:
        argv += ["--images", images_dir]
    log = os.fdopen(os.open(Path(state_dir) / "noded.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
    os.fchmod(log.fileno(), 0o600)  # a log an older hub made with the umask's mode is owner-only from now on
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ), start_new_session=True, umask=NODED_UMASK)
    log.close()
    return proc, sock


def wait_gone(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["NodeLink", "NodeError", "start_local_node", "wait_gone", "threading"]
