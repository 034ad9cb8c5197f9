"""/v1/decide: the owner asks the plaza's decision model a yes-or-no question, a choice, or a score.

The call takes the gateway's path, step for step: STOP ALL holds it (``plaza_held``); the model
is one of the policy's ``decision_models`` (the first whose provider the plaza has, enabled and
with a key, unless the request names one of them); a contributor model is refused while
``allow_training_models`` is off; the policy's default effort applies; the key comes from the
vault (a sealed vault refuses); the call is metered and recorded as one ``Usage.ModelCalled``
(cid ``owner``, role ``decide``: the owner's own question, charged to no wallet); the reply
comes back scrubbed of every vault value. The rules of the question and of reading the reply
are the domain's (``domain/decide.py``).
"""

from __future__ import annotations

import time
import uuid

import anyio
import orjson
from starlette.requests import Request
from starlette.routing import Route

from ...adapters.providers.ask import answer_text, ask_body, error_text
from ...adapters.providers.client import UPSTREAM_ERRORS
from ...adapters.providers.presets import ProviderConfig
from ...adapters.providers.wire import Meter, rewrite
from ...commands import models as model_commands
from ...domain import decide as rules
from ...domain.models import is_contributor, parse_entry
from ...domain.plaza import HELD_MESSAGE
from ..errors import ApiError, Body, read_body
from ..kit import Api, api_of, endpoint
from .gateway import gateway_of

#: How the owner's question shows in the usage records.
DECIDE_CID, DECIDE_ROLE, DECIDE_TIER = "owner", "decide", "decision"


class DecideBody(Body):
    question: str
    kind: str = rules.YES_NO
    options: list[str] | None = None
    scale: list[int] | None = None  # [lowest, highest] for a score
    model: str | None = None  # one of the policy's decision models


def _candidates(policy: dict, wanted: str | None) -> list[str]:
    listed = list(policy["decision_models"])
    if wanted is None:
        return listed
    w = wanted.strip()
    hit = [m for m in listed if m == w] or [m for m in listed if parse_entry(m, pins=False).model == w]
    if not hit:
        raise ApiError("model_not_allowed", f"{w} is not one of the plaza's decision models "
                       f"({', '.join(listed)}); see agentplaza models decision")
    return hit[:1]


async def _pick(api: Api, policy: dict, wanted: str | None) -> tuple[str, ProviderConfig, str | None]:
    """The decision model to ask, its provider and its key; ``no_decision_model`` says why none can answer."""
    gw = gateway_of(api)
    why = []
    for name in _candidates(policy, wanted):
        entry = parse_entry(name, pins=False)
        if not policy["allow_training_models"] and is_contributor(entry.name):
            why.append(f"{entry.name} is a contributor model and allow_training_models is off")
            continue
        provider = gw.provider(entry.provider)
        if provider is None or not provider.enabled:
            why.append(f"the plaza has no enabled provider {entry.provider}")
            continue
        key = None
        if provider.key.get("kind") != "none" and not provider.is_mock:
            key = await anyio.to_thread.run_sync(gw.keys.key, provider, None)  # a sealed vault refuses here
            if key is None:
                why.append(f"provider {provider.id} has no key")
                continue
        return entry.model, provider, key
    raise ApiError("no_decision_model", "no decision model can answer: " + "; ".join(why)
                   + "; set one with agentplaza models policy (decision_models) or add its provider")


def _record(api: Api, ctx, call_id: uuid.UUID, provider: ProviderConfig, model: str, effort: str | None,
            http_status: int, meter: Meter, latency_us: int):
    gw = gateway_of(api)
    t = meter.tokens
    price = gw.price_book().lookup(provider.id, model)
    if price is None:
        cost, source = 0, "unpriced"
    else:
        cost, source = price.cost_micro(t.input, t.output, t.cache_read, t.cache_write), price.source
    fields = {
        "route": "gateway", "wire": provider.wire, "cid": DECIDE_CID, "role": DECIDE_ROLE, "tier": DECIDE_TIER,
        "task": None, "provider": provider.id, "model": model, "effort": effort, "stream": False,
        "status": "ok" if http_status < 400 else "error", "http_status": http_status,
        "input_tokens": t.input, "output_tokens": t.output, "cache_read_tokens": t.cache_read,
        "cache_write_tokens": t.cache_write, "latency_us": latency_us, "ttft_us": None,
        "reported_cost_micro": None, "cost_micro": cost, "cost_source": source,
    }
    return model_commands.record_call(api.hub.commands, ctx, call_id, fields)


@endpoint
async def decide(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, DecideBody)
    if body.scale is not None and len(body.scale) != 2:
        raise ApiError("invalid_options", "a score's scale is [lowest, highest]")
    q = rules.question(body.question, body.kind, body.options, tuple(body.scale) if body.scale else None)
    gw = gateway_of(api)
    if gw.held():
        raise ApiError("plaza_held", HELD_MESSAGE + "; the decision model is held too")
    policy = gw.policy()
    model, provider, key = await _pick(api, policy, body.model)
    effort = policy["effort"]
    wire = provider.wire
    sent = rewrite(wire, ask_body(wire, model, rules.SYSTEM_PROMPT, rules.prompt(q), rules.MAX_ANSWER_TOKENS),
                   model, effort, False)
    call_id = uuid.uuid4()
    ctx = api.context(request, "decide")
    meter = Meter(wire)
    start = time.perf_counter()
    try:
        answer = await gw.upstream.call(provider, wire, sent, model, False, key, None, effort, call_id.hex[:12])
    except UPSTREAM_ERRORS as e:
        await api.command(lambda: _record(api, ctx, call_id, provider, model, effort, 502, meter,
                                          int((time.perf_counter() - start) * 1e6)))
        raise ApiError("decision_failed", f"provider {provider.id} did not answer: {type(e).__name__}") from None
    latency_us = int((time.perf_counter() - start) * 1e6)
    try:
        data = orjson.loads(answer.body or b"null")
    except orjson.JSONDecodeError:
        data = None
    meter.body(data)
    status = answer.status
    if meter.fault is not None:  # a usage the plaza cannot record: the call is recorded as an error, with no tokens
        meter, status = Meter(wire), 502
    await api.command(lambda: _record(api, ctx, call_id, provider, model, effort, status, meter, latency_us))
    scrub = gw.scrubber
    if status >= 400:
        said = scrub.scrub(error_text(data) or f"HTTP {answer.status}", (key,))
        raise ApiError("decision_failed", f"the decision model {provider.id}/{model} failed: {said}")
    reply = scrub.scrub(answer_text(wire, data), (key,))
    p = rules.probabilities(q, reply)
    return {
        "question": q.text, "kind": q.kind, "model": f"{provider.id}/{model}", "effort": effort,
        "answers": [{"answer": a, "probability": round(v, 6)} for a, v in p.items()],
        "best": rules.best(p),
        "usage": {"input_tokens": meter.tokens.input, "output_tokens": meter.tokens.output},
    }


ROUTES = [
    Route("/v1/decide", decide, methods=["POST"]),
]
