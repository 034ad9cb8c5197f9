"""/v1/ws: the live bus over WebSocket, subprotocol apz.events.v1, read-only."""

from __future__ import annotations

import contextlib

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..events.bus import MAX_BEHIND, SUBPROTOCOL, Bus, BusFull


def endpoint(bus: Bus):
    async def ws(websocket: WebSocket) -> None:
        if SUBPROTOCOL not in (websocket.scope.get("subprotocols") or []):
            await websocket.close(code=4400, reason=f"use the subprotocol {SUBPROTOCOL}")
            return
        families = [k for k in (websocket.query_params.get("kinds") or "").split(",") if k] or None
        state = {"wake": anyio.Event()}
        address = websocket.client.host if websocket.client else "?"
        try:
            sub = bus.subscribe(address, families, lambda: state["wake"].set())
        except BusFull as e:
            await websocket.close(code=4429, reason=str(e))
            return
        await websocket.accept(subprotocol=SUBPROTOCOL)
        try:
            async with anyio.create_task_group() as tg:

                async def ignore_incoming() -> None:
                    # Read-only: what a client sends is ignored; its close ends the socket.
                    with contextlib.suppress(WebSocketDisconnect):
                        while True:
                            await websocket.receive_text()
                    tg.cancel_scope.cancel()

                tg.start_soon(ignore_incoming)
                while True:
                    await state["wake"].wait()
                    state["wake"] = anyio.Event()
                    if sub.dropped:
                        await websocket.close(code=4408, reason=f"more than {MAX_BEHIND} events behind; reconnect and read the state again")
                        break
                    while sub.queue:
                        await websocket.send_json(sub.queue.popleft().as_message())
                tg.cancel_scope.cancel()
        except Exception:  # noqa: BLE001 - a broken socket only ends itself
            pass
        finally:
            bus.unsubscribe(sub)

    return ws
