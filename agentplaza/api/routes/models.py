"""/v1/models: presets, providers and their keys, the policy, prices, decision models, gateway tokens."""

from __future__ import annotations

import secrets
from typing import Any

import anyio
from starlette.requests import Request
from starlette.routing import Route

from ...adapters.providers import prices as price_lists
from ...adapters.providers.client import test_call
from ...adapters.providers.presets import (
    PRESETS,
    STARTING_PROVIDERS,
    ProviderConfig,
    config_from_preset,
)
from ...commands import models as model_commands
from ...domain.models import (
    EFFORTS,
    check_effort,
    is_contributor,
    key_binding,
    parse_entry,
    resolve,
    tier_of,
    vault_key_name,
)
from ...projections import models as rm
from ...runtime.prices import fetch_prices
from ...vault import provider_keys
from ...vault.scrub import redact_urls
from ...vault.service import VaultService
from ..auth import presented_token
from ..errors import ApiError, Body, read_body
from ..gateway import (
    GATEWAY_TOKEN_BYTES,
    GATEWAY_TOKEN_PREFIX,
    VAULT_KEY_KINDS,
    scrubber_of,
    token_sha256,
    vault_name,
)
from ..kit import Api, api_of, endpoint
from .gateway import base_urls, gateway_of


class KeyBody(Body):
    kind: str
    name: str | None = None
    command: str | None = None


class AddBody(Body):
    id: str
    preset: str | None = None
    base_url: str | None = None
    models: list[str] | None = None
    key: KeyBody | None = None


class EditBody(Body):
    base_url: str | None = None
    models: list[str] | None = None
    key: KeyBody | None = None
    enabled: bool | None = None


class KeyValueBody(Body):
    value: str


class TestBody(Body):
    model: str | None = None


class PolicyBody(Body):
    orchestrator: list[str] | None = None
    worker: list[str] | None = None
    effort: str | None = None
    clear_effort: bool = False
    default_model: str | None = None
    orchestrator_model: str | None = None
    role_models: dict[str, str] | None = None  # an empty model clears that role's model
    allow_training_models: bool | None = None
    prices: dict[str, list[int] | None] | None = None  # None removes a price of your own
    idle_sleep_min: int | None = None
    sleep_never_roles: list[str] | None = None
    decision_models: list[str] | None = None
    fetch_blocklist: list[str] | None = None  # the whole list; [] clears it
    vm_auto_checkpoints: bool | None = None


class TokenBody(Body):
    cid: str
    role: str
    model: str | None = None
    task: str | None = None


#: A key of kind command makes the hub run a program as its own user: that is a person's choice, so only a
#: request that presents the owner token itself may set one (never loopback trust or a cookie alone).
RUNS_A_PROGRAM = ("a key of kind command runs a program on the hub's machine; present the owner token as a bearer "
                  "token to set one (agentplaza models ... --command does)")


def _check_runs_program(request: Request, k: KeyBody | None) -> None:
    if k is not None and k.kind == "command" and not presented_token(request.scope):
        raise ApiError("owner_token_required", RUNS_A_PROGRAM)


def _key(k: KeyBody | None) -> dict | None:
    if k is None:
        return None
    out: dict[str, Any] = {"kind": k.kind}
    if k.name is not None:
        out["name"] = k.name
    if k.command is not None:
        out["command"] = k.command
    return out


def provider_view(api: Api, row: dict) -> dict:
    cfg = ProviderConfig.from_row(row)
    return {
        "id": row["id"], "preset": row["preset"], "endpoint": cfg.wires[cfg.wire], "wires": row["wires"],
        "auth": row["auth"], "models": row["models"], "key": row["key"],
        "key_status": gateway_of(api).keys.status(cfg), "enabled": row["enabled"],
        "added_at": row["added_at"], "changed_at": row["changed_at"],
    }


def policy_changes(body: PolicyBody, current: dict) -> dict:
    changes: dict[str, Any] = {}
    for f in ("orchestrator", "worker", "default_model", "orchestrator_model", "allow_training_models",
              "idle_sleep_min", "sleep_never_roles", "decision_models", "fetch_blocklist",
              "vm_auto_checkpoints"):
        v = getattr(body, f)
        if v is not None:
            changes[f] = v
    if body.clear_effort:
        changes["effort"] = None
    elif body.effort is not None:
        changes["effort"] = check_effort(body.effort)
    if body.role_models is not None:
        roles = dict(current["role_models"])
        for role, model in body.role_models.items():
            if model:
                roles[role] = model
            else:
                roles.pop(role, None)
        changes["role_models"] = roles
    if body.prices is not None:
        prices = dict(current["prices"])
        for model, price in body.prices.items():
            if price is None:
                prices.pop(model, None)
            else:
                prices[model] = price
        changes["prices"] = prices
    return changes


def _policy(api: Api) -> dict:
    return gateway_of(api).policy()


def _provider_row(api: Api, pid: str) -> dict:
    row = rm.provider(api.hub.read_models, pid)
    if row is None:
        raise ApiError("no_provider", f"no provider {pid}; see agentplaza models providers")
    return row


def _vault(api: Api) -> VaultService:
    if api.hub.vault is None:
        raise ApiError("vault_absent", "this hub has no vault")
    return api.hub.vault


def bind_secret(api: Api, ctx, pid: str, key: dict | None) -> None:
    """--secret NAME: bind the existing vault entry NAME (each of its entries) to provider:<id>."""
    if key is None or key.get("kind") != "secret":
        return
    provider_keys.bind_secret(_vault(api), ctx, key.get("name") or "", key_binding(pid))


def put_key(api: Api, ctx, cfg: ProviderConfig, value: str) -> None:
    """The key into the vault: a new entry bound to provider:<id>, or a new version of the bound one."""
    name = vault_name(cfg) if cfg.key.get("kind") in VAULT_KEY_KINDS else vault_key_name(cfg.id)
    provider_keys.put_key(_vault(api), ctx, name, key_binding(cfg.id), value, cfg.id)


@endpoint
async def presets(request: Request) -> dict:
    return {"presets": [dict(p.public(), starts=p.id in STARTING_PROVIDERS) for p in PRESETS.values()]}


@endpoint
async def providers(request: Request) -> dict:
    api = api_of(request)
    return {"providers": [provider_view(api, r) for r in rm.providers(api.hub.read_models)]}


@endpoint
async def add(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, AddBody)
    _check_runs_program(request, body.key)
    cfg = config_from_preset(body.preset or body.id, id=body.id, base_url=body.base_url, key=_key(body.key),
                             models=body.models)
    ctx = api.context(request, f"add provider {body.id}")
    if rm.provider(api.hub.read_models, body.id) is not None:
        raise ApiError("provider_exists", f"provider {body.id} is already added; use models edit")
    await api.query(bind_secret, api, ctx, body.id, cfg["key"])
    await api.command(lambda: model_commands.add_provider(api.hub.commands, ctx, cfg))
    return provider_view(api, _provider_row(api, body.id))


@endpoint
async def edit(request: Request) -> dict:
    api = api_of(request)
    pid = request.path_params["pid"]
    body = await read_body(request, EditBody)
    _check_runs_program(request, body.key)
    old = _provider_row(api, pid)
    changes: dict[str, Any] = {}
    if body.base_url is not None:
        changes["wires"] = config_from_preset(old["preset"], base_url=body.base_url)["wires"]
    if body.models is not None:
        changes["models"] = body.models
    if body.key is not None:
        changes["key"] = _key(body.key)
    if body.enabled is not None:
        changes["enabled"] = body.enabled
    ctx = api.context(request, f"edit provider {pid}")
    await api.query(bind_secret, api, ctx, pid, changes.get("key"))
    await api.command(lambda: model_commands.edit_provider(api.hub.commands, ctx, pid, changes))
    return provider_view(api, _provider_row(api, pid))


@endpoint
async def remove(request: Request) -> dict:
    api = api_of(request)
    pid = request.path_params["pid"]
    ctx = api.context(request, f"remove provider {pid}")
    await api.command(lambda: model_commands.remove_provider(api.hub.commands, ctx, pid))
    return {"removed": pid}


@endpoint
async def store_key(request: Request) -> dict:
    api = api_of(request)
    pid = request.path_params["pid"]
    body = await read_body(request, KeyValueBody)
    cfg = ProviderConfig.from_row(_provider_row(api, pid))
    if cfg.is_mock or cfg.key.get("kind") == "none":
        raise ApiError("no_key_needed", f"provider {pid} needs no key")
    ctx = api.context(request, f"the key of provider {pid}")
    await api.query(put_key, api, ctx, cfg, body.value)
    if cfg.key.get("kind") not in VAULT_KEY_KINDS:  # from now on its key is the one in the vault
        await api.command(lambda: model_commands.edit_provider(api.hub.commands, ctx, pid, {"key": {"kind": "vault"}}))
    await api.follower.settle(api.hub.store.max_position())
    return provider_view(api, _provider_row(api, pid))


@endpoint
async def test(request: Request) -> dict:
    api = api_of(request)
    gw = gateway_of(api)
    pid = request.path_params["pid"]
    body = await read_body(request, TestBody)
    cfg = ProviderConfig.from_row(_provider_row(api, pid))
    model = body.model or (cfg.models[0] if cfg.models else None)
    if not model:
        raise ApiError("invalid_request", f"provider {pid} lists no model; name one with --model")
    key = None
    if cfg.key.get("kind") != "none" and not cfg.is_mock:
        key = await anyio.to_thread.run_sync(gw.keys.key, cfg, None)
        if key is None:
            return {"provider": pid, "model": model, "ok": False, "status": None, "latency_ms": None,
                    "message": "Key missing"}
    # What the provider said goes back without any vault value or the key just used (it may quote it).
    result = await test_call(gw.upstream, cfg, model, key)
    result["message"] = redact_urls(str(result.get("message") or ""))
    return scrubber_of(api.hub).scrub_json(result, (key,))


@endpoint
async def list_models(request: Request) -> dict:
    api = api_of(request)
    pol = _policy(api)
    book = gateway_of(api).price_book()
    tiers = {t: {parse_entry(e).name: str(parse_entry(e)) for e in pol[t]} for t in ("orchestrator", "worker")}
    out = []
    for r in rm.providers(api.hub.read_models):
        for m in r["models"]:
            name = f"{r['id']}/{m}"
            price = book.lookup(r["id"], m)
            out.append({
                "model": name, "provider": r["id"], "contributor": is_contributor(name),
                "orchestrator": tiers["orchestrator"].get(name), "worker": tiers["worker"].get(name),
                "price": price.public() if price else "unpriced",
            })
    return {"models": out}


def _policy_view(api: Api) -> dict:
    row = rm.policy_row(api.hub.read_models)
    return {"policy": row["policy"], "changed_at": row["changed_at"], "by": row["by"], "efforts": list(EFFORTS)}


@endpoint
async def get_policy(request: Request) -> dict:
    return _policy_view(api_of(request))


@endpoint
async def set_policy(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, PolicyBody)
    changes = policy_changes(body, _policy(api))
    ctx = api.context(request, "model policy")
    await api.command(lambda: model_commands.set_policy(api.hub.commands, ctx, changes))
    return _policy_view(api)


@endpoint
async def resolve_model(request: Request) -> dict:
    api = api_of(request)
    role = request.query_params.get("role") or None
    own = request.query_params.get("model") or None
    r = resolve(_policy(api), role, own)
    return {"model": r.model, "source": r.source, "tier": r.tier}


@endpoint
async def decision(request: Request) -> dict:
    api = api_of(request)
    gw = gateway_of(api)
    return {"decision_models": [{"model": m, "held": gw.held()} for m in _policy(api)["decision_models"]]}


@endpoint
async def get_prices(request: Request) -> dict:
    api = api_of(request)
    gw = gateway_of(api)
    book = gw.price_book()
    model = request.query_params.get("model")
    lists = {source: {"day": r["day"], "count": r["count"], "kept_at": r["at"]}
             for source, r in rm.price_lists(api.hub.read_models).items()}
    shipped = {s: {"day": d, "count": len(p)} for s, (d, p) in (gw._snapshots or price_lists.snapshots()).items()}
    out: dict[str, Any] = {"lists": lists, "snapshots": shipped, "unit": "credits per million tokens"}
    if model:
        provider, _, name = model.partition("/")
        if not name:
            raise ApiError("invalid_request", "name the model as provider/model")
        price = book.lookup(provider, name)
        out["price"] = price.public() if price else "unpriced"
    return out


@endpoint
async def refresh_prices(request: Request) -> dict:
    return {"sources": await anyio.to_thread.run_sync(fetch_prices, api_of(request).hub)}


@endpoint
async def tokens(request: Request) -> dict:
    return {"tokens": rm.gateway_links(api_of(request).hub.read_models)}


@endpoint
async def issue(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, TokenBody)
    token = GATEWAY_TOKEN_PREFIX + secrets.token_urlsafe(GATEWAY_TOKEN_BYTES)
    ctx = api.context(request, f"gateway token for agent {body.cid}")
    await api.command(lambda: model_commands.issue_link(api.hub.commands, ctx, body.cid, body.role,
                                                        token_sha256(token), body.model, body.task))
    hub_url = api.hub.address or f"{request.url.scheme}://{request.url.netloc}"
    return {"cid": body.cid, "role": body.role, "tier": tier_of(body.role), "token": token,
            "base_urls": base_urls(hub_url, token), "api_key": "plaza"}


@endpoint
async def revoke(request: Request) -> dict:
    api = api_of(request)
    cid = request.path_params["cid"]
    ctx = api.context(request, f"revoke the gateway token of agent {cid}")
    await api.command(lambda: model_commands.revoke_link(api.hub.commands, ctx, cid))
    return {"revoked": cid}


ROUTES = [
    Route("/v1/models", list_models),
    Route("/v1/models/presets", presets),
    Route("/v1/models/providers", providers),
    Route("/v1/models/providers", add, methods=["POST"]),
    Route("/v1/models/providers/{pid}", edit, methods=["PATCH"]),
    Route("/v1/models/providers/{pid}", remove, methods=["DELETE"]),
    Route("/v1/models/providers/{pid}/key", store_key, methods=["PUT"]),
    Route("/v1/models/providers/{pid}/test", test, methods=["POST"]),
    Route("/v1/models/policy", get_policy),
    Route("/v1/models/policy", set_policy, methods=["PATCH"]),
    Route("/v1/models/resolve", resolve_model),
    Route("/v1/models/decision", decision),
    Route("/v1/models/prices", get_prices),
    Route("/v1/models/prices/refresh", refresh_prices, methods=["POST"]),
    Route("/v1/models/gateway-tokens", tokens),
    Route("/v1/models/gateway-tokens", issue, methods=["POST"]),
    Route("/v1/models/gateway-tokens/{cid}", revoke, methods=["DELETE"]),
]
