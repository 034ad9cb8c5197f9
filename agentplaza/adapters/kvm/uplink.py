"""A joined node's connection out to its hub: noded's side of ``/v1/node/connect``.

The guide: "A node never needs an open port. It opens an outgoing connection to the hub, keeps it
open, and waits there for commands. It also sends a heartbeat on a regular timer. Each request it sends
is signed with its own key."

``run`` connects to the hub the join code named (``wss://``), checks the certificate the hub presents
against the code's fingerprint *before sending anything of its own*, sends its signed ``hello``, then
carries the ``vmm.channel`` protocol over the WebSocket, bridged to a socketpair, so noded's request
handler and guest streams are the ones n0 uses.  A signed ``beat`` goes every ``HEARTBEAT_S``.  A lost
connection is tried again after 1 s, doubling up to 30 s.  What happened last is written to
``STATUS_FILE`` for ``agentplaza node status``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import ssl
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from vmm import Channel

from ...nodesign import load_joined, load_key, sign
from ...permissions import write_private_bytes

log = logging.getLogger("noded")

CONNECT_PATH = "/v1/node/connect"
#: The heartbeat's period: well inside the hub's 60 s before a node shows offline.
HEARTBEAT_S = 15.0
RETRY_S_MIN, RETRY_S_MAX = 1.0, 30.0
STATUS_FILE = "node-status.json"
CHUNK_BYTES = 256 * 1024
#: The largest message either side sends (a channel chunk is far smaller).
MESSAGE_BYTES_MAX = 4 * 1024 * 1024


class PinMismatch(ConnectionError):
    pass


def _status(state_dir: Path, **fields) -> None:
    fields["at"] = time.time()
    write_private_bytes(Path(state_dir) / STATUS_FILE, json.dumps(fields).encode())


def ws_url(hub: str) -> str:
    u = urlsplit(hub)
    return ("wss" if u.scheme == "https" else "ws") + "://" + u.netloc + CONNECT_PATH


def tls_context() -> ssl.SSLContext:
    """The certificate is checked by its fingerprint (``check_pin``), as the code carries it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def check_pin(ws, pin: str | None) -> None:
    if pin is None:
        return
    sock = ws.socket
    der = sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None
    got = hashlib.sha256(der).hexdigest() if der else None
    if got != pin.replace(":", "").lower():
        raise PinMismatch(f"the hub presents a certificate whose SHA-256 is {got}, not the join code's {pin}")


def session(node, state_dir: Path, stop: threading.Event) -> None:
    """One connection, until it drops or ``stop``."""
    joined = load_joined(state_dir)
    key = load_key(state_dir)
    hub, name, pin = joined["hub"], joined["node"], joined.get("pin")
    u = urlsplit(hub)
    with connect(ws_url(hub), ssl=tls_context() if u.scheme == "https" else None, max_size=MESSAGE_BYTES_MAX,
                 open_timeout=15, close_timeout=5) as ws:
        _carry(node, state_dir, stop, ws, key, hub, name, pin)


def _carry(node, state_dir: Path, stop: threading.Event, ws, key, hub: str, name: str, pin: str | None) -> None:
    """The pin checked, the hello sent, then the channel carried both ways with a beat on the timer."""
    check_pin(ws, pin)  # before the hello: a hub that is not the code's hears nothing signed
    ws.send(sign(key, "hello", name, hub))
    ours, theirs = socket.socketpair()
    node._event_streams = []
    node.hub = Channel.over_socket(ours, role="guest", on_open=node.handle).start()
    _status(state_dir, connected=True, hub=hub, node=name)
    done = threading.Event()

    def from_hub() -> None:
        try:
            while not done.is_set():
                msg = ws.recv()
                if isinstance(msg, bytes):
                    theirs.sendall(msg)
        except (ConnectionClosed, OSError) as e:
            reason = getattr(getattr(e, "rcvd", None), "reason", "") or str(e)
            _status(state_dir, connected=False, hub=hub, node=name, last_error=reason[:200])
        finally:
            done.set()

    def to_hub() -> None:
        try:
            while not done.is_set():
                data = theirs.recv(CHUNK_BYTES)
                if not data:
                    break
                ws.send(data)
        except (ConnectionClosed, OSError):
            pass
        finally:
            done.set()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            try:
                ws.send(sign(key, "beat", name, hub))
            except (ConnectionClosed, OSError):
                done.set()

    threads = [threading.Thread(target=f, daemon=True) for f in (from_hub, to_hub, beat)]
    for t in threads:
        t.start()
    while not done.wait(0.5):
        if stop.is_set():
            done.set()
    node.hub.close()
    for s in (ours, theirs):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def run(node, state_dir: Path, stop: threading.Event) -> None:
    """Keep the connection to the hub, trying again after a loss (1 s, doubling to 30 s)."""
    wait = RETRY_S_MIN
    while not stop.is_set():
        began = time.monotonic()
        try:
            session(node, state_dir, stop)
        except PinMismatch as e:
            _status(state_dir, connected=False, last_error=str(e))
            log.warning("%s", e)
        except (OSError, ConnectionClosed, TimeoutError, ValueError) as e:
            _status(state_dir, connected=False, last_error=f"{type(e).__name__}: {e}"[:300])
        if time.monotonic() - began > 2 * RETRY_S_MAX:
            wait = RETRY_S_MIN
        stop.wait(wait)
        wait = min(RETRY_S_MAX, wait * 2)
