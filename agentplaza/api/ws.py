"""/v1/ws: the live bus over WebSocket, subprotocol apz.events.v1, read-only.

The socket carries events to the client and nothing back: a client's message is read and thrown
away, and one over ``CLIENT_MESSAGE_BYTES_MAX`` closes the socket with 1009 (message too big).
Hypercorn refuses a message over ``acp_door.MESSAGE_BYTES_MAX`` itself before it is buffered whole
(apid's ``websocket_max_message_size``, the larger of the two sockets' limits) and pings every ``PING_INTERVAL_S``, so a
peer that went away is noticed.  The bus's own limits (sockets per address, idle, behind) are
in ``events.bus``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..events.bus import CLOSE_BEHIND, CLOSE_FULL, CLOSE_IDLE, CLOSE_YIELDED, MAX_BEHIND, SUBPROTOCOL, Bus, BusFull

#: The largest message a client may send on the read-only stream.
CLIENT_MESSAGE_BYTES_MAX = 4 * 1024
#: How often the hub pings each socket.
PING_INTERVAL_S = 20.0
#: The standard close code for a message too big.
CLOSE_TOO_BIG = 1009
#: The close code of a socket whose sign-in ended (the console then shows its sign-in page).
CLOSE_SIGNED_OUT = 4401
#: How often a socket opened with a sign-in's cookie checks that the sign-in still holds (a rotated owner
#: token ends every sign-in: the socket must not go on carrying the plaza's news to the old session).
SESSION_CHECK_S = 1.0


def endpoint(bus: Bus, signed_in: Callable[[dict], bool] | None = None):
    """``signed_in(scope)``: False once the caller's way in no longer holds (its sign-in ended); None
    for a socket that never rests on a sign-in."""

    async def ws(websocket: WebSocket) -> None:
        if SUBPROTOCOL not in (websocket.scope.get("subprotocols") or []):
            await websocket.close(code=4400, reason=f"use the subprotocol {SUBPROTOCOL}")
            return
        families = [k for k in (websocket.query_params.get("kinds") or "").split(",") if k] or None
        console = websocket.query_params.get("all") in ("1", "true")  # the VMs' console lines too
        state: dict = {"wake": anyio.Event(), "close": None}

        def wake() -> None:
            state["wake"].set()

        address = websocket.client.host if websocket.client else "?"
        try:
            sub = bus.subscribe(address, families, wake, console)
        except BusFull as e:
            await websocket.close(code=CLOSE_FULL, reason=str(e))
            return
        await websocket.accept(subprotocol=SUBPROTOCOL)
        try:
            async with anyio.create_task_group() as tg:

                async def read_incoming() -> None:
                    # Read-only: what a client sends is thrown away; its close ends the socket.
                    with contextlib.suppress(WebSocketDisconnect):
                        while True:
                            message = await websocket.receive()
                            if message["type"] == "websocket.disconnect":
                                break
                            size = len(message.get("bytes") or b"") + len((message.get("text") or "").encode())
                            if size > CLIENT_MESSAGE_BYTES_MAX:
                                state["close"] = (CLOSE_TOO_BIG, f"a client message is at most {CLIENT_MESSAGE_BYTES_MAX} bytes")
                                wake()
                                return
                            bus.touch(sub)
                    tg.cancel_scope.cancel()

                tg.start_soon(read_incoming)
                while state["close"] is None:
                    wait_s = bus.idle_for(sub) if signed_in is None else min(bus.idle_for(sub), SESSION_CHECK_S)
                    with anyio.move_on_after(wait_s):
                        await state["wake"].wait()
                    state["wake"] = anyio.Event()
                    if signed_in is not None and not signed_in(websocket.scope):
                        state["close"] = (CLOSE_SIGNED_OUT, "the sign-in ended; sign in again")
                    elif sub.yielded:
                        state["close"] = (CLOSE_YIELDED, "a newer socket from this address took this one's place")
                    elif sub.dropped:
                        state["close"] = (CLOSE_BEHIND, f"more than {MAX_BEHIND} events behind; reconnect and read the state again")
                    elif not sub.queue and bus.idle_for(sub) == 0:
                        state["close"] = (CLOSE_IDLE, f"nothing passed for {bus.idle_s:g} s; reconnect to go on")
                    while sub.queue and state["close"] is None:
                        await websocket.send_json(sub.queue.popleft().as_message())
                        bus.touch(sub)
                code, reason = state["close"]
                await websocket.close(code=code, reason=reason)
                tg.cancel_scope.cancel()
        except Exception:  # noqa: BLE001 - a broken socket only ends itself
            pass
        finally:
            bus.unsubscribe(sub)

    return ws
