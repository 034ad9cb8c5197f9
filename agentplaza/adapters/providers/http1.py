"""A lean HTTP/1.1 client for the model gateway's one kind of exchange: a POST to a provider.

Why our own and not httpcore: the gateway's goal is at most 1 ms added to a model call
(issue 25), and httpcore's pool with h11 under it was a fifth of the hub's whole time on a
call (py-spy, bench/gateway.py: the pool's locks, a cancel scope per read and write, h11's
event machine both ways).  A provider call needs a small part of HTTP/1.1: one request,
written at once, and an answer framed by Content-Length, chunked transfer coding, or the
connection's end.  This module does that part, strictly, and refuses what it does not do.

What it does, in order:

1. A connection to the URL's origin (scheme, host, port): a kept-alive idle one when there is
   one whose socket is quiet (a readable idle socket is one the server closed: dropped), else a
   new one (``CONNECT_TIMEOUT_S``; TLS with the system's and certifi's roots, SNI, ALPN
   ``http/1.1``).  At most ``MAX_CONNECTIONS`` exchanges at once; one more waits up to
   ``POOL_TIMEOUT_S`` (``PoolTimeout``).  Nothing is retried: a POST the provider may have
   received is never sent twice.
2. The request written in one send: the request line, the headers (a name or value with a line
   break or NUL is refused before anything is sent: no header injection through a key or a
   configured header), the body with its Content-Length.
3. The answer's head read up to ``HEAD_BYTES_MAX``: ``HTTP/1.0`` or ``HTTP/1.1``, a three-digit
   status, header lines ``name: value`` (folded lines, a name with spaces, a CR or NUL in a value:
   ``RemoteProtocolError``).  Interim answers (1xx but 101) are skipped.
4. The body framed by exactly one rule: none for 204 and 304; chunked when Transfer-Encoding is
   ``chunked`` (any other coding is refused); else Content-Length (one value, digits, repeats
   equal); else to the connection's end.  Each read waits at most ``READ_TIMEOUT_S``.
5. The connection goes back to the pool only when the answer was read whole, the server spoke
   HTTP/1.1 and did not say ``Connection: close``; otherwise (an error, a cancelled caller, a
   body left unread) it is closed.

The errors are ``UpstreamError`` subclasses named as a caller reads them (``ConnectError``,
``ReadTimeout`` ...): the gateway quotes the class name to the agent.
"""

from __future__ import annotations

import re
import select
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteStream, SocketAttribute

#: How long the hub waits to connect to a provider, and for each read of its answer.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0
#: How long an exchange waits for a free connection when MAX_CONNECTIONS are busy.
POOL_TIMEOUT_S = CONNECT_TIMEOUT_S
#: Exchanges at once, and idle connections kept for the next ones (every concurrent caller's).
MAX_CONNECTIONS = 200
MAX_KEEPALIVE = MAX_CONNECTIONS
#: The longest answer head (status line and headers) read; longer is a protocol error.
HEAD_BYTES_MAX = 64 * 1024
#: The longest chunk-size line (with its extensions) of a chunked body.
CHUNK_LINE_BYTES_MAX = 4096
#: The most digits of a Content-Length read (19: any length a 64-bit count holds).
LENGTH_DIGITS_MAX = 19
#: How much one read asks of the socket.
RECV_BYTES = 65536

DEFAULT_PORTS = {"http": 80, "https": 443}
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n\x00]*)?")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\r\n\x00]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")


class UpstreamError(Exception):
    """An exchange with a provider failed; nothing of an answer is given."""


class UnsupportedProtocol(UpstreamError):
    """A provider URL that is not http(s)://HOST[:PORT]/..."""


class LocalProtocolError(UpstreamError):
    """The request could not be written as given (a header or target that HTTP cannot carry)."""


class ConnectError(UpstreamError):
    """No connection to the provider (refused, unreachable, or its certificate not trusted)."""


class ConnectTimeout(UpstreamError):
    """No connection to the provider within ``CONNECT_TIMEOUT_S``."""


class PoolTimeout(UpstreamError):
    """``MAX_CONNECTIONS`` exchanges were busy for all of ``POOL_TIMEOUT_S``."""


class WriteError(UpstreamError):
    """The connection failed while the request was written."""


class ReadError(UpstreamError):
    """The connection failed while the answer was read."""


class ReadTimeout(UpstreamError):
    """Nothing of the answer came for ``READ_TIMEOUT_S``."""


class RemoteProtocolError(UpstreamError):
    """The provider's answer is not HTTP/1.1 as this client reads it."""


#: What anyio and the socket layer raise when a connection fails under a read or a write.
_IO_ERRORS = (OSError, ssl.SSLError, anyio.BrokenResourceError, anyio.ClosedResourceError)


def _ssl_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    try:  # the roots httpx and httpcore trust too, where the system's store lacks one
        import certifi

        ctx.load_verify_locations(certifi.where())
    except (ImportError, OSError):
        pass
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class _Conn:
    """One connection: its stream, the bytes read past the last answer, and whether it may be kept."""

    __slots__ = ("stream", "origin", "buf", "fd")

    def __init__(self, stream: ByteStream, origin: tuple[str, str, int]):
        self.stream, self.origin, self.buf = stream, origin, bytearray()
        try:
            self.fd = stream.extra(SocketAttribute.raw_socket).fileno()
        except Exception:  # noqa: BLE001 - a stream with no socket under it is never checked for staleness
            self.fd = -1

    def quiet(self) -> bool:
        """Idle with nothing to read: a readable idle socket is one the server closed (or wrote to unasked)."""
        if self.buf:
            return False
        if self.fd < 0:
            return True
        try:
            return not select.select([self.fd], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    async def receive(self) -> bytes:
        with anyio.move_on_after(READ_TIMEOUT_S) as scope:
            try:
                return await self.stream.receive(RECV_BYTES)
            except anyio.EndOfStream:
                return b""
            except _IO_ERRORS as e:
                raise ReadError(f"the connection failed while reading: {e}") from None
        assert scope.cancelled_caught
        raise ReadTimeout(f"no answer within {READ_TIMEOUT_S:.0f} s")

    async def close(self) -> None:
        await anyio.aclose_forcefully(self.stream)


class Response:
    """An answer: status and headers read; the body read once, whole (``read``) or piece by piece
    (``aiter``), then ``aclose`` (which a whole read does itself)."""

    def __init__(self, pool: Pool, conn: _Conn, status: int, headers: list[tuple[bytes, bytes]], keep: bool,
                 length: int | None, chunked: bool):
        self.status, self.headers = status, headers
        self._pool, self._conn, self._keep = pool, conn, keep
        self._left = length  # bytes of the body still to read (Content-Length); None: chunked or to the end
        self._chunked = chunked
        self._chunk_left = 0  # bytes of the current chunk still to read
        self._done = length == 0
        self._closed = False

    async def read(self) -> bytes:
        out = bytearray()
        try:
            async for piece in self.aiter():
                out += piece
        finally:
            await self.aclose()
        return bytes(out)

    async def aiter(self) -> AsyncIterator[bytes]:
        while not self._done:
            piece = await self._next()
            if piece:
                yield piece

    async def _next(self) -> bytes:
        conn = self._conn
        if self._left is not None:  # Content-Length
            if not conn.buf:
                data = await conn.receive()
                if not data:
                    raise RemoteProtocolError(f"the connection ended {self._left} bytes before the answer's end")
                conn.buf += data
            piece = bytes(conn.buf[: self._left])
            del conn.buf[: len(piece)]
            self._left -= len(piece)
            self._done = self._left == 0
            return piece
        if not self._chunked:  # to the connection's end
            if conn.buf:
                piece = bytes(conn.buf)
                conn.buf.clear()
                return piece
            data = await conn.receive()
            self._done = not data
            return data
        return await self._next_chunk()

    async def _next_chunk(self) -> bytes:
        conn = self._conn
        if self._chunk_left == 0:
            line = await self._line()
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not size_text or len(size_text) > 16 or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
                raise RemoteProtocolError(f"a bad chunk size {bytes(line[:40])!r}")
            size = int(size_text, 16)
            if size == 0:  # the last chunk: trailers (dropped) up to an empty line
                while await self._line():
                    pass
                self._done = True
                return b""
            self._chunk_left = size
        if not conn.buf:
            data = await conn.receive()
            if not data:
                raise RemoteProtocolError("the connection ended inside a chunk")
            conn.buf += data
        piece = bytes(conn.buf[: self._chunk_left])
        del conn.buf[: len(piece)]
        self._chunk_left -= len(piece)
        if self._chunk_left == 0:  # the chunk's own CRLF
            while len(conn.buf) < 2:
                data = await conn.receive()
                if not data:
                    raise RemoteProtocolError("the connection ended inside a chunk")
                conn.buf += data
            if conn.buf[:2] != b"\r\n":
                raise RemoteProtocolError("a chunk does not end with CRLF")
            del conn.buf[:2]
        return piece

    async def _line(self) -> bytes:
        conn = self._conn
        while True:
            end = conn.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(conn.buf[:end])
                del conn.buf[: end + 2]
                return line
            if len(conn.buf) > CHUNK_LINE_BYTES_MAX:
                raise RemoteProtocolError("a chunk-size or trailer line is too long")
            data = await conn.receive()
            if not data:
                raise RemoteProtocolError("the connection ended inside a chunked body")
            conn.buf += data

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._pool._release(self._conn, self._keep and self._done)


class Pool:
    """Kept-alive connections to providers, per origin; see the module's docstring."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS, max_keepalive: int = MAX_KEEPALIVE,
                 ssl_context: ssl.SSLContext | None = None):
        self._busy = anyio.Semaphore(max_connections)
        self._max_keepalive = max_keepalive
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._idle_count = 0
        self._ssl = ssl_context
        self._closed = False

    async def post(self, url: str, headers: list[tuple[str, str]], body: bytes) -> Response:
        """Send ``body`` to ``url`` with ``headers`` (Host and Content-Length are added); the answer's head read."""
        origin, target = _split(url)
        request = _request(origin, target, headers, body)
        if self._busy.value:
            self._busy.acquire_nowait()
        else:
            with anyio.move_on_after(POOL_TIMEOUT_S) as scope:
                await self._busy.acquire()
            if scope.cancelled_caught:
                raise PoolTimeout(f"no free connection to the provider within {POOL_TIMEOUT_S:.0f} s")
        return await self._exchange(origin, request)

    async def _exchange(self, origin: tuple[str, str, int], request: bytes) -> Response:
        """With a slot of ``_busy`` held: write, read the head; the slot goes with the response (or back, on error)."""
        conn = None
        try:
            conn = await self._take(origin) or await self._connect(origin)
            try:
                await conn.stream.send(request)
            except _IO_ERRORS as e:
                raise WriteError(f"the connection failed while writing: {e}") from None
            return await self._head(conn)
        except BaseException:
            if conn is not None:
                await conn.close()
            self._busy.release()
            raise

    async def _take(self, origin: tuple[str, str, int]) -> _Conn | None:
        """The newest idle connection to ``origin`` that is still quiet; the stale ones closed."""
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            self._idle_count -= 1
            if conn.quiet():
                return conn
            await conn.close()
        return None

    async def _connect(self, origin: tuple[str, str, int]) -> _Conn:
        scheme, host, port = origin
        tls = scheme == "https"
        if tls and self._ssl is None:
            self._ssl = _ssl_context()
        with anyio.move_on_after(CONNECT_TIMEOUT_S) as scope:
            try:
                stream = await anyio.connect_tcp(host, port, tls=tls, ssl_context=self._ssl if tls else None,
                                                 tls_hostname=host if tls else None, tls_standard_compatible=False)
            except _IO_ERRORS as e:
                raise ConnectError(f"cannot connect to {host}:{port}: {e}") from None
        if scope.cancelled_caught:
            raise ConnectTimeout(f"no connection to {host}:{port} within {CONNECT_TIMEOUT_S:.0f} s")
        return _Conn(stream, origin)

    async def _head(self, conn: _Conn) -> Response:
        while True:
            end = None
            while end is None:
                m = _HEAD_END.search(conn.buf)
                if m is not None:
                    end = m
                    break
                if len(conn.buf) > HEAD_BYTES_MAX:
                    raise RemoteProtocolError(f"the answer's head is over {HEAD_BYTES_MAX} bytes")
                data = await conn.receive()
                if not data:
                    raise RemoteProtocolError("the provider closed the connection without an answer")
                conn.buf += data
            head = bytes(conn.buf[: end.start()])
            del conn.buf[: end.end()]
            lines = head.split(b"\n")
            m = _STATUS_LINE.fullmatch(lines[0].rstrip(b"\r"))
            if m is None:
                raise RemoteProtocolError(f"not an HTTP/1.1 status line: {lines[0][:60]!r}")
            status = int(m.group(2))
            headers = _headers(lines[1:])
            if 100 <= status < 200:
                if status == 101:
                    raise RemoteProtocolError("the provider switched protocols unasked")
                continue  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            return self._response(conn, m.group(1) == b"1", status, headers)

    def _response(self, conn: _Conn, http11: bool, status: int, headers: list[tuple[bytes, bytes]]) -> Response:
        keep = http11
        codings: list[bytes] = []
        lengths: set[bytes] = set()
        for name, value in headers:
            if name == b"connection":
                if b"close" in (t.strip().lower() for t in value.split(b",")):
                    keep = False
            elif name == b"transfer-encoding":
                codings += [t.strip().lower() for t in value.split(b",")]
            elif name == b"content-length":
                lengths.update(v.strip() for v in value.split(b","))
        if status in (204, 304):
            return Response(self, conn, status, headers, keep, 0, False)
        if codings:
            if codings != [b"chunked"]:
                raise RemoteProtocolError(f"an answer's transfer coding this client does not read: {b', '.join(codings)!r}")
            return Response(self, conn, status, headers, keep and not lengths, None, True)
        if lengths:
            length = next(iter(lengths))
            if len(lengths) != 1 or not length.isdigit() or len(length) > LENGTH_DIGITS_MAX:
                raise RemoteProtocolError(f"a bad Content-Length {sorted(lengths)!r}")
            return Response(self, conn, status, headers, keep, int(length), False)
        return Response(self, conn, status, headers, False, None, False)

    async def _release(self, conn: _Conn, keep: bool) -> None:
        try:
            if keep and not self._closed and self._idle_count < self._max_keepalive:
                self._idle.setdefault(conn.origin, []).append(conn)
                self._idle_count += 1
            else:
                await conn.close()
        finally:
            self._busy.release()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                await conn.close()
        self._idle.clear()
        self._idle_count = 0


def _split(url: str) -> tuple[tuple[str, str, int], bytes]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise UnsupportedProtocol(f"a provider's URL is http(s)://HOST[:PORT]/..., not {url[:80]!r}")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        raise UnsupportedProtocol(f"a bad port in {url[:80]!r}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not target.isascii():
        raise LocalProtocolError("the request's path holds a character HTTP cannot carry (not ASCII)")
    return (scheme, parts.hostname, port), target.encode("ascii")


def _request(origin: tuple[str, str, int], target: bytes, headers: list[tuple[str, str]], body: bytes) -> bytes:
    if _BAD_TARGET.search(target):
        raise LocalProtocolError("the request's path holds a byte HTTP cannot carry")
    scheme, host, port = origin
    try:
        name = host.encode("ascii") if host.isascii() else host.encode("idna")
    except UnicodeError:
        raise UnsupportedProtocol(f"a host name that cannot be sent: {host[:80]!r}") from None
    netloc = (b"[" + name + b"]" if b":" in name else name) + (b"" if port == DEFAULT_PORTS[scheme] else b":%d" % port)
    out = [b"POST ", target, b" HTTP/1.1\r\nhost: ", netloc, b"\r\ncontent-length: ", b"%d" % len(body)]
    for name, value in headers:
        n, v = name.encode("latin-1"), value.encode("latin-1")
        if not _TOKEN.fullmatch(n) or _BAD_VALUE.search(v):
            raise LocalProtocolError(f"the header {name[:40]!r} cannot be sent (a bad name, or a line break in its value)")
        out += (b"\r\n", n, b": ", v)
    out += (b"\r\n\r\n", body)
    return b"".join(out)


def _headers(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    out = []
    for line in lines:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line[:1] in (b" ", b"\t"):
            raise RemoteProtocolError("a folded header line (obsolete line folding is refused)")
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise RemoteProtocolError(f"a bad header line {line[:60]!r}")
        value = value.strip(b" \t")
        if _BAD_VALUE.search(value):
            raise RemoteProtocolError(f"a header {name[:40]!r} holds a CR or NUL")
        out.append((name.lower(), value))
    return out


__all__ = ["Pool", "Response", "UpstreamError", "ConnectError", "ConnectTimeout", "PoolTimeout", "ReadError",
           "ReadTimeout", "WriteError", "RemoteProtocolError", "LocalProtocolError", "UnsupportedProtocol",
           "MAX_CONNECTIONS", "MAX_KEEPALIVE", "CONNECT_TIMEOUT_S", "READ_TIMEOUT_S"]
