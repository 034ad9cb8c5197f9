"""Git's smart HTTP protocol, served by git's own ``git http-backend`` (a CGI program of the ``git``
package): the hub never speaks the pack protocol itself.

A request is ``/git/NAME.git/info/refs?service=...``, ``/git/NAME.git/git-upload-pack`` (clone, fetch)
or ``/git/NAME.git/git-receive-pack`` (push). Nothing else is served (no dumb-protocol file reads).
Before git receives a push, the hub reads the push's commands (the pkt-lines before the pack: old
commit, new commit, ref) and asks ``authorize`` about each; a refusal answers the push with git's own
report (``ng REF reason``), so the pusher's git prints ``! [remote rejected] ... (reason)`` and git
never sees the pack. A push git accepts is then recorded by the caller with the refs it moved (read
from git before and after, under the repository's lock); when the log refuses the record (a failed
write), the refs go back where they were, so a ref moves only by a recorded push.

Limits: a push's body is at most ``MAX_PUSH_BYTES``, a fetch's request ``MAX_FETCH_REQUEST_BYTES``
(git's own ``receive.maxInputSize`` holds the pack to the same bound).
"""

from __future__ import annotations

import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from ..domain.base import Refusal
from ..domain.git import MAX_MOVES
from .gitstore import GIT, GIT_TIMEOUT_S, GitStore, git_env

#: The largest push the hub takes (the pack and its commands), in bytes.
MAX_PUSH_BYTES = 256 << 20
#: The largest fetch negotiation (the wants and haves of a clone or fetch), in bytes.
MAX_FETCH_REQUEST_BYTES = 16 << 20
SERVICES = ("git-upload-pack", "git-receive-pack")
#: The headers of git's requests that http-backend reads, as CGI variables.
PASSED_HEADERS = {"content-type": "CONTENT_TYPE", "content-encoding": "HTTP_CONTENT_ENCODING",
                  "git-protocol": "HTTP_GIT_PROTOCOL"}


@dataclass(frozen=True)
class GitRequest:
    repo: str
    rest: str  # info/refs, git-upload-pack or git-receive-pack
    method: str
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass(frozen=True)
class GitAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def service_of(req: GitRequest) -> str:
    """The git service the request asks for (refused ``not_found`` for anything else)."""
    if req.rest == "info/refs" and req.method == "GET":
        for part in req.query.split("&"):
            if part.startswith("service=") and part[8:] in SERVICES:
                return part[8:]
    elif req.rest in SERVICES and req.method == "POST":
        return req.rest
    raise Refusal("not_found", "this git server answers git's smart HTTP protocol only")


def body_limit(service: str) -> int:
    return MAX_PUSH_BYTES if service == "git-receive-pack" else MAX_FETCH_REQUEST_BYTES


def inflate(req: GitRequest) -> bytes:
    """The request body as git sent it, un-gzipped (within the service's limit)."""
    enc = req.headers.get("content-encoding", "").lower()
    if enc not in ("gzip", "x-gzip"):
        return req.body
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(req.body, MAX_PUSH_BYTES + 1)
    except zlib.error:
        raise Refusal("invalid_request", "the request body is not gzip") from None
    if len(out) > MAX_PUSH_BYTES or d.unconsumed_tail:
        raise Refusal("push_too_large", f"a push is at most {MAX_PUSH_BYTES >> 20} MiB")
    return out


def push_commands(body: bytes) -> tuple[list[dict], set[str]]:
    """The ref updates a receive-pack request asks for (``old new ref``), and the capabilities named
    on the first; read up to the flush packet, never into the pack."""
    moves, caps, at = [], set(), 0
    while True:
        if at + 4 > len(body):
            raise Refusal("invalid_request", "the push ends before its commands do")
        try:
            size = int(body[at:at + 4], 16)
        except ValueError:
            raise Refusal("invalid_request", "the push's commands are not git pkt-lines") from None
        if size == 0:
            break
        if size < 4 or at + size > len(body):
            raise Refusal("invalid_request", "a pkt-line of the push is cut")
        line = body[at + 4:at + size].rstrip(b"\n")
        at += size
        if line.startswith(b"shallow ") or line.startswith(b"push-cert"):
            raise Refusal("invalid_request", "shallow and signed pushes are not taken here")
        if b"\0" in line:
            line, capline = line.split(b"\0", 1)
            caps = set(capline.decode(errors="replace").split())
        parts = line.decode(errors="replace").split(" ")
        if len(parts) != 3:
            raise Refusal("invalid_request", "a push command is: old new ref")
        moves.append({"old": parts[0], "new": parts[1], "ref": parts[2]})
        if len(moves) > MAX_MOVES:
            raise Refusal("too_many_refs", f"one push moves at most {MAX_MOVES} refs")
    return moves, caps  # none: git's probe of a large push (a lone flush packet), which moves nothing


def _pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def rejection(moves: list[dict], caps: set[str], why: str) -> GitAnswer:
    """git's report of a push refused whole: every ref ``ng`` with the reason."""
    reason = " ".join(why.split())[:300]
    report = _pkt(b"unpack ok\n") + b"".join(_pkt(f"ng {m['ref']} {reason}\n".encode()) for m in moves) + b"0000"
    if "side-band-64k" in caps or "side-band" in caps:
        body = _pkt(b"\x01" + report) + b"0000"
    else:
        body = report
    return GitAnswer(200, [("Content-Type", "application/x-git-receive-pack-result"), ("Cache-Control", "no-cache")],
                     body)


def run_backend(store: GitStore, req: GitRequest, body: bytes, user: str, extra: tuple = ()) -> GitAnswer:
    """git http-backend for this request, as CGI; its answer."""
    env = git_env(store.root, (("http.receivepack", "true"), ("http.uploadpack", "true"),
                               ("receive.maxInputSize", str(MAX_PUSH_BYTES)), *extra))
    env.update({"GIT_PROJECT_ROOT": str(store.root), "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": f"/{store.path(req.repo).name}/{req.rest}", "REQUEST_METHOD": req.method,
                "QUERY_STRING": req.query, "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": user,
                "REMOTE_ADDR": "127.0.0.1", "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1"})
    for header, var in PASSED_HEADERS.items():
        if header in req.headers and not (header == "content-encoding" and body is not req.body):
            env[var] = req.headers[header]
    out = subprocess.run([GIT, "http-backend"], input=body, capture_output=True, env=env, timeout=GIT_TIMEOUT_S,
                         check=False)
    head, _, rest = out.stdout.partition(b"\r\n\r\n")
    if not _:
        head, _, rest = out.stdout.partition(b"\n\n")
    status, headers = 200, []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split(" ", 1)[0] or 500)
        elif name and value:
            headers.append((name.strip(), value.strip()))
    return GitAnswer(status, headers, rest)


def serve(store: GitStore, req: GitRequest, user: str, authorize: Callable[[list[dict]], None],
          record: Callable[[list[dict]], None], extra: tuple = ()) -> GitAnswer:
    """One smart-HTTP request of ``user``: ``authorize(moves)`` raises a ``Refusal`` for a push it
    refuses; ``record(moves)`` gets the refs a push accepted by git moved."""
    service = service_of(req)
    if not store.exists(req.repo):
        raise Refusal("no_repo", f"no repository {req.repo!r} on this plaza's git server")
    if len(req.body) > body_limit(service):
        raise Refusal("push_too_large", f"a request to {service} is at most {body_limit(service) >> 20} MiB")
    if service != "git-receive-pack" or req.method != "POST":
        return run_backend(store, req, req.body, user, extra)
    body = inflate(req)
    moves, caps = push_commands(body)
    if not moves:
        return run_backend(store, req, body, user, extra)
    try:
        authorize(moves)
    except Refusal as r:
        return rejection(moves, caps, r.message)
    zero = "0" * 40
    with store.lock(req.repo):
        before = store.refs(req.repo)
        answer = run_backend(store, req, body, user, extra)
        after = store.refs(req.repo)
        moved = [{"ref": ref, "old": before.get(ref, zero), "new": after.get(ref, zero)}
                 for ref in sorted(set(before) | set(after)) if before.get(ref) != after.get(ref)]
        if moved:
            try:
                record(moved)
            except Exception:  # the log refused it (a failed write): every ref goes back to where it was
                undo(store, req.repo, moved)
                raise
    return answer


def undo(store: GitStore, repo: str, moved: list[dict]) -> None:
    """Put the refs a push moved back where they were (each only if it is still where the push left it)."""
    zero = "0" * 40
    for m in moved:
        if m["old"] == zero:
            store.run(repo, "update-ref", "-d", m["ref"], m["new"])
        else:
            store.run(repo, "update-ref", m["ref"], m["old"], m["new"])  # (all zeros: it must not be there)

