"""``agentplaza mcp serve``: the stdio bridge Claude Desktop runs.

A pipe and nothing more: each message the client writes on standard input goes to the hub's
``/mcp`` over streamable HTTP, and each answer comes back on standard output, both through the
official ``mcp`` SDK's transports.  It has no tools of its own; the hub answers everything.  The
token is the one ``agentplaza mcp login`` saved for that hub (0600 in the config folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import folders
from ..permissions import check_private
from ..wire import MCP_PATH, MCP_TOKEN_PREFIX

#: Where ``mcp login`` keeps each hub's token: {hub URL: token}.
SAVED_FILE = "mcp-hubs.json"
FILE_MODE = 0o600


def saved_path() -> Path:
    return folders().config / SAVED_FILE


def normal_hub(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else "http://" + url


def load_saved() -> dict[str, str]:
    path = saved_path()
    if not path.exists():
        return {}
    check_private([], [(path, "saved MCP tokens")])
    return json.loads(path.read_text() or "{}")


def save_token(hub: str, token: str) -> Path:
    if not token.startswith(MCP_TOKEN_PREFIX) or any(c.isspace() for c in token):
        raise ValueError(f"a hub MCP token starts with {MCP_TOKEN_PREFIX} and has no spaces")
    saved = load_saved()
    saved[normal_hub(hub)] = token
    path = saved_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(saved, indent=2) + "\n")
    os.chmod(path, FILE_MODE)
    return path


async def _pump(source, sink) -> None:
    async with sink:
        async for message in source:
            if isinstance(message, Exception):
                continue  # a line the transport could not read: the SDK already answered or dropped it
            await sink.send(message)


async def bridge(hub: str, token: str) -> None:
    # The bridge's async stack loads here, not with the module: every other command stays fast.
    import anyio
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.stdio import stdio_server

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with streamable_http_client(normal_hub(hub) + MCP_PATH, http_client=http) as (hub_in, hub_out), \
                stdio_server() as (std_in, std_out):
            async with anyio.create_task_group() as tg:
                async def client_to_hub() -> None:
                    await _pump(std_in, hub_out)
                    tg.cancel_scope.cancel()  # the client closed its end: the bridge is done

                tg.start_soon(client_to_hub)
                tg.start_soon(_pump, hub_in, std_out)


def serve(hub: str) -> int:
    token = load_saved().get(normal_hub(hub))
    if token is None:
        raise LookupError(f"no MCP token saved for {normal_hub(hub)}; run: agentplaza mcp login --hub {hub}")
    import anyio

    anyio.run(bridge, hub, token)
    return 0
