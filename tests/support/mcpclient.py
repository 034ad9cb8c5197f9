"""The official MCP client (the ``mcp`` SDK) against a real hub, for black-box tests."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def session(url: str, token: str | None, body: Callable[[ClientSession], Awaitable[Any]],
            headers: dict[str, str] | None = None) -> Any:
    """Open an MCP session on ``url``/mcp with ``token`` (None: no token), run ``body`` in it, return its value."""
    async def main() -> Any:
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(headers=h) as http, \
                streamable_http_client(url + "/mcp", http_client=http) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return await body(s)

    return anyio.run(main)


async def tool_names(s: ClientSession) -> list[str]:
    return [t.name for t in (await s.list_tools()).tools]


def cli_json(result) -> Any:
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)
