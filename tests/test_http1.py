"""The gateway's HTTP/1.1 client (adapters/providers/http1.py) against a scripted server on loopback.

Each test's server answers each request it reads with the next bytes of its script, exactly as
written, so the framing rules (Content-Length, chunked, to the end), the kept-alive connections
and every refusal are seen on the wire.  Run on trio (the hub's loop) and asyncio (Starlette's
test client's).
"""

from __future__ import annotations

import socket
import ssl
import threading

import anyio
import pytest

from agentplaza.adapters.providers import http1
from agentplaza.api.tls import CERT_FILE, KEY_FILE, make_certificate

BACKENDS = ["trio", "asyncio"]


class Scripted:
    """A loopback server: for each request read (head and Content-Length body), the next answer of
    ``answers`` is written; ``None`` closes the connection instead; ``"hold"`` writes nothing."""

    def __init__(self, answers: list[bytes | str | None], close_after_each: bool = False,
                 tls: ssl.SSLContext | None = None):
        self.answers = list(answers)
        self.tls = tls
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = threading.Semaphore(0)  # released each time the server has closed a connection
        self.close_after_each = close_after_each
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        scheme, host = ("https", "localhost") if tls else ("http", "127.0.0.1")
        self.url = f"{scheme}://{host}:{self.sock.getsockname()[1]}/v1/chat/completions"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        finally:
            self.closed.release()

    def _answer(self, conn: socket.socket) -> None:
        buf = b""
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                return  # a client that did not trust this certificate
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    buf += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buf[:length])
                buf = buf[length:]
                with self._lock:
                    answer = self.answers.pop(0) if self.answers else None
                if answer is None:
                    return
                if answer == "hold":
                    conn.recv(1)  # until the client gives up
                    return
                conn.sendall(answer)  # type: ignore[arg-type]
                if self.close_after_each:
                    return

    def close(self) -> None:
        self.sock.close()


def ok(body: bytes = b'{"ok": true}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


def run(backend: str, fn, *args):
    return anyio.run(fn, *args, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_answers_come_back_and_the_connection_is_kept(backend):
    server = Scripted([ok(b'{"n": 1}'), ok(b'{"n": 2}')])

    async def go():
        pool = http1.Pool()
        first = await pool.post(server.url, [("authorization", "Bearer k")], b'{"a": 1}')
        assert first.status == 200 and (b"content-type", b"application/json") in first.headers
        assert await first.read() == b'{"n": 1}'
        second = await pool.post(server.url, [], b"{}")
        assert await second.read() == b'{"n": 2}'
        await pool.aclose()

    run(backend, go)
    assert server.connections == 1  # the second call went on the kept connection
    request = server.requests[0]
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:")
    assert b"\r\ncontent-length: 8\r\n" in request and b"\r\nauthorization: Bearer k\r\n" in request
    assert request.endswith(b'\r\n\r\n{"a": 1}')
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chunked_answer_is_decoded_piece_by_piece_and_trailers_are_dropped(backend):
    body = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"7;ext=1\r\ndata: 1\r\n" b"10\r\n\ndata: 22222222\n\r\n" b"0\r\nX-Trailer: t\r\n\r\n")
    server = Scripted([body, ok(b"after")])

    async def go():
        pool = http1.Pool()
        r = await pool.post(server.url, [], b"{}")
        pieces = [p async for p in r.aiter()]
        await r.aclose()
        assert b"".join(pieces) == b"data: 1\ndata: 22222222\n"
        again = await pool.post(server.url, [], b"{}")
        assert await again.read() == b"after"  # the chunked body was read to its end: the connection is kept

    run(backend, go)
    assert server.connections == 1
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_answer_without_a_length_is_read_to_the_end_and_its_connection_not_kept(backend):
    server = Scripted([b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"whole\": 1}", ok()],
                      close_after_each=True)

    async def go():
        pool = http1.Pool()
        assert await (await pool.post(server.url, [], b"{}")).read() == b'{"whole": 1}'
        assert await (await pool.post(server.url, [], b"{}")).read() == b'{"ok": true}'

    run(backend, go)
    assert server.connections == 2
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_interim_answers_are_skipped_and_connection_close_is_obeyed(backend):
    server = Scripted([b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"real", b"Connection: close\r\n"), ok(b"next")],
                      close_after_each=True)

    async def go():
        pool = http1.Pool()
        r = await pool.post(server.url, [], b"{}")
        assert r.status == 200 and await r.read() == b"real"
        assert await (await pool.post(server.url, [], b"{}")).read() == b"next"

    run(backend, go)
    assert server.connections == 2
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_idle_connection_the_server_closed_is_not_used_again(backend):
    server = Scripted([ok(b"one"), ok(b"two")], close_after_each=True)

    async def go():
        pool = http1.Pool()
        assert await (await pool.post(server.url, [], b"{}")).read() == b"one"
        assert await anyio.to_thread.run_sync(server.closed.acquire, True, 10)  # the server closed its end
        assert await (await pool.post(server.url, [], b"{}")).read() == b"two"

    run(backend, go)
    assert server.connections == 2
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_header_that_could_inject_another_is_refused_before_anything_is_sent(backend):
    server = Scripted([ok()])

    async def go():
        pool = http1.Pool()
        for headers in ([("x-api-key", "k\r\nx-evil: 1")], [("x-api-key", "k\nx")], [("bad name", "v")],
                        [("x-api-key", "k\x00")]):
            with pytest.raises(http1.LocalProtocolError):
                await pool.post(server.url, headers, b"{}")
        with pytest.raises(http1.LocalProtocolError):
            await pool.post(server.url.replace("/completions", "/compl etions"), [], b"{}")
        with pytest.raises(http1.UnsupportedProtocol):
            await pool.post("ftp://127.0.0.1/x", [], b"{}")
        with pytest.raises(http1.UnsupportedProtocol):  # a label IDNA cannot encode (over 63 characters)
            await pool.post("http://" + "é" * 70 + ".example/x", [], b"{}")

    run(backend, go)
    assert server.requests == [] and server.connections == 0
    server.close()


BAD_ANSWERS = {
    "not HTTP": b"SSH-2.0-OpenSSH\r\n\r\n",
    "a folded header": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n",
    "a header name with a space": b"HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 0\r\n\r\n",
    "two lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
    "a length that is not a number": b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    # a number Python would refuse to read (over 4,300 digits) must be the provider's error, not the hub's
    "a length of 5,000 digits": b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
    "gzip transfer coding": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "a bad chunk size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "a chunk without its CRLF": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY0\r\n\r\n",
    "switching protocols": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    "a head too long": b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (http1.HEAD_BYTES_MAX + 10),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
def test_an_answer_this_client_cannot_read_is_a_protocol_error(backend, case):
    server = Scripted([BAD_ANSWERS[case]], close_after_each=True)

    async def go():
        pool = http1.Pool()
        with pytest.raises(http1.RemoteProtocolError):
            r = await pool.post(server.url, [], b"{}")
            await r.read()

    run(backend, go)
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_connection_that_ends_early_is_an_error_not_a_short_answer(backend):
    server = Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", None], close_after_each=True)

    async def go():
        pool = http1.Pool()
        r = await pool.post(server.url, [], b"{}")
        with pytest.raises(http1.RemoteProtocolError):
            await r.read()
        with pytest.raises(http1.RemoteProtocolError):  # closed with no answer at all
            await pool.post(server.url, [], b"{}")

    run(backend, go)
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_listener_is_a_connect_error(backend):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def go():
        with pytest.raises(http1.ConnectError):
            await http1.Pool().post(f"http://127.0.0.1:{port}/x", [], b"{}")

    run(backend, go)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_silent_provider_times_out_and_a_full_pool_makes_the_next_call_wait_then_give_up(backend, monkeypatch):
    monkeypatch.setattr(http1, "READ_TIMEOUT_S", 0.5)
    monkeypatch.setattr(http1, "POOL_TIMEOUT_S", 0.2)
    server = Scripted(["hold", "hold"])

    async def go():
        pool = http1.Pool(max_connections=1)
        errors = []

        async def call():
            try:
                await pool.post(server.url, [], b"{}")
            except http1.UpstreamError as e:
                errors.append(type(e))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.05)
            tg.start_soon(call)
        assert sorted(e.__name__ for e in errors) == ["PoolTimeout", "ReadTimeout"]
        # the slot came back after the timeout: a third call may connect again
        with pytest.raises(http1.ReadTimeout):
            await pool.post(server.url, [], b"{}")

    run(backend, go)
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_body_left_unread_closes_its_connection(backend):
    server = Scripted([ok(b"x" * 10), ok(b"second")])

    async def go():
        pool = http1.Pool()
        r = await pool.post(server.url, [], b"{}")
        await r.aclose()  # never read
        assert await (await pool.post(server.url, [], b"{}")).read() == b"second"

    run(backend, go)
    assert server.connections == 2
    server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_https_checks_the_providers_certificate_and_keeps_the_connection(backend, tmp_path):
    make_certificate(tmp_path, ["localhost"])
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(tmp_path / CERT_FILE, tmp_path / KEY_FILE)
    server = Scripted([ok(b"over tls"), ok(b"again")], tls=served)
    trusting = ssl.create_default_context(cafile=str(tmp_path / CERT_FILE))

    async def go():
        with pytest.raises(http1.ConnectError):  # the default roots do not know this certificate
            await http1.Pool().post(server.url, [], b"{}")
        pool = http1.Pool(ssl_context=trusting)
        assert await (await pool.post(server.url, [], b"{}")).read() == b"over tls"
        assert await (await pool.post(server.url, [], b"{}")).read() == b"again"
        await pool.aclose()

    run(backend, go)
    assert server.connections == 2  # the refused handshake, then one kept connection for both calls
    assert server.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost:")
    server.close()
