"""/v1/vault: status, unseal, seal, secrets (set, rotate, rollback, rebind, delete),
import, audit, recovery code, slots, rekey and the per-node consumer matrix.

No route ever answers with a value: values only go in (set, rotate, import),
and come out only through ``hub.vault.reveal`` inside the hub.
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ...domain.base import Refusal
from ...projections import vault as rm
from ...vault.service import VaultService
from ...wire import AUDIT_MAX_LIMIT
from ..errors import Body, read_body
from ..kit import Api, api_of, endpoint


class UnsealBody(Body):
    method: Literal["passphrase", "recovery", "keyfile"] = "passphrase"
    passphrase: str | None = None
    code: str | None = None


class ReasonBody(Body):
    reason: str | None = None


class SetBody(Body):
    name: str
    value: str
    kind: str | None = None
    label: str | None = None
    scope: str | None = None
    nodes: list[str] | None = None
    bindings: list[str] = []


class ValueBody(Body):
    value: str


class RollbackBody(Body):
    v: int


class PatchBody(Body):
    label: str | None = None
    scope: str | None = None
    nodes: list[str] | None = None
    bindings: list[str] | None = None


class ImportBody(Body):
    text: str
    nodes: list[str] | None = None
    bindings: dict[str, list[str]] = {}


class RekeyBody(Body):
    passphrase: str | None = None
    recovery: str | None = None


class SlotBody(Body):
    kind: Literal["passphrase", "keyfile"]
    passphrase: str | None = None


def vault_of(api: Api) -> VaultService:
    if api.hub.vault is None:
        raise Refusal("vault_absent", "this hub has no vault")
    return api.hub.vault


async def act(api: Api, fn, *args: Any) -> Any:
    """Run a vault operation off the event loop, then let the read models catch up with it."""
    result = await api.query(fn, *args)
    await api.follower.settle(api.hub.store.max_position())
    return result


@endpoint
async def status(request: Request) -> dict:
    api = api_of(request)
    return await api.query(vault_of(api).status)


@endpoint
async def unseal(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, UnsealBody)
    secret = body.code if body.method == "recovery" else body.passphrase
    return await act(api, lambda: vault_of(api).unseal(body.method, secret, actor="owner"))


@endpoint
async def seal(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, ReasonBody)
    return await act(api, lambda: vault_of(api).seal(actor="owner", reason=body.reason))


@endpoint
async def list_secrets(request: Request) -> dict:
    api = api_of(request)
    return {"secrets": await api.query(rm.entry_rows, api.hub.read_models)}


@endpoint
async def add_secret(request: Request) -> JSONResponse:
    api = api_of(request)
    body = await read_body(request, SetBody)
    ctx = api.context(request)
    e = await act(api, lambda: vault_of(api).set(ctx, body.name, body.value, kind=body.kind, label=body.label,
                                                 scope=body.scope, nodes=body.nodes, bindings=body.bindings))
    return JSONResponse(await api.query(rm.entry_row, api.hub.read_models, e.id), status_code=201)


@endpoint
async def get_secret(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.entry_row, api.hub.read_models, request.path_params["id"])


@endpoint
async def patch_secret(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, PatchBody)
    ctx = api.context(request)
    sid = request.path_params["id"]
    await act(api, lambda: vault_of(api).rebind(ctx, sid, label=body.label, scope=body.scope, nodes=body.nodes,
                                                bindings=body.bindings))
    return await api.query(rm.entry_row, api.hub.read_models, sid)


@endpoint
async def rotate(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, ValueBody)
    ctx = api.context(request)
    sid = request.path_params["id"]
    await act(api, lambda: vault_of(api).rotate(ctx, sid, body.value))
    return await api.query(rm.entry_row, api.hub.read_models, sid)


@endpoint
async def rollback(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, RollbackBody)
    ctx = api.context(request)
    sid = request.path_params["id"]
    await act(api, lambda: vault_of(api).rollback(ctx, sid, body.v))
    return await api.query(rm.entry_row, api.hub.read_models, sid)


@endpoint
async def delete_secret(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request)
    sid = request.path_params["id"]
    destroyed = await act(api, lambda: vault_of(api).remove(ctx, sid))
    return {"deleted": sid, "destroyed_versions": destroyed}


@endpoint
async def import_env(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, ImportBody)
    ctx = api.context(request, "import of a .env file")
    return await act(api, lambda: vault_of(api).import_env(ctx, body.text, nodes=body.nodes, bindings=body.bindings))


@endpoint
async def audit(request: Request) -> dict:
    api = api_of(request)
    after = api.int_param(request, "after", 0, 0)
    limit = api.int_param(request, "limit", 100, 1, AUDIT_MAX_LIMIT)
    return {"lines": await act(api, lambda: vault_of(api).audit_lines(after, limit))}


@endpoint
async def audit_verify(request: Request) -> dict:
    api = api_of(request)
    return await act(api, vault_of(api).audit_verify)


@endpoint
async def recovery(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request)
    made = await act(api, lambda: vault_of(api).new_recovery_code(ctx))
    return dict(made, note="shown once: write it down; a new code replaces this one")


@endpoint
async def add_slot(request: Request) -> JSONResponse:
    api = api_of(request)
    body = await read_body(request, SlotBody)
    ctx = api.context(request)
    if body.kind == "passphrase":
        made = await act(api, lambda: vault_of(api).add_passphrase(ctx, body.passphrase or ""))
    else:
        made = await act(api, lambda: vault_of(api).add_keyfile(ctx))
    return JSONResponse(made, status_code=201)


@endpoint
async def remove_slot(request: Request) -> dict:
    api = api_of(request)
    ctx = api.context(request)
    sid = request.path_params["id"]
    return await act(api, lambda: vault_of(api).remove_slot(ctx, sid))


@endpoint
async def rekey(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, RekeyBody)
    ctx = api.context(request)
    return await act(api, lambda: vault_of(api).rekey(ctx, passphrase=body.passphrase, recovery=body.recovery))


@endpoint
async def consumers(request: Request) -> dict:
    api = api_of(request)
    return await api.query(vault_of(api).consumers)


ROUTES = [
    Route("/v1/vault", status),
    Route("/v1/vault/unseal", unseal, methods=["POST"]),
    Route("/v1/vault/seal", seal, methods=["POST"]),
    Route("/v1/vault/secrets", list_secrets),
    Route("/v1/vault/secrets", add_secret, methods=["POST"]),
    Route("/v1/vault/secrets/{id}", get_secret),
    Route("/v1/vault/secrets/{id}", patch_secret, methods=["PATCH"]),
    Route("/v1/vault/secrets/{id}", delete_secret, methods=["DELETE"]),
    Route("/v1/vault/secrets/{id}/value", rotate, methods=["PUT"]),
    Route("/v1/vault/secrets/{id}/rollback", rollback, methods=["POST"]),
    Route("/v1/vault/import", import_env, methods=["POST"]),
    Route("/v1/vault/audit", audit),
    Route("/v1/vault/audit/verify", audit_verify),
    Route("/v1/vault/recovery", recovery, methods=["POST"]),
    Route("/v1/vault/slots", add_slot, methods=["POST"]),
    Route("/v1/vault/slots/{id}", remove_slot, methods=["DELETE"]),
    Route("/v1/vault/rekey", rekey, methods=["POST"]),
    Route("/v1/vault/consumers", consumers),
]
