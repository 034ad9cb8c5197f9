"""A joined node's connection out to the hub (``/v1/node/connect``), and the owner's drain, undrain, revoke.

The guide, "Joining a machine" and "Draining and revoking".  The connection is a WebSocket over the
hub's HTTPS.  Its first message must be the node's signed ``hello`` (``agentplaza.nodesign``, checked by
``runtime.joined``); anything else, or a hello that fails, closes it with ``CLOSE_REFUSED`` and nothing
of the node is attached.  After the hello, binary messages carry the ``vmm.channel`` protocol both ways
(bridged here to a socketpair whose other end is the runtime's ``NodeLink``), and text messages are the
node's signed heartbeats; a heartbeat that fails closes the connection.  The path is the only one a node
reaches: it carries no owner token and passes the owner's door only because its hello proves who it is
(``app.OwnerOnly``); every owner route still refuses it.
"""

from __future__ import annotations

import socket

import anyio
from starlette.requests import Request
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...commands import nodes as cmd
from ...nodesign import BadSignature
from ..kit import api_of, endpoint

CONNECT_PATH = "/v1/node/connect"
#: The close code of a refused hello or heartbeat (4000 + HTTP's 403, as the edge closes refused sockets).
CLOSE_REFUSED = 4403
#: A node that says nothing for this long after connecting is let go.
HELLO_TIMEOUT_S = 10.0
#: The most bytes one WebSocket message carries from the hub's socketpair.
CHUNK_BYTES = 256 * 1024


async def connect(ws: WebSocket) -> None:
    hub = ws.app.state.hub
    rt = hub.runtime
    await ws.accept()
    if rt is None:
        await ws.close(CLOSE_REFUSED, "this hub runs without a node runtime")
        return
    joined = rt.joined
    try:
        with anyio.fail_after(HELLO_TIMEOUT_S):
            first = await ws.receive_text()
        name = await anyio.to_thread.run_sync(joined.hello, first)  # it reads the registry: off the event loop
    except (BadSignature, TimeoutError, KeyError, WebSocketDisconnect, RuntimeError) as e:
        reason = str(e) if isinstance(e, BadSignature) else "a node's first message is its signed hello"
        try:
            await ws.close(CLOSE_REFUSED, reason[:120])
        except RuntimeError:
            pass
        return
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    link = await anyio.to_thread.run_sync(joined.attach, name, ours)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_to_socket, ws, theirs, joined, name, tg.cancel_scope)
            tg.start_soon(_to_node, ws, theirs, tg.cancel_scope)
    finally:
        joined.detach(name, link)
        theirs.close()
        try:
            await ws.close(CLOSE_REFUSED if name in joined.revoked_names else 1000)
        except RuntimeError:
            pass


async def _to_socket(ws: WebSocket, sock: socket.socket, joined, name: str, scope) -> None:
    """The node's messages: channel bytes into the socketpair, heartbeats checked."""
    try:
        while True:
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                break
            if msg.get("bytes") is not None:
                data = memoryview(msg["bytes"])
                while data:
                    await anyio.wait_socket_writable(sock)
                    try:
                        n = sock.send(data)
                    except BlockingIOError:
                        continue
                    data = data[n:]
            elif msg.get("text") is not None:
                await anyio.to_thread.run_sync(joined.beat, name, msg["text"])
    except BadSignature as e:  # a heartbeat that fails ends the connection, as a refused hello does
        try:
            await ws.close(CLOSE_REFUSED, str(e)[:120])
        except RuntimeError:
            pass
    except OSError:
        pass
    finally:
        scope.cancel()


async def _to_node(ws: WebSocket, sock: socket.socket, scope) -> None:
    """The hub's channel bytes out to the node; the link's end closing ends the connection."""
    try:
        while True:
            await anyio.wait_socket_readable(sock)
            try:
                data = sock.recv(CHUNK_BYTES)
            except BlockingIOError:
                continue
            if not data:
                break
            await ws.send_bytes(data)
    except OSError:
        pass
    finally:
        scope.cancel()


# -- the owner's --------------------------------------------------------------------------------------
def _node_action(name: str):
    command = getattr(cmd, name)

    async def act(request: Request) -> dict:
        api = api_of(request)
        node = request.path_params["name"]
        await api.command(lambda: command(api.hub.commands, api.context(request), node))
        if name == "revoke" and api.hub.runtime is not None:
            api.hub.runtime.joined.revoked(node)  # at once here; other hubs follow the event
        if name == "drain" and api.hub.runtime is not None:
            api.hub.runtime.drain_started(node)
        return {"node": node, "done": name}

    act.__name__ = name
    return endpoint(act)


ROUTES = [
    WebSocketRoute(CONNECT_PATH, connect),
    *[Route(f"/v1/nodes/{{name}}/{n}", _node_action(n), methods=["POST"]) for n in ("drain", "undrain", "revoke")],
]
