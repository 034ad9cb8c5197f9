"""``agentplaza acp``: the stdio agent an editor (Zed, a JetBrains IDE, Neovim) starts.

A pipe and nothing more: each line the editor writes on standard input goes to the hub's ``/acp``
WebSocket as one message, and each message the hub sends comes back as one line on standard
output.  The CLI adds no protocol of its own; the hub answers every method.  The editor's side of
the pipe is the ``agent-client-protocol`` package's stdio streams; the hub's side is a WebSocket
carrying the owner token or a hub MCP token (``--token``, ``APZ_TOKEN``, or this machine's owner
token for a local hub).  With ``--repo NAME`` it also pushes the editor's project before each session
and prompt (``acp_mirror``) and says what it pushed in the request's ``_meta``.
"""

from __future__ import annotations

import json
import os
import sys
from urllib.parse import quote

from ..wire import ACP_MIRROR_META, ACP_MIRRORED, ACP_PATH

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


def mirrored(line: bytes, mirror, cwd: list) -> bytes:
    """``line`` with what the mirror pushed in its ``_meta``, where it is a request the guide pushes before
    (a session or a prompt); any other line goes as it came. ``cwd``: the project folder (the latest a
    session named), kept across lines."""
    try:
        msg = json.loads(line)
    except ValueError:
        return line
    if not isinstance(msg, dict) or msg.get("method") not in ACP_MIRRORED or not isinstance(msg.get("params"), dict):
        return line
    params = msg["params"]
    if isinstance(params.get("cwd"), str) and params["cwd"]:
        cwd[0] = params["cwd"]
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    params["_meta"] = {**meta, ACP_MIRROR_META: mirror(cwd[0])}
    return json.dumps(msg).encode()


async def pipe(url: str, token: str | None, ssl_context=None, mirror=None) -> int:
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
    cwd = [os.getcwd()]

    async def editor_to_hub() -> None:
        while True:
            line = await reader.readline()
            if not line:
                return  # the editor closed its end
            line = line.strip()
            if line and mirror is not None:  # push first: the hub tells the agent what is there
                line = await asyncio.to_thread(mirrored, line, mirror, cwd)
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


def run(hub: str, token: str | None, agent: str | None, ssl_context=None, repo: str | None = None) -> int:
    import asyncio

    if repo is None:
        return asyncio.run(pipe(url_of(hub, agent), token, ssl_context))
    from . import acp_mirror

    relay = acp_mirror.Relay(hub, token, repo, verify=ssl_context if ssl_context is not None else True)
    try:
        return asyncio.run(pipe(url_of(hub, agent), token, ssl_context, lambda cwd: acp_mirror.push(relay, cwd)))
    finally:
        relay.close()
