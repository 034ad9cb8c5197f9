"""``agentplaza acp``: the stdio agent an editor (Zed, a JetBrains IDE, Neovim) starts.

A pipe and nothing more: each line the editor writes on standard input goes to the hub's ``/acp``
WebSocket as one message, and each message the hub sends comes back as one line on standard
output.  The CLI adds no protocol of its own; the hub answers every method.  The editor's side of
the pipe is the ``agent-client-protocol`` package's stdio streams; the hub's side is a WebSocket
carrying the owner token or a hub MCP token (``--token``, ``APZ_TOKEN``, or this machine's owner
token for a local hub).
"""

from __future__ import annotations

import json
import sys
from urllib.parse import quote

from ..wire import ACP_PATH

#: An editor's message may carry 256 KiB of attached text; the hub takes up to 384 KiB a message.
LINE_BYTES_MAX = 512 * 1024
#: The exit status when the hub refuses the editor (ACP off, an observe token, a bad token).
REFUSED_EXIT = 1


def url_of(hub: str, agent: str | None) -> str:
    base = hub.rstrip("/").replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    return base + ACP_PATH + (f"?agent={quote(agent, safe='')}" if agent else "")


def refusal_text(status: int, body: bytes) -> str:
    try:
        err = json.loads(body or b"{}").get("error") or {}
    except ValueError:
        err = {}
    return f"refused ({status}): {err.get('code', 'refused')}: {err.get('message', 'the hub refused the editor')}"


async def pipe(url: str, token: str | None, ssl_context=None) -> int:
    # The async stack loads here, with `acp` only: every other command stays fast.
    import asyncio

    from acp.stdio import stdio_streams
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    kw = {"ssl": ssl_context} if ssl_context is not None and url.startswith("wss:") else {}
    try:
        ws = await connect(url, additional_headers=headers, max_size=LINE_BYTES_MAX, ping_interval=20, **kw)
    except InvalidStatus as e:
        print("agentplaza acp: " + refusal_text(e.response.status_code, e.response.body), file=sys.stderr)
        return REFUSED_EXIT
    except (InvalidHandshake, OSError) as e:
        print(f"agentplaza acp: cannot reach the hub at {url}: {e}", file=sys.stderr)
        return REFUSED_EXIT
    reader, writer = await stdio_streams(limit=LINE_BYTES_MAX)

    async def editor_to_hub() -> None:
        while True:
            line = await reader.readline()
            if not line:
                return  # the editor closed its end
            line = line.strip()
            if line:
                await ws.send(line.decode(errors="replace"))

    async def hub_to_editor() -> None:
        async for message in ws:
            data = message.encode() if isinstance(message, str) else message
            writer.write(data.replace(b"\n", b" ") + b"\n")
            await writer.drain()

    tasks = [asyncio.create_task(editor_to_hub()), asyncio.create_task(hub_to_editor())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        try:
            await ws.close()
        except ConnectionClosed:
            pass
    closed = ws.close_code
    if closed not in (None, 1000, 1001):
        print(f"agentplaza acp: the hub closed the connection ({closed}: {ws.close_reason})", file=sys.stderr)
        return REFUSED_EXIT
    return 0


def run(hub: str, token: str | None, agent: str | None, ssl_context=None) -> int:
    import asyncio

    return asyncio.run(pipe(url_of(hub, agent), token, ssl_context))
