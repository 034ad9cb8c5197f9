"""The channel: a framed, multiplexed stream protocol over one byte pipe.

One pipe joins a guest to its host (a virtio-serial port here, a vsock
connection where vhost-vsock exists). Over it both sides open any number of
logical streams, each with its own flow control and a clean close.

Frame: a 12-byte header then ``length`` bytes of payload::

    type: u8 | flags: u8 | reserved: u16 | stream: u32 | length: u32   (big-endian)

Types:

- ``HELLO``  (stream 0) payload: JSON {"version": 1, "role": ...}. Each side
  sends one when the pipe comes up; the guest answers every HELLO it gets, so
  a host that reconnects learns the guest is there. Channel-ready = the host
  has received the guest's HELLO.
- ``OPEN``   payload: JSON {"service": name, ...}. Opens a stream. The host
  numbers its streams even, the guest odd, so ids never collide.
- ``DATA``   payload: bytes. The sender may only send as many bytes as the
  receiver has granted (initial window ``WINDOW`` bytes per stream).
- ``WINDOW`` payload: u32 increment. The receiver grants more credit after
  its application has consumed data.
- ``CLOSE``  payload: optional JSON (e.g. {"exit": 0}). The sender will send
  no more DATA on that stream (half-close). A stream is gone once both sides
  have sent CLOSE.
- ``RESET``  payload: optional JSON {"error": ...}. Abort the stream at once
  (unknown stream, refused service).

This module is standard library only: it is copied into the guest image and
used there by ``vmm/guest/channeld.py``.
"""

from __future__ import annotations

import _json
import os
import select
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable

VERSION = 1
HEADER = struct.Struct(">BBHII")
HELLO, OPEN, DATA, WINDOW, CLOSE, RESET = 1, 2, 3, 4, 5, 6
NAMES = {HELLO: "HELLO", OPEN: "OPEN", DATA: "DATA", WINDOW: "WINDOW", CLOSE: "CLOSE", RESET: "RESET"}
MAX_PAYLOAD = 32 * 1024
INITIAL_WINDOW = 256 * 1024
#: How long ``Channel.close`` waits for each of its threads before leaving the socket's close to them.
JOIN_S = 2.0


# -- the frames' JSON: CPython's C codec itself ---------------------------------------------------
# ``json``'s Python modules compile regular expressions when imported: 174 ms of a tuned guest's boot
# under TCG, the largest part of channeld's start. The C codec they drive (``_json``) is taken directly;
# what it writes and reads is what ``json.dumps`` (default separators, ASCII) and ``json.loads`` do.
class _Decoding:
    """What the C scanner reads off ``json``'s decoder."""
    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _not_json(o: object) -> object:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


_scan = _json.make_scanner(_Decoding())
# No circular check (``markers`` None): a frame's JSON is never circular, and one encoder serves every thread.
_encode = _json.make_encoder(None, _not_json, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)


def dumps(obj: object) -> bytes:
    """``json.dumps(obj).encode()``."""
    return "".join(_encode(obj, 0)).encode()


def loads(data: bytes | str) -> object:
    """``json.loads(data)`` for UTF-8 JSON; a ValueError when it is not."""
    text = (data.decode() if isinstance(data, (bytes, bytearray)) else data).strip(" \t\n\r")
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return obj


class ProtocolError(Exception):
    """The peer sent something the protocol forbids."""


class ChannelClosed(Exception):
    """The pipe under the channel is gone."""


class StreamReset(Exception):
    """The peer aborted the stream."""


def encode(ftype: int, stream: int, payload: bytes = b"", flags: int = 0) -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise ValueError("payload too large")
    return HEADER.pack(ftype, flags, 0, stream, len(payload)) + payload


class FrameDecoder:
    """Incremental decoder: feed bytes, take whole frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list:
        self._buf += data
        frames = []
        while len(self._buf) >= HEADER.size:
            ftype, flags, _res, stream, length = HEADER.unpack_from(self._buf, 0)
            if ftype not in NAMES:
                raise ProtocolError(f"unknown frame type {ftype}")
            if length > MAX_PAYLOAD:
                raise ProtocolError(f"frame of {length} bytes exceeds {MAX_PAYLOAD}")
            if len(self._buf) < HEADER.size + length:
                break
            payload = bytes(self._buf[HEADER.size:HEADER.size + length])
            del self._buf[:HEADER.size + length]
            frames.append((ftype, stream, payload))
        return frames


class Stream:
    """One logical, flow-controlled, bidirectional byte stream."""

    def __init__(self, channel: Channel, sid: int, meta: dict) -> None:
        self.channel = channel
        self.id = sid
        self.meta = meta
        self._cond = threading.Condition(channel._lock)
        self._rx: deque = deque()
        self._rx_unacked = 0          # bytes consumed but not yet granted back
        self._recv_allowed = INITIAL_WINDOW  # bytes the peer may still send us
        self._send_credit = INITIAL_WINDOW
        self._remote_closed = False   # peer sent CLOSE: no more data will come
        self._local_closed = False    # we sent CLOSE
        self._reset: str | None = None
        self.close_info: dict = {}    # payload of the peer's CLOSE

    # -- reading -----------------------------------------------------------
    def read(self, n: int = 65536, timeout: float | None = None) -> bytes:
        """Up to n bytes; b"" at end of stream (peer closed)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._rx or self._remote_closed or self._reset
                                       or self.channel._dead, timeout):
                raise TimeoutError("stream read timed out")
            if self._rx:
                chunk = self._rx.popleft()
                if len(chunk) > n:
                    self._rx.appendleft(chunk[n:])
                    chunk = chunk[:n]
                self._consumed(len(chunk))
                return chunk
            if self._reset is not None:
                raise StreamReset(self._reset)
            if self._remote_closed:
                self.channel._maybe_forget(self)
                return b""
            raise ChannelClosed("channel closed")

    def read_all(self, timeout: float | None = None) -> bytes:
        out = bytearray()
        while True:
            chunk = self.read(65536, timeout)
            if not chunk:
                return bytes(out)
            out += chunk

    def _consumed(self, n: int) -> None:
        self._rx_unacked += n
        if self._rx_unacked >= INITIAL_WINDOW // 2 and not self._remote_closed:
            grant, self._rx_unacked = self._rx_unacked, 0
            self._recv_allowed += grant
            self.channel._send_locked(WINDOW, self.id, struct.pack(">I", grant))

    # -- writing -----------------------------------------------------------
    def write(self, data: bytes, timeout: float | None = None) -> None:
        """Send all of data, waiting for credit from the peer as needed."""
        view = memoryview(bytes(data))
        with self._cond:
            while view:
                if self._local_closed:
                    raise ChannelClosed("stream already closed for writing")
                if not self._cond.wait_for(lambda: self._send_credit > 0 or self._reset
                                           or self.channel._dead, timeout):
                    raise TimeoutError("no send credit from peer")
                if self._reset is not None:
                    raise StreamReset(self._reset)
                if self.channel._dead:
                    raise ChannelClosed("channel closed")
                n = min(len(view), self._send_credit, MAX_PAYLOAD)
                self.channel._send_locked(DATA, self.id, bytes(view[:n]))
                self._send_credit -= n
                view = view[n:]

    def close(self, info: dict | None = None) -> None:
        """Half-close: we send no more. The stream goes once both sides closed."""
        with self._cond:
            if self._local_closed or self._reset is not None or self.channel._dead:
                return
            self._local_closed = True
            payload = dumps(info) if info else b""
            self.channel._send_locked(CLOSE, self.id, payload)
            self.channel._maybe_forget(self)

    def reset(self, error: str = "reset") -> None:
        with self._cond:
            if self._reset is None and not self.channel._dead:
                self.channel._send_locked(RESET, self.id, dumps({"error": error}))
            self._reset = error
            self.channel._streams.pop(self.id, None)
            self._cond.notify_all()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the peer has closed its side."""
        with self._cond:
            return self._cond.wait_for(lambda: self._remote_closed or self._reset is not None
                                       or self.channel._dead, timeout)

    # socket-like helpers
    def sendall(self, data: bytes) -> None:
        self.write(data)

    def recv(self, n: int) -> bytes:
        return self.read(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Channel:
    """Both ends of the protocol. ``role`` is "host" (even ids) or "guest" (odd ids).

    ``fd_read``/``fd_write`` are raw file descriptors (a socket's fileno twice,
    or the two halves of a character device). A reader thread decodes frames;
    streams the peer opens are queued for ``accept()`` or handed to
    ``on_open(stream)`` if given.
    """

    def __init__(self, fd_read: int, fd_write: int | None = None, role: str = "host",
                 on_open: Callable[[Stream], None] | None = None,
                 on_hello: Callable[[dict], None] | None = None,
                 sock: socket.socket | None = None) -> None:
        if role not in ("host", "guest"):
            raise ValueError("role must be host or guest")
        self.role = role
        self._sock = sock
        self._rfd = fd_read
        self._wfd = fd_read if fd_write is None else fd_write
        self._lock = threading.RLock()
        self._wcond = threading.Condition(threading.Lock())
        self._outq: deque = deque()
        self._writer = threading.Thread(target=self._write_loop, name=f"channel-{role}-w", daemon=True)
        self._cond = threading.Condition(self._lock)
        self._streams: dict = {}
        self._next_id = 2 if role == "host" else 1
        self._accept_q: deque = deque()
        self._on_open = on_open
        self._on_hello = on_hello
        self._dead = False
        #: The reader and the writer, while they may still use the pipe's fds; ``close`` closes the socket
        #: only once neither does (``_release``): closed under them, its fd's number could be reused by another
        #: file of this process, which a frame still being written would reach (a test's pipe once got a WINDOW
        #: frame so) and from which the reader would read.
        self._users = 0
        self._closing = False
        self._released = False
        #: Over raw descriptors (a guest's port), which nothing can shut down under a blocked read or write: a
        #: pipe whose other end ``close`` writes to. The reader and the writer wait in ``poll`` on it beside the
        #: port (``_wait``), so once woken they end without touching the port again, and channeld makes the next
        #: channel on that port. A port opened non-blocking (channeld's) never holds them inside a read or write.
        self._wake: tuple[int, int] | None = None
        if sock is None:
            self._wake = os.pipe()
            os.set_blocking(self._wake[1], False)
        self.peer_hello: dict | None = None
        self._hello_count = 0
        self._reader = threading.Thread(target=self._read_loop, name=f"channel-{role}", daemon=True)

    @classmethod
    def over_socket(cls, sock: socket.socket, role: str = "host", **kw) -> Channel:
        sock.setblocking(True)
        return cls(sock.fileno(), role=role, sock=sock, **kw)

    def start(self, hello: bool = True) -> Channel:
        with self._lock:
            self._users = 2
        self._reader.start()
        self._writer.start()
        if hello:
            self.send_hello()
        return self

    def send_hello(self) -> None:
        with self._lock:
            self._send_locked(HELLO, 0, dumps({"version": VERSION, "role": self.role}))

    # -- public --------------------------------------------------------------
    def wait_ready(self, timeout: float | None = None) -> dict:
        """Wait for the peer's HELLO; returns it."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.peer_hello is not None or self._dead, timeout):
                raise TimeoutError("no HELLO from peer")
            if self.peer_hello is None:
                raise ChannelClosed("channel closed before HELLO")
            return self.peer_hello

    def open(self, service: str, **meta) -> Stream:
        """Open a stream to the peer's ``service``."""
        meta = dict(meta, service=service)
        with self._lock:
            if self._dead:
                raise ChannelClosed("channel closed")
            sid = self._next_id
            self._next_id += 2
            st = Stream(self, sid, meta)
            self._streams[sid] = st
            self._send_locked(OPEN, sid, dumps(meta))
            return st

    def accept(self, timeout: float | None = None) -> Stream:
        """Next stream the peer opened (when no on_open handler is set)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._accept_q or self._dead, timeout):
                raise TimeoutError("no stream opened by peer")
            if self._accept_q:
                return self._accept_q.popleft()
            raise ChannelClosed("channel closed")

    @property
    def closed(self) -> bool:
        return self._dead

    def stream_count(self) -> int:
        with self._lock:
            return len(self._streams)

    def drop_streams(self, reason: str) -> None:
        """Every stream open now ends here as if the peer had reset it, and nothing is sent: the peer
        that opened or took them is gone (a restored guest's channel, now carried by a new host)."""
        with self._lock:
            for st in list(self._streams.values()):
                st._reset = reason
                st._cond.notify_all()
            self._streams.clear()
            self._accept_q.clear()

    def close(self) -> None:
        """End the channel. A socket under it is shut down at once (its reader sees the end, a write fails)
        and closed once the reader and the writer are done with it: here when they end within
        ``JOIN_S`` each, else by the last of them as it ends (``_release``). Over raw descriptors both are
        woken (``_wake``) and touch the pipe no more; the descriptors stay open, their owner's."""
        with self._lock:
            self._die()
            self._closing = True
            if self._wake is not None and not self._released:  # (under the lock: not closed meanwhile)
                try:
                    os.write(self._wake[1], b"\0")
                except OSError:  # full: woken already
                    pass
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        me = threading.current_thread()
        for thread in (self._writer, self._reader):
            if thread is not me and thread.is_alive():
                thread.join(JOIN_S)
        self._release()

    # -- internals -----------------------------------------------------------
    def _done_with_fds(self) -> None:
        """The reader or the writer ends: it uses the pipe no more."""
        with self._lock:
            self._users -= 1
        self._release()

    def _release(self) -> None:
        """Close the socket (or the wake pipe) once ``close`` was asked and neither thread uses it any more (once)."""
        with self._lock:
            if not self._closing or self._users > 0 or self._released:
                return
            self._released = True
        if self._sock is not None:
            self._sock.close()
        if self._wake is not None:
            for fd in self._wake:
                os.close(fd)

    def _send_locked(self, ftype: int, sid: int, payload: bytes = b"") -> None:
        """Queue a frame; the writer thread sends it. Never blocks on I/O, so a
        full pipe can not stall the reader (and with it the peer)."""
        if self._dead:
            raise ChannelClosed("channel closed")
        with self._wcond:
            self._outq.append(encode(ftype, sid, payload))
            self._wcond.notify()

    def _write_loop(self) -> None:
        try:
            while True:
                with self._wcond:
                    self._wcond.wait_for(lambda: self._outq or self._dead)
                    if self._dead:  # what is still queued goes nowhere: the pipe may be another channel's now
                        self._outq.clear()  # (a guest's port, after its host went: channeld makes a new one on it)
                        return
                    frames = list(self._outq)
                    self._outq.clear()
                buf = memoryview(b"".join(frames))
                try:
                    while buf:
                        if self._wake is not None and not self._wait(self._wfd, select.POLLOUT):
                            with self._lock:  # ``close`` woke it, or the pipe ended: what is left goes nowhere
                                self._die()
                            return
                        try:
                            n = os.write(self._wfd, buf)
                        except BlockingIOError:
                            continue
                        buf = buf[n:]
                except InterruptedError:
                    continue
                except OSError:
                    with self._lock:
                        self._die()
                    return
        finally:
            self._done_with_fds()

    def flush(self, timeout: float | None = 5.0) -> bool:
        """Wait until every queued frame has been handed to the pipe."""
        import time
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._wcond:
                if not self._outq or self._dead:
                    return not self._outq
            if end is not None and time.monotonic() > end:
                return False
            time.sleep(0.005)

    def _die(self) -> None:
        if self._dead:
            return
        self._dead = True
        self._cond.notify_all()
        with self._wcond:
            self._wcond.notify_all()
        for st in list(self._streams.values()):
            with st._cond:
                st._cond.notify_all()

    def _maybe_forget(self, st: Stream) -> None:
        if st._local_closed and st._remote_closed and not st._rx:
            self._streams.pop(st.id, None)

    def _wait(self, fd: int, event: int) -> bool:
        """Over raw descriptors: wait until ``fd`` is ready for ``event`` (POLLIN or POLLOUT) and say True, or
        False once ``close`` has woken this thread (``_wake``) or, for a write, the pipe has ended."""
        poller = select.poll()
        poller.register(fd, event)
        poller.register(self._wake[0], select.POLLIN)
        while True:
            ready = dict(poller.poll())
            if self._wake[0] in ready:
                return False
            if event == select.POLLOUT and ready.get(fd, 0) & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return False
            if ready:
                return True

    def _read_loop(self) -> None:
        dec = FrameDecoder()
        try:
            while True:
                if self._wake is not None and not self._wait(self._rfd, select.POLLIN):
                    break  # ``close`` woke it: the port is not read again
                try:
                    data = os.read(self._rfd, 65536)
                except (InterruptedError, BlockingIOError):
                    continue
                if not data:
                    break
                for ftype, sid, payload in dec.feed(data):
                    self._dispatch(ftype, sid, payload)
        except (OSError, ProtocolError, ChannelClosed):
            pass
        finally:
            with self._lock:
                self._die()
            self._done_with_fds()

    def _dispatch(self, ftype: int, sid: int, payload: bytes) -> None:
        if ftype == HELLO:
            hello = loads(payload or b"{}")
            with self._lock:
                self.peer_hello = hello
                self._hello_count += 1
                self._cond.notify_all()
            if self._on_hello:
                self._on_hello(hello)
            return
        handler = None
        with self._lock:
            if ftype == OPEN:
                mine = (sid % 2 == 0) == (self.role == "host")
                if sid == 0 or mine or sid in self._streams:
                    raise ProtocolError(f"bad OPEN for stream {sid}")
                st = Stream(self, sid, loads(payload or b"{}"))
                self._streams[sid] = st
                if self._on_open is None:
                    self._accept_q.append(st)
                    self._cond.notify_all()
                    return
                handler = self._on_open
            else:
                st = self._streams.get(sid)
                if st is None:
                    if ftype not in (RESET, CLOSE, WINDOW):
                        self._send_locked(RESET, sid, b'{"error": "unknown stream"}')
                    return
                with st._cond:
                    if ftype == DATA:
                        if st._remote_closed:
                            raise ProtocolError(f"DATA after CLOSE on stream {sid}")
                        st._recv_allowed -= len(payload)
                        if st._recv_allowed < 0:
                            raise ProtocolError(f"peer overran the window on stream {sid}")
                        st._rx.append(payload)
                    elif ftype == WINDOW:
                        (inc,) = struct.unpack(">I", payload)
                        st._send_credit += inc
                    elif ftype == CLOSE:
                        st._remote_closed = True
                        st.close_info = loads(payload) if payload else {}
                        self._maybe_forget(st)
                    elif ftype == RESET:
                        info = loads(payload) if payload else {}
                        st._reset = info.get("error", "reset")
                        self._streams.pop(sid, None)
                    st._cond.notify_all()
                return
        if handler is not None:
            threading.Thread(target=handler, args=(st,), daemon=True,
                             name=f"stream-{sid}").start()
