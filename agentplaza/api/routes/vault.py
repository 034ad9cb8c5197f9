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
from ...projections.vault import vault_entries
from ...wire import AUDIT_MAX_LIMIT
from ..errors import Body, read_body
from ..hub import Hub
from ..kit import Api


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


def entry_rows(hub: Hub) -> list[dict]:
    return hub.read_models.rows(vault_entries, order_by=vault_entries.c.name)


def vault_overview(hub: Hub) -> dict:
    """The overview's vault line: state and entry count."""
    if hub.vault is None:
        return {"state": "absent", "entries": 0}
    s = hub.vault.status()
    return {"state": s["state"], "entries": s["entries"], "slots": len(s["slots"])}


def routes(api: Api) -> list:
    hub = api.hub

    def vault():
        if hub.vault is None:
            raise Refusal("vault_absent", "this hub has no vault")
        return hub.vault

    async def act(fn, *args: Any) -> Any:
        """Run a vault operation off the event loop, then let the read models catch up with it."""
        result = await api.query(fn, *args)
        await api.follower.settle(hub.store.max_position())
        return result

    def one(secret_id: str) -> dict:
        rows = hub.read_models.rows(vault_entries, vault_entries.c.id == secret_id)
        if not rows:
            raise Refusal("unknown_secret", f"no vault entry {secret_id}")
        return rows[0]

    async def status(request: Request) -> dict:
        return await api.query(vault().status)

    async def unseal(request: Request) -> dict:
        body = await read_body(request, UnsealBody)
        secret = body.code if body.method == "recovery" else body.passphrase
        return await act(lambda: vault().unseal(body.method, secret, actor="owner"))

    async def seal(request: Request) -> dict:
        body = await read_body(request, ReasonBody)
        return await act(lambda: vault().seal(actor="owner", reason=body.reason))

    async def list_secrets(request: Request) -> dict:
        return {"secrets": await api.query(entry_rows, hub)}

    async def add_secret(request: Request) -> JSONResponse:
        body = await read_body(request, SetBody)
        ctx = api.context(request)
        e = await act(lambda: vault().set(ctx, body.name, body.value, kind=body.kind, label=body.label,
                                          scope=body.scope, nodes=body.nodes, bindings=body.bindings))
        return JSONResponse(await api.query(one, e.id), status_code=201)

    async def get_secret(request: Request) -> dict:
        return await api.query(one, request.path_params["id"])

    async def patch_secret(request: Request) -> dict:
        body = await read_body(request, PatchBody)
        ctx = api.context(request)
        sid = request.path_params["id"]
        await act(lambda: vault().rebind(ctx, sid, label=body.label, scope=body.scope, nodes=body.nodes, bindings=body.bindings))
        return await api.query(one, sid)

    async def rotate(request: Request) -> dict:
        body = await read_body(request, ValueBody)
        ctx = api.context(request)
        sid = request.path_params["id"]
        await act(lambda: vault().rotate(ctx, sid, body.value))
        return await api.query(one, sid)

    async def rollback(request: Request) -> dict:
        body = await read_body(request, RollbackBody)
        ctx = api.context(request)
        sid = request.path_params["id"]
        await act(lambda: vault().rollback(ctx, sid, body.v))
        return await api.query(one, sid)

    async def delete_secret(request: Request) -> dict:
        ctx = api.context(request)
        sid = request.path_params["id"]
        destroyed = await act(lambda: vault().remove(ctx, sid))
        return {"deleted": sid, "destroyed_versions": destroyed}

    async def import_env(request: Request) -> dict:
        body = await read_body(request, ImportBody)
        ctx = api.context(request, "import of a .env file")
        return await act(lambda: vault().import_env(ctx, body.text, nodes=body.nodes, bindings=body.bindings))

    async def audit(request: Request) -> dict:
        after = api.int_param(request, "after", 0, 0)
        limit = api.int_param(request, "limit", 100, 1, AUDIT_MAX_LIMIT)
        return {"lines": await act(lambda: vault().audit_lines(after, limit))}

    async def audit_verify(request: Request) -> dict:
        return await act(vault().audit_verify)

    async def recovery(request: Request) -> dict:
        ctx = api.context(request)
        made = await act(lambda: vault().new_recovery_code(ctx))
        return dict(made, note="shown once: write it down; a new code replaces this one")

    async def add_slot(request: Request) -> JSONResponse:
        body = await read_body(request, SlotBody)
        ctx = api.context(request)
        if body.kind == "passphrase":
            made = await act(lambda: vault().add_passphrase(ctx, body.passphrase or ""))
        else:
            made = await act(lambda: vault().add_keyfile(ctx))
        return JSONResponse(made, status_code=201)

    async def remove_slot(request: Request) -> dict:
        ctx = api.context(request)
        sid = request.path_params["id"]
        return await act(lambda: vault().remove_slot(ctx, sid))

    async def rekey(request: Request) -> dict:
        body = await read_body(request, RekeyBody)
        ctx = api.context(request)
        return await act(lambda: vault().rekey(ctx, passphrase=body.passphrase, recovery=body.recovery))

    async def consumers(request: Request) -> dict:
        return await api.query(vault().consumers)

    return [
        Route("/v1/vault", api.endpoint(status)),
        Route("/v1/vault/unseal", api.endpoint(unseal), methods=["POST"]),
        Route("/v1/vault/seal", api.endpoint(seal), methods=["POST"]),
        Route("/v1/vault/secrets", api.endpoint(list_secrets)),
        Route("/v1/vault/secrets", api.endpoint(add_secret), methods=["POST"]),
        Route("/v1/vault/secrets/{id}", api.endpoint(get_secret)),
        Route("/v1/vault/secrets/{id}", api.endpoint(patch_secret), methods=["PATCH"]),
        Route("/v1/vault/secrets/{id}", api.endpoint(delete_secret), methods=["DELETE"]),
        Route("/v1/vault/secrets/{id}/value", api.endpoint(rotate), methods=["PUT"]),
        Route("/v1/vault/secrets/{id}/rollback", api.endpoint(rollback), methods=["POST"]),
        Route("/v1/vault/import", api.endpoint(import_env), methods=["POST"]),
        Route("/v1/vault/audit", api.endpoint(audit)),
        Route("/v1/vault/audit/verify", api.endpoint(audit_verify)),
        Route("/v1/vault/recovery", api.endpoint(recovery), methods=["POST"]),
        Route("/v1/vault/slots", api.endpoint(add_slot), methods=["POST"]),
        Route("/v1/vault/slots/{id}", api.endpoint(remove_slot), methods=["DELETE"]),
        Route("/v1/vault/rekey", api.endpoint(rekey), methods=["POST"]),
        Route("/v1/vault/consumers", api.endpoint(consumers)),
    ]
