"""The node gateway for the E2B SDK: every SDK request to a sandbox comes to this one loopback address.

The sandbox is named by the ``E2b-Sandbox-Id`` header or by a ``Host`` of the form
``49983-<id>.<anything>``. The gateway checks the sandbox's access token (``X-Access-Token``: the SDK
sends the one the create answered), then carries the request over the node link to the sandbox VM's
channel (noded's ``envd`` op), where the guest's daemon (``vmm/guest/envd.py``) answers it. Each request
is its own channel stream; the answer streams back as it comes (a command's output), re-framed in
chunks when the daemon gave no length.

One audit line per request: the sandbox, method, path, status, bytes each way and time. No header
value is ever printed (the access token travels in one).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from typing import Any

log = logging.getLogger("apid.e2b.gateway")

#: The gateway's port unless told another (``apid --e2b-gateway-port``).
DEFAULT_GATEWAY_PORT = 49982
#: envd's port in the SDK's host names (``49983-<id>.<domain>``).
ENVD_PORT = 49983
HOST_RE = re.compile(rf"{ENVD_PORT}-([A-Za-z0-9]{{1,64}})\..*")
#: The longest request head and body the gateway takes.
HEAD_MAX, BODY_MAX = 64 << 10, 256 << 20
#: Request headers the gateway does not pass on (hop-by-hop, and the token it checks itself).
DROPPED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "x-access-token",
                     "authorization", "proxy-authorization", "te", "upgrade"})
#: How long a connection may sit idle between requests, in seconds.
IDLE_S = 120.0


class BadRequest(Exception):
    pass


def _read_head(conn: socket.socket, buf: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            if buf:
                raise BadRequest("the request ended inside its head")
            return None
        buf += data
        if len(buf) > HEAD_MAX and b"\r\n\r\n" not in buf[:HEAD_MAX]:
            raise BadRequest("request head too large")
    i = buf.index(b"\r\n\r\n")
    head = bytes(buf[:i])
    del buf[:i + 4]
    return head


def _read_exact(conn: socket.socket, buf: bytearray, n: int) -> bytes:
    while len(buf) < n:
        data = conn.recv(65536)
        if not data:
            raise BadRequest("the request ended inside its body")
        buf += data
    out = bytes(buf[:n])
    del buf[:n]
    return out


def _read_line(conn: socket.socket, buf: bytearray) -> bytes:
    while b"\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            raise BadRequest("the request ended inside a chunk")
        buf += data
    i = buf.index(b"\r\n")
    line = bytes(buf[:i])
    del buf[:i + 2]
    return line


def _read_chunked(conn: socket.socket, buf: bytearray) -> bytes:
    body = bytearray()
    while True:
        size = int(_read_line(conn, buf).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while _read_line(conn, buf):
                pass
            return bytes(body)
        body += _read_exact(conn, buf, size)
        _read_line(conn, buf)
        if len(body) > BODY_MAX:
            raise BadRequest("request body too large")


def parse_head(head: bytes) -> tuple[str, str, str, dict]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest("not an HTTP/1.x request")
    headers: dict = {}
    for line in lines[1:]:
        k, sep, v = line.partition(":")
        if not sep:
            raise BadRequest("a header line without a colon")
        headers[k.strip().lower()] = v.strip()
    return parts[0], parts[1], parts[2], headers


def sandbox_named(headers: dict) -> str | None:
    sid = headers.get("e2b-sandbox-id")
    if sid:
        return sid
    m = HOST_RE.fullmatch(headers.get("host", ""))
    return m.group(1) if m else None


def envd_request(method: str, target: str, headers: dict, body: bytes) -> bytes:
    kept = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k not in DROPPED)
    return (f"{method} {target} HTTP/1.1\r\n{kept}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            .encode("latin-1") + body)


def envd_call(link: Any, cid: int, method: str, target: str, body: bytes = b"",
              headers: dict | None = None, timeout: float = 60.0) -> tuple[int, bytes]:
    """One whole request to a sandbox's daemon (the hub's own: ``/init``); returns status and body."""
    st = link.channel.open("envd", cid=cid)
    st.write(envd_request(method, target, headers or {"content-type": "application/json"}, body))
    st.close()
    raw = st.read_all(timeout)
    head, _, rest = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise RuntimeError("the sandbox's daemon gave no HTTP answer") from None
    return status, rest


class Gateway:
    """A threaded HTTP/1.1 gateway on 127.0.0.1 only."""

    def __init__(self, sandboxes: Any, port: int = DEFAULT_GATEWAY_PORT, out=None) -> None:
        self.sandboxes, self.port = sandboxes, port
        self.out = out or (lambda line: print(line, flush=True))
        self.sock: socket.socket | None = None
        self.stopped = threading.Event()

    def start(self) -> Gateway:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))  # loopback only, always
        s.listen(64)
        self.port = s.getsockname()[1]
        self.sock = s
        threading.Thread(target=self._accept, daemon=True, name="e2b-gateway").start()
        return self

    def close(self) -> None:
        self.stopped.set()
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="e2b-gw-conn").start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(IDLE_S)
        buf = bytearray()
        try:
            while True:
                head = _read_head(conn, buf)
                if head is None:
                    return
                if not self._one(conn, buf, head):
                    return
        except (BadRequest, OSError, ValueError) as e:
            try:
                self._plain(conn, 400, {"code": 400, "message": str(e)}, close=True)
            except OSError:
                pass
        finally:
            conn.close()

    def _plain(self, conn: socket.socket, status: int, obj: dict, close: bool = False) -> int:
        body = json.dumps(obj).encode()
        reason = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 502: "Bad Gateway"}.get(status, "Error")
        conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     f"{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n".encode() + body)
        return len(body)

    def _one(self, conn: socket.socket, buf: bytearray, head: bytes) -> bool:
        t0 = time.monotonic()
        method, target, _version, headers = parse_head(head)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = _read_chunked(conn, buf)
        else:
            n = int(headers.get("content-length") or 0)
            if n > BODY_MAX:
                raise BadRequest("request body too large")
            body = _read_exact(conn, buf, n)
        sid = sandbox_named(headers) or "-"
        path = target.split("?", 1)[0]
        status, sent = 502, 0
        keep = headers.get("connection", "").lower() != "close"
        try:
            try:
                cid = self.sandboxes.running_cid(sid, headers.get("x-access-token"))
            except LookupError as e:
                status, sent = 502, self._plain(conn, 502, {"sandboxId": sid, "code": 502, "message": str(e)})
                return keep
            except PermissionError as e:
                status, sent = 401, self._plain(conn, 401, {"code": 401, "message": str(e)})
                return keep
            status, sent, keep = self._carry(conn, cid, method, target, headers, body, keep)
            return keep
        finally:
            self.out(f"e2b-gateway: sandbox={sid} {method} {path} {status} in={len(head) + len(body)} "
                     f"out={sent} {time.monotonic() - t0:.3f}s")

    def _carry(self, conn, cid, method, target, headers, body, keep) -> tuple[int, int, bool]:
        link = self.sandboxes.link
        st = link.channel.open("envd", cid=cid)
        st.write(envd_request(method, target, headers, body))
        st.close()
        raw = b""
        while b"\r\n\r\n" not in raw:
            data = st.read()
            if not data:
                return 502, self._plain(conn, 502, {"code": 502, "message": "the sandbox did not answer"}), keep
            raw += data
        ghead, _, rest = raw.partition(b"\r\n\r\n")
        lines = ghead.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        ghdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            ghdrs[k.strip()] = v.strip()
        length = next((v for k, v in ghdrs.items() if k.lower() == "content-length"), None)
        out_hdrs = {k: v for k, v in ghdrs.items() if k.lower() not in ("connection", "content-length",
                                                                         "transfer-encoding")}
        sent = 0
        if length is not None:
            out_hdrs["Content-Length"] = length
            conn.sendall(self._head(lines[0], out_hdrs, keep) + rest)
            sent = len(rest)
            while sent < int(length):
                data = st.read()
                if not data:
                    break
                conn.sendall(data)
                sent += len(data)
            return status, sent, keep
        out_hdrs["Transfer-Encoding"] = "chunked"
        conn.sendall(self._head(lines[0], out_hdrs, keep))
        try:
            data = rest
            while True:
                if data:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
                    sent += len(data)
                data = st.read()
                if not data:
                    break
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            st.reset("the client went away")
            raise
        return status, sent, keep

    @staticmethod
    def _head(status_line: str, hdrs: dict, keep: bool) -> bytes:
        hdrs = {**hdrs, "Connection": "keep-alive" if keep else "close"}
        return (status_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode("latin-1")
