"""The model gateway: the only path from an agent to a model provider.

A caller reaches it at ``/v1/gateway/<token>/<wire>/...``, the base URL its
SDK or coding engine is given, and presents the placeholder key ``plaza``.
Who the caller is (agent, role, task) comes from the hub's connection table,
found by the hash of the gateway token in that path; nothing in the request
body can change it.  Each call, in order:

1. STOP ALL: while the plaza is held every call is refused.
2. The policy for the caller's tier: a model not on the list, a refused
   contributor model, or a provider the plaza lacks is refused, and nothing
   reaches a provider (fail closed).  An effort pin is written into the call.
3. The payer: refused before the call when it has no credits.
4. The provider's key, from the key source (the vault, the hub's environment ...).
5. Forwarded; metered (tokens in, out, cache; latency; time to first token);
   recorded as one ``Usage.ModelCalled`` event and charged, in one commit.
6. The provider's answer goes back scrubbed of every value the vault holds and
   of the key used (``agentplaza.vault.scrub``): a provider that quotes the key
   in an error, in any common encoding, gives the caller ``[redacted]``.
7. An answer whose usage the plaza could not record (``wire.Meter.fault``: a
   count out of range, a cost too large) is not passed on: the caller gets
   502 ``bad_upstream`` naming the field, and the call is recorded as an error
   with no tokens and no charge.

Two routes, named by the caller's link (never by the request).  "gateway": a
Model call, charged the provider's cost (else the estimate) to the task's
escrow while it holds money, else to the wallet, recorded after the answer is
sent.  "loop": the agent's own loop, which the hub relays for the harness in
its microVM: Spend, the owner's price plus one credit, from the task's escrow
only (no task: not charged), charged BEFORE the answer goes back, because an
escrow that cannot cover it means "budget exhausted": the reply is discarded
and not charged.  The loop never streams.

Two small interfaces keep the gateway apart from the areas that hold keys and
money: ``KeySource`` and ``Charger``.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import anyio
import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from vmm.guest.contract import PLACEHOLDER_KEY  # the key every gateway caller presents: useless outside the hub

from ..adapters.providers.client import UPSTREAM_ERRORS, Answer, Upstream
from ..adapters.providers.presets import GEMINI, OPENAI, ProviderConfig
from ..adapters.providers.prices import CREDITS_PER_USD, MICRO, PriceBook, snapshots
from ..adapters.providers.wire import (
    PASSED_HEADERS,
    Meter,
    error_body,
    read_ask,
    rewrite,
)
from ..commands import models as model_commands
from ..commands import treasury as treasury_commands
from ..commands.models import MICRO_PER_CREDIT
from ..commands.unit import Unit
from ..domain.base import Context, Refusal
from ..domain.models import (
    GATEWAY_ROUTE,
    LOOP_ROUTE,
    Permit,
    key_binding,
    permit,
    tier_of,
    vault_key_name,
)
from ..domain.plaza import HELD_MESSAGE
from ..domain.plaza import held as plaza_held
from ..domain.tokens import GATEWAY_TOKEN_BYTES, GATEWAY_TOKEN_PREFIX, token_sha256  # noqa: F401 - the gateway's too
from ..domain.treasury import own_loop_charge
from ..domain.vault import HUB_NODE, Denied, resolve
from ..vault.scrub import NOTHING_HELD, Scrubber, scrubber_of
from .errors import status_of
from .hub import Hub

#: The largest request the gateway forwards (model requests carry whole conversations).
MAX_GATEWAY_BODY_BYTES = 32 * 1024 * 1024
#: STOP ALL answers with this status: a 4xx that SDKs do not retry.
HELD_STATUS = 423
#: A payer with nothing (or an agent with no wallet) is refused before the call with this status.
PAYER_STATUS = 402
#: A provider's answer the plaza cannot take (a usage it could not record): the caller gets a bad gateway.
BAD_UPSTREAM_STATUS = 502
#: How long a key printed by --command is reused before the command runs again.
COMMAND_KEY_TTL_S = 300.0
COMMAND_TIMEOUT_S = 30.0
#: The most answered calls the recorder puts in one commit.
RECORD_BATCH = 256
#: How long the recorder waits after a call is answered for more to join its commit.  Recording
#: call by call, right after each answer, took the GIL from the next call (bench/gateway.py:
#: +1.2 ms p50); gathered, one commit serves many calls and the callers keep the interpreter.
RECORD_GATHER_S = 0.05
#: The node whose vault entries a provider key is read for: the hub's own machine,
#: where the gateway runs (agents on other nodes will be told apart with the microVM channel).
CALLER_NODE = HUB_NODE
#: Provider key kinds that live in the vault.
VAULT_KEY_KINDS = ("vault", "secret")




@dataclass(frozen=True)
class Caller:
    """A gateway caller as the hub knows it."""

    cid: str
    role: str
    tier: str
    task: str | None
    model: str | None  # the agent's own model, if it has one
    route: str = GATEWAY_ROUTE  # "gateway" or "loop" (the agent's own loop, relayed by the hub)

    @property
    def actor(self) -> str:
        return f"agent:{self.cid}"


class KeySource(Protocol):
    """Where a provider's key comes from. Returns None when there is none ("Key missing").

    Raises ``Refusal`` when the key exists but cannot be read now (a sealed vault).
    """

    def key(self, provider: ProviderConfig, caller: Caller | None) -> str | None: ...

    def status(self, provider: ProviderConfig) -> str: ...


class Charger(Protocol):
    """The treasury's gateway rules, as the gateway needs them."""

    def check(self, caller: Caller) -> None:
        """Before a call, cheap (on the event loop): raise ``Refusal`` when the payer may have nothing."""

    def confirm(self, caller: Caller) -> None:
        """Confirm a refusal of ``check`` on fresh state (off the event loop); raise it when it holds."""

    def charge(self, unit: Unit, ctx: Context, caller: Caller, credits: int, ref: str) -> dict:
        """In the call's unit (the accounts it changes added to it): {"charged", "shortfall", "payer", "entry"}."""

    def charge_loop(self, unit: Unit, ctx: Context, caller: Caller, input_tokens: int, output_tokens: int,
                    price: tuple[int, int] | None, ref: str) -> dict:
        """The own loop's charge in the call's unit; raises ``Refusal("budget_exhausted")``."""


class HubKeys:
    """Keys the hub reads itself: its environment (--env) and commands (--command)."""

    def __init__(self, environ: dict[str, str] | None = None):
        self.environ = os.environ if environ is None else environ
        self._command_cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def key(self, provider: ProviderConfig, caller: Caller | None) -> str | None:
        kind = provider.key.get("kind")
        if kind == "env":
            return self.environ.get(provider.key["name"]) or None
        if kind == "command":
            return self._command(provider.key["command"])
        return None

    def _command(self, command: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            hit = self._command_cache.get(command)
            if hit and now - hit[0] < COMMAND_KEY_TTL_S:
                return hit[1]
        try:
            out = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                                 check=False)
        except subprocess.TimeoutExpired:
            return None
        token = out.stdout.strip() if out.returncode == 0 else ""
        if not token:
            return None
        with self._lock:
            self._command_cache[command] = (now, token)
        return token

    def status(self, provider: ProviderConfig) -> str:
        kind = provider.key.get("kind")
        if kind == "none":
            return "No key needed"
        if kind == "env":
            name = provider.key["name"]
            return f"Key from env {name}" if self.environ.get(name) else f"Key missing (env {name} is not set)"
        if kind == "command":
            return "Key from command"
        return "Key missing"


def vault_name(provider: ProviderConfig) -> str:
    """The vault entry a provider's key is: its own (kind "vault") or the one --secret named."""
    if provider.key.get("kind") == "secret":
        return provider.key["name"]
    return vault_key_name(provider.id)


class VaultKeys:
    """Provider keys from the hub's vault (kinds "vault" and "secret"); the rest from ``HubKeys``.

    A key is read with ``vault.reveal(name, consumer="provider:<id>", node=...)``,
    the vault's one way out, which records the use (grouped per minute) and
    refuses while the vault is sealed (``vault_sealed``).  The value goes
    into the forwarded request's auth header and nowhere else.
    """

    def __init__(self, hub: Hub, others: HubKeys | None = None):
        self.hub = hub
        self.others = others or HubKeys()

    def key(self, provider: ProviderConfig, caller: Caller | None) -> str | None:
        if provider.key.get("kind") not in VAULT_KEY_KINDS:
            return self.others.key(provider, caller)
        vault = self.hub.vault
        if vault is None:
            return None
        if vault.tampered:
            raise Refusal("vault_tampered", f"the key of provider {provider.id} is in the vault, and the vault is "
                          "tampered; it gives out no secret")
        if vault.sealed:
            raise Refusal("vault_sealed", f"the key of provider {provider.id} is in the vault, and the vault is sealed; "
                          "unseal it with agentplaza vault unseal")
        try:
            return vault.reveal(vault_name(provider), consumer=key_binding(provider.id), node=CALLER_NODE,
                                actor=caller.actor if caller else "hub")
        except Denied:
            return None

    def status(self, provider: ProviderConfig) -> str:
        if provider.key.get("kind") not in VAULT_KEY_KINDS:
            return self.others.status(provider)
        name = vault_name(provider)
        vault = self.hub.vault
        found = False
        if vault is not None:
            try:
                resolve(vault.entries(), name, key_binding(provider.id), CALLER_NODE)
                found = True
            except Denied:
                pass
        if not found:
            return "Key missing" if provider.key["kind"] == "vault" else \
                f"Key missing (no vault entry {name} bound to {key_binding(provider.id)})"
        status = "Key set" if provider.key["kind"] == "vault" else f"Key set (vault entry {name})"
        if vault.tampered:
            return status + " (the vault is tampered)"
        return status + " (the vault is sealed)" if vault.sealed else status


class TreasuryCharger:
    """The treasury's gateway rules: the check before a call, the charge in the call's commit."""

    def __init__(self, hub: Hub):
        self.cmds = hub.commands

    def check(self, caller: Caller) -> None:
        if caller.route == LOOP_ROUTE:
            treasury_commands.quick_check_own_loop_call(self.cmds, caller.task)
        else:
            treasury_commands.quick_check_gateway_call(self.cmds, caller.cid, caller.task)

    def confirm(self, caller: Caller) -> None:
        if caller.route == LOOP_ROUTE:
            treasury_commands.check_own_loop_call(self.cmds, caller.task)
        else:
            treasury_commands.check_gateway_call(self.cmds, caller.cid, caller.task)

    def charge_loop(self, unit: Unit, ctx: Context, caller: Caller, input_tokens: int, output_tokens: int,
                    price: tuple[int, int] | None, ref: str) -> dict:
        return treasury_commands.own_loop_charged(unit, ctx, caller.cid, caller.task, input_tokens, output_tokens,
                                                  price, ref)

    def charge(self, unit: Unit, ctx: Context, caller: Caller, credits: int, ref: str) -> dict:
        try:
            return treasury_commands.gateway_charged(unit, ctx, caller.cid, caller.task, credits, ref)
        except Refusal:  # the payer is gone (no wallet): the call is recorded, its whole cost a shortfall
            return dict(treasury_commands.NO_CHARGE, shortfall=credits)


class Recorder:
    """Records and charges answered calls on ONE worker thread, off every caller's path.

    The worker takes every call waiting in its queue (up to ``RECORD_BATCH``)
    and records them, each ``ModelCalled`` event with its charge, in one
    commit.  One thread (not a pool) keeps the hub's GIL for the callers: the
    event loop is not made to wait behind many recording threads.  A call is
    recorded once its answer has been sent; a hub killed in between loses
    the calls still queued (and their charges).
    """

    def __init__(self, record: Any, scrubber: Scrubber = NOTHING_HELD):
        self.record = record  # record(list[CallRecord]) -> None
        self.scrubber = scrubber
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.pending = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._work, daemon=True, name="apz-record")
        self._thread.start()

    def submit(self, call: Any) -> None:
        with self._lock:
            self.pending += 1
        self.queue.put(call)

    def _work(self) -> None:
        while True:
            batch = [self.queue.get()]
            time.sleep(RECORD_GATHER_S)  # let the calls of the next moments join this commit
            while len(batch) < RECORD_BATCH:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self.record(batch)
            except Exception as e:  # noqa: BLE001 - the answers are sent; say why their records failed
                print(f"apid: {len(batch)} model calls not recorded: {self.scrubber.error_text(e)}", file=sys.stderr)
            finally:
                with self._lock:
                    self.pending -= len(batch)
                    if self.pending == 0:
                        self._idle.notify_all()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted call is recorded."""
        with self._idle:
            return self._idle.wait_for(lambda: self.pending == 0, timeout)


class GatewayRefusal(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Gateway:
    def __init__(self, hub: Hub, keys: KeySource, charger: Charger, upstream: Upstream | None = None,
                 on_recorded: Any = None):
        self.hub = hub
        self.keys = keys
        self.charger = charger
        self.upstream = upstream or Upstream()
        self.on_recorded = on_recorded or (lambda: None)
        self.scrubber = scrubber_of(hub)
        self.recorder = Recorder(self._record, self.scrubber)
        self._book: tuple[Any, PriceBook, PriceBook] | None = None
        self._snapshots: dict | None = None

    def _record(self, calls: list) -> None:
        def failed(call_id: uuid.UUID, e: Exception) -> None:
            print(f"apid: model call {call_id.hex} not recorded: {type(e).__name__}: {e}", file=sys.stderr)

        if model_commands.record_calls(self.hub.commands, calls, failed):
            self.on_recorded()

    # -- what the hub knows, from its read models (in memory) -----------------------------

    def _rows(self, projection: str):
        return self.hub.read_models.states[projection].rows

    def held(self) -> bool:
        return plaza_held(lambda plaza_id: self._rows("plaza").get("rm_plaza", plaza_id.hex))

    def policy(self) -> dict:
        row = self._rows("models").get("rm_model_policy", "policy")
        if row is None:
            raise GatewayRefusal(503, "no_policy", "the model policy is not loaded yet")
        return row["policy"]

    def provider(self, pid: str) -> ProviderConfig | None:
        row = self._rows("models").get("rm_model_providers", pid)
        return ProviderConfig.from_row(row) if row else None

    def caller(self, token: str) -> Caller:
        rows = self._rows("models")
        hit = rows.get("rm_gateway_tokens", token_sha256(token))
        link = rows.get("rm_gateway_links", hit["link"]) if hit else None
        if link is None or link["revoked"]:
            raise GatewayRefusal(401, "unknown_gateway_token", "this gateway address names no agent the hub knows")
        return Caller(link["cid"], link["role"], tier_of(link["role"]), link["task"], link["model"],
                      link.get("route") or GATEWAY_ROUTE)

    def price_book(self) -> PriceBook:
        return self._books()[1]

    def owner_book(self) -> PriceBook:
        """The owner's prices alone (the agents' own loop is charged by them), made with ``price_book``."""
        return self._books()[2]

    def _books(self) -> tuple[Any, PriceBook, PriceBook]:
        rows = self._rows("models")
        policy_row = rows.get("rm_model_policy", "policy")
        lists = {r["source"]: r for r in rows.all("rm_price_lists")}
        # The policy row itself, not its id: the book holds it, so a new policy (a new row) is never
        # mistaken for the old one whose memory it took.
        stamp = tuple(sorted((s, r["digest"]) for s, r in lists.items()))
        if self._book is None or self._book[0][0] is not policy_row or self._book[0][1] != stamp:
            if self._snapshots is None:
                self._snapshots = snapshots()
            merged = {}
            for source, (_day, prices) in self._snapshots.items():
                merged[source] = prices
            for source, r in lists.items():
                snap = self._snapshots.get(source)
                if snap is None or r["day"] >= snap[0]:
                    merged[source] = r["prices"]
            owner = policy_row["policy"]["prices"] if policy_row else {}
            self._book = ((policy_row, stamp), PriceBook(owner, merged), PriceBook(owner))
        return self._book

    # -- one call ------------------------------------------------------------------------------

    async def _key(self, provider: ProviderConfig, caller: Caller) -> str | None:
        """The provider's key.  A vault key is read on the event loop (a decryption, tens of microseconds);
        a --command key may run a command, so it is read on a worker thread."""
        if provider.key.get("kind") in VAULT_KEY_KINDS or provider.key.get("kind") == "env":
            return self.keys.key(provider, caller)
        return await anyio.to_thread.run_sync(self.keys.key, provider, caller)

    def _check_key(self, wire: str, request: Request) -> None:
        h = request.headers
        presented = h.get("x-api-key") or h.get("x-goog-api-key")
        if not presented and request.scope["query_string"]:  # Gemini's ?key= (parsed only when there is a query)
            presented = request.query_params.get("key")
        if not presented:
            auth = h.get("authorization", "")
            if auth[:7].lower() == "bearer ":
                presented = auth[7:].strip()
        if presented != PLACEHOLDER_KEY:
            raise GatewayRefusal(401, "placeholder_key", "present the placeholder key plaza; the hub holds the real keys")

    async def _body(self, request: Request) -> dict:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > MAX_GATEWAY_BODY_BYTES:
            raise GatewayRefusal(413, "body_too_large", f"a model request is at most {MAX_GATEWAY_BODY_BYTES} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_GATEWAY_BODY_BYTES:
                raise GatewayRefusal(413, "body_too_large", f"a model request is at most {MAX_GATEWAY_BODY_BYTES} bytes")
            chunks.append(chunk)
        try:
            data = orjson.loads(b"".join(chunks) or b"{}")
        except orjson.JSONDecodeError as e:
            raise GatewayRefusal(400, "bad_json", f"the body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise GatewayRefusal(400, "invalid_request", "the body must be a JSON object")
        return data

    async def call_in_process(self, wire: str, token: str, body: dict, headers: dict) -> tuple[int, bytes]:
        """One call from inside the hub (the agents' own loop, ``runtime.modelrelay``): every step of
        ``handle``, with no socket. Returns the status and the answer's bytes."""
        raw = orjson.dumps(body)
        sent = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]
        scope = {"type": "http", "method": "POST", "path": "/", "query_string": b"",
                 "headers": [*sent, (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]}

        async def receive() -> dict:
            return {"type": "http.request", "body": raw, "more_body": False}

        response = await self.handle(wire, token, Request(scope, receive))
        return response.status_code, bytes(getattr(response, "body", b""))

    async def handle(self, wire: str, token: str, request: Request, path_model: str | None = None,
                     path_stream: bool = False) -> Response:
        start = time.perf_counter()
        try:
            # The body first, even for a refusal: a request left unread costs the caller its kept-alive connection.
            body = await self._body(request)
            self._check_key(wire, request)
            caller = self.caller(token)
            if self.held():
                raise GatewayRefusal(HELD_STATUS, "plaza_held", HELD_MESSAGE)
            ask = read_ask(wire, body, path_model, path_stream)
            if ask.stream and caller.route == LOOP_ROUTE:
                raise GatewayRefusal(400, "loop_no_stream", "the agent's own loop asks for whole answers, never streams")
            policy = self.policy()
            try:
                allowed = permit(policy, caller.tier, ask.model or (caller.model or ""), ask.effort)
            except Refusal as r:
                raise GatewayRefusal(400 if r.code == "invalid_effort" else 403, r.code, r.message) from None
            provider = self.provider(allowed.provider)
            if provider is None or not provider.enabled:
                raise GatewayRefusal(403, "no_provider",
                                     f"the plaza has no provider {allowed.provider}; nothing was sent to a provider")
            if provider.endpoint(wire) is None:
                raise GatewayRefusal(400, "wire_unsupported",
                                     f"provider {provider.id} does not serve the {wire} shape; "
                                     f"call it on its {', '.join(provider.wires)} route")
            # The payer, on the accounts the store holds in memory (no thread hand-off on the way of a
            # call); a refusal is confirmed on fresh state off the event loop before it is given.
            try:
                self.charger.check(caller)
            except Refusal:
                try:
                    await anyio.to_thread.run_sync(self.charger.confirm, caller)
                except Refusal as r:
                    raise _payer_refusal(r) from None
            key = None
            if provider.key.get("kind") != "none" and not provider.is_mock:
                try:
                    key = await self._key(provider, caller)
                except Refusal as r:
                    raise GatewayRefusal(status_of(r) if status_of(r) in (HELD_STATUS, 503) else 403, r.code, r.message) from None
                if key is None:
                    raise GatewayRefusal(403, "key_missing", f"provider {provider.id} has no key: Key missing")
        except GatewayRefusal as g:
            return _error(wire, g.status, g.code, g.message)
        call_id = uuid.uuid4()
        forwarded = rewrite(wire, body, allowed.model, allowed.effort, ask.stream)
        passed = {k: v for k, v in request.headers.items() if k.lower() in PASSED_HEADERS}
        call = _Call(self, wire, caller, allowed, provider, ask.stream, call_id, start, key)
        try:
            answer = await self.upstream.call(provider, wire, forwarded, allowed.model, ask.stream, key, passed,
                                              allowed.effort, call_id.hex[:12])
        except UPSTREAM_ERRORS as e:
            await call.finish(502)
            return _error(wire, 502, "provider_unreachable", f"provider {provider.id} did not answer: {type(e).__name__}")
        if answer.chunks is None:
            call.first_byte()
            call.end = time.perf_counter()
            try:
                data = orjson.loads(answer.body or b"null")
            except orjson.JSONDecodeError:
                data = None
            call.meter.body(data)
            if call.meter.fault is not None:  # never recorded as counted: the call is an error, with no tokens
                refusal = call.bad_usage()
                if caller.route == LOOP_ROUTE:
                    await anyio.to_thread.run_sync(call.settle_loop, refusal.status)
                else:
                    await call.finish(refusal.status)
                return _error(wire, refusal.status, refusal.code, refusal.message)
            body, headers = call.scrubbed(answer.body or b""), call.scrubbed_headers(answer.headers)
            if caller.route == LOOP_ROUTE:  # charged first: a reply the escrow cannot pay is discarded
                refused = await anyio.to_thread.run_sync(call.settle_loop, answer.status)
                if refused is not None:
                    return _error(wire, PAYER_STATUS, refused.code, refused.message)
                return Response(body, status_code=answer.status, headers=headers)
            # Recorded and charged right after the answer is sent, off the caller's path.
            return Response(body, status_code=answer.status, headers=headers,
                            background=BackgroundTask(call.finish, answer.status))
        return StreamingResponse(call.relay(answer), status_code=answer.status,
                                 headers=call.scrubbed_headers(answer.headers),
                                 background=BackgroundTask(call.finish_stream))


class _Call:
    """One forwarded call: its meter, its timings, and its record."""

    def __init__(self, gw: Gateway, wire: str, caller: Caller, allowed: Permit, provider: ProviderConfig,
                 stream: bool, call_id: uuid.UUID, start: float, key: str | None = None):
        self.gw, self.wire, self.caller, self.allowed, self.provider = gw, wire, caller, allowed, provider
        self.stream, self.call_id, self.start = stream, call_id, start
        self._key = (key,)  # scrubbed from the answer too (a key from the hub's environment is not the vault's)
        self.meter = Meter(wire)
        self.ttft: float | None = None
        self.end: float | None = None
        self.stream_status = 200
        self.done = False

    def bad_usage(self) -> GatewayRefusal:
        """The refusal for an answer whose usage the plaza could not record (the meter's ``fault``)."""
        return GatewayRefusal(BAD_UPSTREAM_STATUS, "bad_upstream",
                              f"provider {self.provider.id} answered a usage the plaza cannot record "
                              f"({self.meter.fault}); the answer was not passed on and nothing was charged")

    def first_byte(self) -> None:
        if self.ttft is None:
            self.ttft = time.perf_counter()

    def scrubbed(self, body: bytes) -> bytes:
        return self.gw.scrubber.scrub_bytes(body, self._key)

    def scrubbed_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {k: self.gw.scrubber.scrub(v, self._key) for k, v in headers.items()}

    async def relay(self, answer: Answer) -> AsyncIterator[bytes]:
        self.stream_status = answer.status
        complete = False
        scrub = self.gw.scrubber.stream(self._key)
        try:
            async for chunk in answer.chunks:  # type: ignore[union-attr]
                self.first_byte()
                self.meter.feed(chunk)
                if self.meter.fault is not None:  # the rest is not passed on; the call is recorded as an error
                    self.stream_status = self.bad_usage().status
                    break
                out = scrub.feed(chunk)
                if out:
                    yield out
            complete = True
            rest = scrub.end()
            if rest:
                yield rest
        except UPSTREAM_ERRORS:
            self.stream_status = 502
            complete = True
        finally:
            self.end = time.perf_counter()
            with anyio.CancelScope(shield=True):
                if answer.close is not None:
                    await answer.close()  # type: ignore[misc]
                if not complete:  # the caller went away: record what passed, now
                    await self.finish(499)

    async def finish_stream(self) -> None:
        await self.finish(self.stream_status)

    def _fields(self, http_status: int, cost: int, source: str, reported: int | None) -> dict:
        end = self.end or time.perf_counter()
        t, caller, allowed = self.meter.tokens, self.caller, self.allowed
        return {
            "route": caller.route, "wire": self.wire, "cid": caller.cid, "role": caller.role, "tier": caller.tier,
            "task": caller.task, "provider": allowed.provider, "model": allowed.model, "effort": allowed.effort,
            "stream": self.stream, "status": "ok" if http_status < 400 else "error", "http_status": http_status,
            "input_tokens": t.input, "output_tokens": t.output, "cache_read_tokens": t.cache_read,
            "cache_write_tokens": t.cache_write, "latency_us": int((end - self.start) * 1e6),
            "ttft_us": int((self.ttft - self.start) * 1e6) if self.ttft is not None and self.stream else None,
            "reported_cost_micro": reported, "cost_micro": cost, "cost_source": source,
        }

    async def finish(self, http_status: int) -> None:
        if self.done:
            return
        self.done = True
        t = self.meter.tokens
        gw, caller, allowed = self.gw, self.caller, self.allowed
        reported = None
        if t.cost_usd is not None:
            reported = _ceil(t.cost_usd * CREDITS_PER_USD * MICRO)
            cost, source = reported, "reported"
        else:
            price = gw.price_book().lookup(allowed.provider, allowed.model)
            if price is None:
                cost, source = 0, "unpriced"
            else:
                cost, source = price.cost_micro(t.input, t.output, t.cache_read, t.cache_write), price.source
        fields = self._fields(http_status, cost, source, reported)
        ref = self.call_id.hex

        def charge(unit: Unit, ctx: Context, credits: int) -> dict:
            return gw.charger.charge(unit, ctx, caller, credits, ref)

        gw.recorder.submit((gw.hub.commands.context(caller.actor, None, ref), self.call_id, fields, charge))


    def settle_loop(self, http_status: int) -> Refusal | None:
        """A call on the agent's own loop, recorded and charged in one commit before its answer is given
        (off the event loop).  The charge: the owner's price for the model plus one credit, rounded up
        (one credit with no price of the owner's), from the task's escrow; no task, or an answer that is
        an error: nothing.  Returns the refusal when the escrow cannot cover it: the call is recorded
        unpaid and its reply must be discarded."""
        self.done = True
        gw, caller, allowed, t = self.gw, self.caller, self.allowed, self.meter.tokens
        owner = gw.owner_book()
        price = owner.lookup(allowed.provider, allowed.model) if owner.owner else None
        pair = (int(price.input), int(price.output)) if price is not None else None  # the owner's: whole credits
        credits = own_loop_charge(t.input, t.output, pair) if http_status < 400 else 0
        fields = self._fields(http_status, credits * MICRO_PER_CREDIT, "owner" if pair else "flat", None)
        ref = self.call_id.hex
        ctx = gw.hub.commands.context(caller.actor, None, ref)

        def charge(unit: Unit, ctx: Context, _credits: int) -> dict:
            return gw.charger.charge_loop(unit, ctx, caller, t.input, t.output, pair, ref)

        refused = None
        try:
            model_commands.record_call(gw.hub.commands, ctx, self.call_id, fields, charge)
        except Refusal as r:
            if r.code != "budget_exhausted":
                raise
            refused = r
            model_commands.record_call(gw.hub.commands, ctx, self.call_id, dict(fields, status="error"), None)
        gw.on_recorded()
        return refused


def _ceil(x: Fraction) -> int:
    return -(-x.numerator // x.denominator)


def _payer_refusal(r: Refusal) -> GatewayRefusal:
    """The treasury's refusal before a call: 423 while the plaza is held, else 402 (payment required)."""
    if r.code == "plaza_held":
        return GatewayRefusal(HELD_STATUS, r.code, r.message)
    return GatewayRefusal(PAYER_STATUS, r.code, r.message)


def _error(wire: str, status: int, code: str, message: str) -> Response:
    return Response(orjson.dumps(error_body(wire, status, code, message)), status_code=status,
                    media_type="application/json")


__all__ = ["Gateway", "Caller", "KeySource", "Charger", "HubKeys", "VaultKeys", "TreasuryCharger",
           "PLACEHOLDER_KEY",
           "GATEWAY_TOKEN_PREFIX", "token_sha256", "GEMINI", "OPENAI"]
