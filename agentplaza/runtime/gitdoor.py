"""The agents' door to the git server: the channel service ``git``.

In the VM, the harness listens on ``127.0.0.1:GIT_PORT`` (``vmm.guest.contract``) and passes each
connection, as it is, to the hub over the agent's channel, so the guest's ordinary ``git`` clones and
pushes ``http://127.0.0.1:GIT_PORT/git/NAME.git`` with no password or token: the hub knows who calls
from the channel (the node's word for the CID), never from anything the guest says. Here the hub reads
one HTTP/1.1 request from the stream (a git client's: ``info/refs``, ``git-upload-pack`` or
``git-receive-pack``), answers it through ``forge.GitServer.http`` as that agent (the laws decide each
fetch and each pushed branch), and closes the connection; git opens a new one for its next request.

Limits: a request head is at most ``MAX_HEAD_BYTES``; a body at most the service's (``githttp``).
Chunked request bodies (git sends one for a large push) are read chunk by chunk within the limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus

from vmm.channel import ChannelClosed, Stream, StreamReset

from ..domain.base import Refusal
from ..domain.refusals import Kind
from .forge import Caller, server_of
from .githttp import GitRequest, body_limit, service_of

#: The longest request head (request line and headers) the door reads.
MAX_HEAD_BYTES = 16384
#: A refusal's kind as an HTTP status for the guest's git (the API's table has the same numbers).
STATUS = {Kind.INVALID: 422, Kind.MALFORMED: 400, Kind.TOO_LARGE: 413, Kind.FORBIDDEN: 403, Kind.NOT_FOUND: 404,
          Kind.CONFLICT: 409, Kind.UNAUTHENTICATED: 401}

log = logging.getLogger("apid.git")


class Reader:
    """Buffered reads over a ``recv(n) -> bytes`` (b"" at the end)."""

    def __init__(self, recv: Callable[[int], bytes]):
        self.recv, self.buf = recv, b""

    def _more(self) -> bool:
        data = self.recv(65536)
        self.buf += data
        return bool(data)

    def until(self, mark: bytes, limit: int) -> bytes:
        while mark not in self.buf:
            if len(self.buf) > limit or not self._more():
                raise Refusal("invalid_request", "the request ends early or its head is too long")
        out, self.buf = self.buf.split(mark, 1)
        return out

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._more():
                raise Refusal("invalid_request", "the request body ends early")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_request(r: Reader) -> GitRequest:
    head = r.until(b"\r\n\r\n", MAX_HEAD_BYTES).decode("latin-1")
    line, *header_lines = head.split("\r\n")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refusal("invalid_request", "one HTTP/1.1 request")
    method, target = parts[0], parts[1]
    headers: dict[str, str] = {}
    for h in header_lines:
        name, _, value = h.partition(":")
        headers[name.strip().lower()] = value.strip()
    path, _, query = target.partition("?")
    if not path.startswith("/git/") or "/" not in path[5:]:
        raise Refusal("not_found", "this door answers git at /git/NAME.git/ only")
    repo_part, _, rest = path[5:].partition("/")
    if not repo_part.endswith(".git"):
        raise Refusal("not_found", "this door answers git at /git/NAME.git/ only")
    pre = GitRequest(repo_part[:-4], rest, method, query, headers, b"")
    limit = body_limit(service_of(pre))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks, size = [], 0
        while True:
            n = int(r.until(b"\r\n", 64).split(b";")[0] or b"0", 16)
            if n == 0:
                r.until(b"\r\n", MAX_HEAD_BYTES)
                break
            size += n
            if size > limit:
                raise Refusal("push_too_large", f"a request to {pre.rest} is at most {limit >> 20} MiB")
            chunks.append(r.exactly(n))
            r.exactly(2)
        body = b"".join(chunks)
    else:
        length = int(headers.get("content-length") or 0)
        if length > limit:
            raise Refusal("push_too_large", f"a request to {pre.rest} is at most {limit >> 20} MiB")
        body = r.exactly(length) if length else b""
    return GitRequest(pre.repo, rest, method, query, headers, body)


def response(status: int, headers: list[tuple[str, str]], body: bytes) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
    head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers if k.lower() not in ("content-length", "connection")]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def serve_connection(hub, cid: int, recv: Callable[[int], bytes], send: Callable[[bytes], None]) -> None:
    """One git request of agent ``cid`` over its channel (or any byte pipe the hub knows is that agent's)."""
    answer_as(hub, Caller(f"agent:{cid}"), recv, send)


def answer_as(hub, caller: Caller, recv: Callable[[int], bytes], send: Callable[[bytes], None]) -> None:
    """One git request read from ``recv``, answered to ``send`` as ``caller``."""
    try:
        req = read_request(Reader(recv))
        answer = server_of(hub).http(caller, req).value
        send(response(answer.status, answer.headers, answer.body))
    except Refusal as r:
        send(response(STATUS.get(r.kind, 500), [("Content-Type", "text/plain")], f"{r.message} ({r.code})\n".encode()))
    except Exception:  # noqa: BLE001 - a bug answers this request; the hub goes on
        log.exception("the git door failed for %s", caller.actor)
        send(response(500, [("Content-Type", "text/plain")], b"the hub failed to answer; see its log\n"))


def serve_stream(hub, cid: int, st: Stream) -> None:
    """The channel service ``git``: one request on the stream, then the stream closes."""
    try:
        serve_connection(hub, cid, lambda n: st.read(n), st.write)
        st.close()
    except (ChannelClosed, StreamReset):
        pass
