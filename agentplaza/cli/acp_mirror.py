"""The repository mirror of ``agentplaza acp --repo NAME`` (the guide's "The repository mirror").

Before each session and each prompt the CLI pushes the editor's project, as committed, to the plaza
repository NAME as ``editor/<branch>`` (``editor/detached-<sha>`` on a detached HEAD), and says what it
pushed in the request's ``_meta`` (``wire.ACP_MIRROR_META``): the branch, the commit, and whether the
project had uncommitted changes (those are not in the branch). The repository is made if it does not
exist.

git never holds the owner token: it pushes to a relay on this machine's loopback (``Relay``), which
forwards git's smart HTTP requests for that one repository to the hub with the CLI's own credential.
Another user of this machine can reach a loopback port too, so the relay answers only requests that
carry its per-run secret in ``RELAY_HEADER``: git gets it as an ``http.extraHeader`` through its
environment (``GIT_CONFIG_*``), never on a command line, which any local user can read in ``/proc``.
"""

from __future__ import annotations

import hmac
import secrets
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

#: What the relay forwards: git's smart HTTP for the one repository, nothing else.
GIT_PATHS = ("/info/refs", "/git-upload-pack", "/git-receive-pack")
#: The largest request the relay carries (the hub holds a push to its own bound, 256 MiB).
MAX_BODY_BYTES = 256 << 20
#: How long one push may take.
PUSH_TIMEOUT_S = 300
#: git as the CLI runs it: never asks for a password, never uses a credential helper.
GIT = ["git", "-c", "credential.helper=", "-c", "core.askPass="]
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}
#: The header that carries the relay's per-run secret; a request without it is 404, like any other path.
RELAY_HEADER = "X-Plaza-Relay"


class Relay:
    """A loopback HTTP server that carries git's requests for ``/git/REPO.git/...`` to the hub, adding the
    CLI's credential; any other path, and any request without the per-run ``secret``, is 404."""

    def __init__(self, hub: str, token: str | None, repo: str, verify=True):
        self.hub, self.repo = hub.rstrip("/"), repo
        self.secret = secrets.token_urlsafe(32)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.hub, headers=headers, verify=verify, timeout=PUSH_TIMEOUT_S)
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: the editor reads stdout and stderr is for errors
                pass

            def do_GET(self) -> None:
                relay.forward(self, b"")

            def do_POST(self) -> None:
                relay.forward(self, relay.body_of(self))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()

    @staticmethod
    def body_of(h: BaseHTTPRequestHandler) -> bytes | None:
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts, total = [], 0
            while True:
                size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    h.rfile.readline()
                    return b"".join(parts)
                total += size
                if total > MAX_BODY_BYTES:
                    return None
                parts.append(h.rfile.read(size))
                h.rfile.readline()
        n = int(h.headers.get("Content-Length") or 0)
        return None if n > MAX_BODY_BYTES else h.rfile.read(n)

    def forward(self, h: BaseHTTPRequestHandler, body: bytes | None) -> None:
        path, _, query = h.path.partition("?")
        prefix = f"/git/{self.repo}.git"
        if not hmac.compare_digest(h.headers.get(RELAY_HEADER, "").encode(), self.secret.encode()):
            h.send_error(404)
            return
        if body is None or not path.startswith(prefix) or path[len(prefix):] not in GIT_PATHS:
            h.send_error(404 if body is not None else 413)
            return
        headers = {k: v for k, v in h.headers.items()
                   if k.lower() in ("content-type", "content-encoding", "git-protocol", "accept")}
        try:
            r = self.client.request(h.command, path, params=query or None, content=body, headers=headers)
        except httpx.HTTPError as e:
            h.send_error(502, f"the hub did not answer: {e}")
            return
        h.send_response(r.status_code)
        for k, v in r.headers.items():
            if k.lower() in ("content-type", "cache-control", "expires", "pragma", "www-authenticate"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(r.content)))
        h.end_headers()
        h.wfile.write(r.content)

    def ensure_repo(self) -> str | None:
        """Make the repository if it does not exist; why not, or None."""
        try:
            r = self.client.post("/v1/git/repos", json={"name": self.repo})
        except httpx.HTTPError as e:
            return f"the hub did not answer: {e}"
        if r.status_code == 200 or (r.status_code == 409 and "repo_exists" in r.text):
            return None
        try:
            return r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            return f"the hub refused the repository ({r.status_code})"


def relay_env(relay: Relay) -> dict[str, str]:
    """git's environment for a push through ``relay``: its secret as an extra header, set through the
    environment (readable only by this user) rather than ``-c`` on the command line."""
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"{RELAY_HEADER}: {relay.secret}"}


def _git(cwd: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(GIT + ["-C", cwd, *args], capture_output=True, text=True, timeout=PUSH_TIMEOUT_S,
                          env={**os.environ, **GIT_ENV, **(env or {})}, check=False)


def push(relay: Relay, cwd: str) -> dict:
    """Push the project at ``cwd`` as committed; what was pushed (the request's ``_meta`` entry)."""
    try:
        return _push(relay, cwd)
    except (OSError, subprocess.SubprocessError) as e:  # no git here, a push that hung: the agent is told
        return {"repo": relay.repo, "failed": f"{type(e).__name__}: {e}"[:300]}


def _push(relay: Relay, cwd: str) -> dict:
    out: dict = {"repo": relay.repo}
    head = _git(cwd, "rev-parse", "--verify", "-q", "HEAD")
    if head.returncode != 0:
        why = "the editor's folder is not a git project" if _git(cwd, "rev-parse").returncode else \
            "the project has no commit yet"
        return {**out, "failed": why}
    commit = head.stdout.strip()
    branch = _git(cwd, "symbolic-ref", "--short", "-q", "HEAD").stdout.strip()
    ref = f"editor/{branch}" if branch else f"editor/detached-{commit[:12]}"
    dirty = bool(_git(cwd, "status", "--porcelain").stdout.strip())
    failed = relay.ensure_repo()
    if failed is None:
        r = _git(cwd, "push", "--force", "--quiet", "--no-verify", f"{relay.url}/git/{relay.repo}.git",
                 f"{commit}:refs/heads/{ref}", env=relay_env(relay))
        failed = None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["git push failed"])[-1][:300]
    if failed is not None:
        return {**out, "failed": failed}
    return {**out, "branch": ref, "commit": commit, "dirty": dirty}
