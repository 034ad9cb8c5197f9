"""The ``Idempotency-Key`` header: a write the owner repeats with the same key is done once.

Applied once, by ``Api.endpoint``, to every POST, PUT, PATCH and DELETE that
carries the header (the rules are in ``agentplaza.domain.idempotency``):

1. The header is checked: 1 to ``KEY_CHARS_MAX`` printable ASCII characters, else 400.
2. The request's fingerprint: an HMAC, keyed by the Idempotency-Key, of its
   method, path, query and body bytes (keyed so a body holding a secret value
   cannot be guessed from the log).
3. A key claimed before answers from the log: the first answer, the
   refusal of a reused key (422), or "still running" / "answer lost" (409).
   A request with the same key already running in this hub answers 409 at once.
4. Otherwise the handler runs with the key's claim riding its first commit
   (``events.store.riding``): the claim is in the same transaction as the
   first change, on every hub sharing the database, so of two racing requests
   one commits and the other finds the key taken.  A request that changed
   nothing claims nothing.
5. Its answer (status and body) is kept in the key's ``Answered`` event,
   AES-GCM-sealed under a key derived from the Idempotency-Key, so the log
   shows no token or code that an answer carries; only the client can open it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import sys
import threading
from collections.abc import Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import Response

from ..domain.base import Refusal
from ..domain.idempotency import REPLAY, IdempotencyKey, KeyTaken, key_id
from ..events.store import riding
from ..vault import crypto
from .errors import ApiError, error_response, read_raw, refusal_response, status_of
from .hub import Hub

HEADER = "Idempotency-Key"
#: The longest key a client may send.
KEY_CHARS_MAX = 255
#: The methods whose requests may carry a key (the rest change nothing).
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The largest answer a key keeps; a larger one is not kept (a repeat is told so, and nothing is redone).
ANSWER_BYTES_MAX = 64 * 1024
#: Set on an answer given again from a key.
REPLAYED_HEADER = "Idempotent-Replayed"
_PRINTABLE = frozenset(range(0x20, 0x7F))


def parse_key(request: Request) -> str | None:
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    data = raw.encode("latin-1")
    if not 1 <= len(data) <= KEY_CHARS_MAX or not set(data) <= _PRINTABLE:
        raise ApiError("invalid_idempotency_key",
                       f"the {HEADER} header is 1 to {KEY_CHARS_MAX} printable ASCII characters")
    return raw


class Derived:
    """What the log keeps of a key and a request: hashes and a sealing key, never the key itself."""

    def __init__(self, key: str, method: str, target: str, body: bytes):
        secret = key.encode()
        self.key_sha256 = hashlib.sha256(b"agentplaza idempotency key v1\0" + secret).hexdigest()
        self.seal_key = hmac.new(secret, b"agentplaza idempotency answer v1", hashlib.sha256).digest()
        request = b"\0".join([b"agentplaza idempotency request v1", method.encode(), target.encode(), body])
        self.fingerprint = hmac.new(secret, request, hashlib.sha256).hexdigest()
        self.id = key_id(self.key_sha256)

    def _aad(self, status: int) -> bytes:
        return f"{self.key_sha256}:{status}".encode()

    def seal(self, status: int, body: bytes) -> str:
        nonce, ct = crypto.encrypt(self.seal_key, body, self._aad(status))
        return base64.b64encode(nonce + ct).decode()

    def open(self, status: int, sealed: str) -> bytes:
        raw = base64.b64decode(sealed)
        return crypto.decrypt(self.seal_key, raw[: crypto.NONCE_BYTES], raw[crypto.NONCE_BYTES:], self._aad(status))


class Claim:
    """The rider: the key's claim joins the request's first commit (see ``events.store.riding``)."""

    def __init__(self, hub: Hub, derived: Derived, method: str, path: str, correlation_id: str | None):
        self.hub, self.derived, self.method, self.path = hub, derived, method, path
        self.correlation_id = correlation_id
        self.positions: list[int] | None = None
        self.closed = False  # the request has answered: a task it started does not claim the key later

    def board(self, store) -> IdempotencyKey | None:
        if self.positions is not None or self.closed:  # claimed by this request's first commit, or too late
            return None
        ctx = self.hub.commands.context("owner", None, self.correlation_id)
        return IdempotencyKey.claim(ctx, store.get(self.derived.id), self.derived.key_sha256,
                                    self.derived.fingerprint, self.method, self.path)

    def boarded(self, positions: list[int]) -> None:
        self.positions = list(positions)


class Keys:
    """The hub's side of idempotency keys: the requests running now, and the log for the rest."""

    def __init__(self, hub: Hub):
        self.hub = hub
        self._running: set[str] = set()
        self._lock = threading.Lock()

    async def around(self, request: Request, answer: Callable[[], Awaitable[Response]]) -> Response:
        if request.method not in WRITE_METHODS:
            return await answer()
        try:
            key = parse_key(request)
            if key is None:
                return await answer()
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            derived = Derived(key, request.method, target, await read_raw(request))
        except ApiError as e:
            return error_response(status_of(e), e.code, e.message)
        with self._lock:
            if derived.key_sha256 in self._running:
                return refusal_response(KeyTaken())
            self._running.add(derived.key_sha256)
        try:
            return await self._once(request, derived, target, answer)
        finally:
            with self._lock:
                self._running.discard(derived.key_sha256)

    async def _once(self, request: Request, derived: Derived, target: str,
                    answer: Callable[[], Awaitable[Response]]) -> Response:
        try:
            replay = await self._kept(derived, fresh=False)
        except Refusal as r:
            return refusal_response(r)
        if replay is not None:
            return replay
        claim = Claim(self.hub, derived, request.method, target, request.headers.get("x-correlation-id"))
        try:
            with riding(claim):
                response = await answer()
        except KeyTaken:  # another request (on this hub or another) claimed the key first
            try:
                replay = await self._kept(derived, fresh=True)
            except Refusal as r:
                return refusal_response(r)
            return replay or refusal_response(KeyTaken())
        finally:
            claim.closed = True
        if claim.positions is not None:
            await anyio.to_thread.run_sync(self._keep, derived, claim.positions, response)
        return response

    async def _kept(self, derived: Derived, fresh: bool) -> Response | None:
        """The first answer for this key, None when the key is free; raises the refusal ``verdict`` gives."""

        def look() -> Response | None:
            store = self.hub.store
            found = store.get(derived.id)
            if found is not None and (fresh or not found.answered):
                with store.fresh():  # this hub's copy may be older than another hub's claim or answer
                    found = store.get(derived.id)
            if found is None or found.verdict(derived.fingerprint, self.hub.commands.clock()) != REPLAY:
                return None
            body = derived.open(found.status, found.answer)
            return Response(body, status_code=found.status, media_type="application/json",
                            headers={REPLAYED_HEADER: "true"})

        return await anyio.to_thread.run_sync(look)

    def _keep(self, derived: Derived, positions: list[int], response: Response) -> None:
        """Record the first answer in the key's ``Answered`` event (off the event loop)."""
        body = getattr(response, "body", None)
        status = response.status_code
        sealed = derived.seal(status, bytes(body)) if isinstance(body, bytes | memoryview) and \
            len(body) <= ANSWER_BYTES_MAX else None
        store = self.hub.store
        try:
            with store.fresh():
                found = store.get(derived.id)
                found.answered_with(self.hub.commands.context("owner"), status, sealed, positions)
                store.commit(found)
        except Exception as e:  # noqa: BLE001 - the change is done; a repeat is told its answer was lost
            print(f"apid: the answer for an Idempotency-Key was not kept: {type(e).__name__}", file=sys.stderr)
