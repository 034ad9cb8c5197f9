"""The hub keeps an idle connection open longer than its clients keep theirs (agentplaza/api/main.py,
``KEEP_ALIVE_S``): a client's pool lets go first, so a reused connection is never one the server is
closing (httpx's "Server disconnected without sending a response", met once on CI)."""

from __future__ import annotations

import socket
import time

import httpx

from agentplaza.api.main import KEEP_ALIVE_S

HTTPX_IDLE_S = 5.0   # httpx's default keepalive_expiry: the CLI's and the tests' clients


def _get(sock: socket.socket, host: str) -> bytes:
    sock.sendall(f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the hub closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0]


def test_an_idle_connection_outlives_a_clients_idle_pool(hub):
    assert KEEP_ALIVE_S > 2 * HTTPX_IDLE_S
    assert httpx.Limits().keepalive_expiry == HTTPX_IDLE_S
    with socket.create_connection((hub.host, hub.port), timeout=30) as sock:
        assert _get(sock, hub.host).startswith(b"HTTP/1.1 200")
        time.sleep(HTTPX_IDLE_S + 1.5)   # past the pool's expiry, and past Hypercorn's own default (5 s)
        assert _get(sock, hub.host).startswith(b"HTTP/1.1 200")   # the same connection still answers
