"""/e2b: the E2B API for the E2B SDKs (E2B's open definitions, Apache-2.0), and /v1/e2b: the owner's side.

Under ``/e2b`` a caller signs in with an ``e2b_`` key (``X-API-Key`` or ``Authorization: Bearer``); the
owner's token alone does not open it (``app.OPEN_PREFIXES`` lets these requests past the owner's wall
and every handler here checks the key). Answers and refusals are E2B's shapes (an error is
``{"code": <status>, "message": ...}``). A field the hub does not serve is refused, not ignored.

Under ``/v1/e2b`` (the owner's wall) are the keys, the sandboxes with pause, resume and end, for the CLI
and the console.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...domain.base import Refusal
from ...runtime.e2b import BASE_TEMPLATE, NETWORK_FIELDS, PAUSED, RUNNING, sandboxes_of
from ...runtime.e2bfiles import ARCHIVE_BYTES_MAX
from ...runtime.e2bgate import DEFAULT_GATEWAY_PORT
from ..errors import ApiError, read_raw, status_of
from ..kit import api_of, endpoint

E2B_PREFIX = "/e2b"
#: The fields of a create the hub serves (E2B's NewSandbox / NewSandboxV2); any other is refused.
CREATE_FIELDS = frozenset({"templateID", "timeout", "autoPause", "autoPauseMemory", "metadata", "envVars",
                           "secure", "network", "allow_internet_access"})
#: The SDK's ``secure`` is always on here (every request to a sandbox carries its access token).
TIMEOUT_FIELDS, CONNECT_FIELDS = frozenset({"timeout"}), frozenset({"timeout", "memory"})
REFRESH_FIELDS, RESUME_FIELDS = frozenset({"duration"}), frozenset({"timeout", "autoPause"})
#: A pause: with the memory (the default) or cold (``memory`` false: the disk only, E2B's filesystem pause).
PAUSE_FIELDS = frozenset({"memory", "requireHealthyGuest"})


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status)


def _key_of(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def e2b(fn: Callable[[Request, str], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
    """An /e2b handler: the key checked first, refusals in E2B's error shape."""

    async def handler(request: Request) -> Response:
        sbx = sandboxes_of(api_of(request).hub)
        key_id = sbx.keys.check(_key_of(request))
        if key_id is None:
            return _error(401, "present an e2b_ key as X-API-Key or Authorization: Bearer (the owner token is not one)")
        try:
            result = await fn(request, key_id)
        except Refusal as r:
            return _error(status_of(r), r.message)
        if isinstance(result, Response):
            return result
        return JSONResponse(result)

    handler.__name__ = fn.__name__
    return handler


async def _body(request: Request, allowed: frozenset) -> dict:
    raw = await read_raw(request)
    try:
        data = json.loads(raw or b"{}")
    except ValueError as e:
        raise ApiError("bad_json", f"the body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ApiError("invalid_request", "the body must be a JSON object")
    extra = sorted(set(data) - allowed)
    if extra:
        raise ApiError("e2b_field_not_served", f"this hub does not serve the field(s) {', '.join(extra)}")
    return data


def _int(data: dict, name: str, default: int | None = None) -> int | None:
    v = data.get(name, default)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
        raise ApiError("invalid_request", f"{name} is a whole number of seconds")
    return v


def _strings(data: dict, name: str) -> dict:
    v = data.get(name) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise ApiError("invalid_request", f"{name} is an object of strings")
    return v


def _bool(data: dict, name: str, default: bool) -> bool:
    v = data.get(name, default)
    if not isinstance(v, bool):
        raise ApiError("invalid_request", f"{name} is true or false")
    return v


async def _run(fn, *args):
    return await anyio.to_thread.run_sync(fn, *args)


def _actor(key_id: str) -> str:
    """Who a change made with an E2B key is, in the log."""
    return f"token:{key_id}"


# -- sandboxes --------------------------------------------------------------------------------------
@e2b
async def create(request: Request, key_id: str) -> Response:
    data = await _body(request, CREATE_FIELDS)
    template = data.get("templateID") or BASE_TEMPLATE
    if not isinstance(template, str):
        raise ApiError("invalid_request", "templateID is a string")
    sb = await _run(lambda: sandboxes_of(api_of(request).hub).create(
        key_id, template, _int(data, "timeout"), _strings(data, "metadata"), _strings(data, "envVars"),
        bool(data.get("autoPause")), _network(data), auto_pause_memory=_bool(data, "autoPauseMemory", True)))
    return JSONResponse(sb.created(), status_code=201)


def _network(data: dict) -> dict:
    """The create's network rules; ``allow_internet_access: false`` is ``denyOut 0.0.0.0/0``."""
    net = data.get("network") or {}
    if not isinstance(net, dict):
        raise ApiError("invalid_request", "network is an object")
    if data.get("allow_internet_access") is False:
        net = {**net, "denyOut": [*(net.get("denyOut") or net.get("deny_out") or []), "0.0.0.0/0"]}
        net.pop("deny_out", None)
    return net


@e2b
async def network(request: Request, key_id: str) -> Response:
    data = await _body(request, NETWORK_FIELDS)
    await _run(sandboxes_of(api_of(request).hub).set_network, request.path_params["id"], data, _actor(key_id))
    return Response(status_code=204)


def _metadata_query(request: Request) -> dict:
    raw = request.query_params.get("metadata")
    if not raw:
        return {}
    return {urllib.parse.unquote(k): urllib.parse.unquote(v) for k, v in urllib.parse.parse_qsl(raw)}


@e2b
async def list_v1(request: Request, key_id: str) -> list:
    rows = await _run(sandboxes_of(api_of(request).hub).list, _metadata_query(request), (RUNNING,))
    return [s.listed() for s in rows]


@e2b
async def list_v2(request: Request, key_id: str) -> list:
    states = tuple(x for x in (request.query_params.get("state") or "running,paused").split(",") if x)
    if not set(states) <= {RUNNING, PAUSED}:
        raise ApiError("invalid_request", "state is running, paused or both")
    rows = await _run(sandboxes_of(api_of(request).hub).list, _metadata_query(request), states)
    if request.query_params.get("order") == "desc":
        rows.reverse()
    return [s.listed() for s in rows]


@e2b
async def detail(request: Request, key_id: str) -> dict:
    return (await _run(sandboxes_of(api_of(request).hub).get, request.path_params["id"])).detail()


@e2b
async def kill(request: Request, key_id: str) -> Response:
    await _run(sandboxes_of(api_of(request).hub).kill, request.path_params["id"], "killed", _actor(key_id))
    return Response(status_code=204)


@e2b
async def set_timeout(request: Request, key_id: str) -> Response:
    data = await _body(request, TIMEOUT_FIELDS)
    t = _int(data, "timeout")
    if t is None:
        raise ApiError("invalid_request", "timeout is required")
    await _run(sandboxes_of(api_of(request).hub).set_timeout, request.path_params["id"], t, _actor(key_id))
    return Response(status_code=204)


@e2b
async def refresh(request: Request, key_id: str) -> Response:
    data = await _body(request, REFRESH_FIELDS)
    sbx = sandboxes_of(api_of(request).hub)
    sb = await _run(sbx.get, request.path_params["id"])
    await _run(sbx.set_timeout, sb.id, _int(data, "duration", sb.timeout_s), _actor(key_id))
    return Response(status_code=204)


@e2b
async def pause(request: Request, key_id: str) -> Response:
    data = await _body(request, PAUSE_FIELDS)
    memory, healthy = _bool(data, "memory", True), _bool(data, "requireHealthyGuest", False)
    await _run(lambda: sandboxes_of(api_of(request).hub).pause(request.path_params["id"], _actor(key_id),
                                                               memory, healthy))
    return Response(status_code=204)


@e2b
async def connect(request: Request, key_id: str) -> Response:
    data = await _body(request, CONNECT_FIELDS)
    memory = _bool(data, "memory", True)
    sb, woke = await _run(lambda: sandboxes_of(api_of(request).hub).connect(
        request.path_params["id"], _int(data, "timeout"), _actor(key_id), memory=memory))
    return JSONResponse(sb.created(), status_code=201 if woke else 200)


@e2b
async def resume(request: Request, key_id: str) -> Response:
    data = await _body(request, RESUME_FIELDS)
    sbx = sandboxes_of(api_of(request).hub)
    if (await _run(sbx.get, request.path_params["id"])).state != PAUSED:
        raise ApiError("e2b_sandbox_running", "the sandbox is not paused")
    auto_pause = bool(data["autoPause"]) if "autoPause" in data else None
    sb, _ = await _run(sbx.connect, request.path_params["id"], _int(data, "timeout"), _actor(key_id), auto_pause)
    return JSONResponse(sb.created(), status_code=201)


@e2b
async def snapshot(request: Request, key_id: str) -> Response:
    data = await _body(request, frozenset({"name", "memory"}))
    snap = await _run(sandboxes_of(api_of(request).hub).snapshot, request.path_params["id"], data.get("name"),
                      data.get("memory", True) is not False, _actor(key_id))
    return JSONResponse(snap, status_code=201)


@e2b
async def snapshots(request: Request, key_id: str) -> list:
    return await _run(sandboxes_of(api_of(request).hub).snapshots)


@e2b
async def fork(request: Request, key_id: str) -> Response:
    data = await _body(request, frozenset({"timeout", "count"}))
    out = await _run(sandboxes_of(api_of(request).hub).fork, key_id, request.path_params["id"],
                     _int(data, "count", 1), _int(data, "timeout"))
    return JSONResponse(out, status_code=201)


# -- templates and builds --------------------------------------------------------------------------
async def _any_body(request: Request) -> dict:
    raw = await read_raw(request)
    try:
        data = json.loads(raw or b"{}")
    except ValueError as e:
        raise ApiError("bad_json", f"the body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ApiError("invalid_request", "the body must be a JSON object")
    return data


@e2b
async def template_request(request: Request, key_id: str) -> Response:
    data = await _any_body(request)
    made = await _run(sandboxes_of(api_of(request).hub).templates.request, data, _actor(key_id))
    return JSONResponse(made, status_code=202)


@e2b
async def build_start(request: Request, key_id: str) -> Response:
    data = await _any_body(request)
    p = request.path_params
    await _run(sandboxes_of(api_of(request).hub).templates.trigger, p["id"], p["build"], data, _actor(key_id))
    return Response(status_code=202)


@e2b
async def build_status(request: Request, key_id: str) -> dict:
    p = request.path_params
    offset = api_of(request).int_param(request, "logsOffset", 0, 0)
    return await _run(sandboxes_of(api_of(request).hub).templates.status, p["id"], p["build"], offset)


@e2b
async def build_logs(request: Request, key_id: str) -> dict:
    p = request.path_params
    offset = api_of(request).int_param(request, "cursor", 0, 0)
    view = await _run(sandboxes_of(api_of(request).hub).templates.status, p["id"], p["build"], offset)
    return {"logs": view["logEntries"]}


@e2b
async def template_files(request: Request, key_id: str) -> Response:
    """Is a COPY step's archive here? If not, the link to upload it to (``runtime/e2bfiles.py``); 201, as
    E2B answers."""
    hub = api_of(request).hub
    p = request.path_params
    link = await _run(sandboxes_of(hub).templates.file_link, p["id"], p["hash"], hub.address or str(request.base_url))
    return JSONResponse(link, status_code=201)


async def template_upload(request: Request) -> Response:
    """The SDK's upload of a COPY step's archive: no key, the link's capability instead."""
    templates = sandboxes_of(api_of(request).hub).templates
    p = request.path_params
    try:
        await _run(templates.check_upload, p["id"], p["hash"], request.query_params.get("upload"))
        chunks = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > ARCHIVE_BYTES_MAX:
                raise Refusal("body_too_large", f"an archive of a COPY step is at most {ARCHIVE_BYTES_MAX} bytes")
            chunks.append(chunk)
        await _run(templates.uploaded, p["id"], p["hash"], chunks)
    except Refusal as r:
        return _error(status_of(r), r.message)
    return Response(status_code=200)


@e2b
async def templates_list(request: Request, key_id: str) -> list:
    return await _run(sandboxes_of(api_of(request).hub).templates.list)


@e2b
async def template_delete(request: Request, key_id: str) -> Response:
    await _run(sandboxes_of(api_of(request).hub).templates.delete, request.path_params["id"], _actor(key_id))
    return Response(status_code=204)


# -- the owner's side (/v1/e2b) -------------------------------------------------------------------
@endpoint
async def keys_list(request: Request) -> dict:
    return {"keys": sandboxes_of(api_of(request).hub).keys.list()}


@endpoint
async def keys_create(request: Request) -> dict:
    raw = await read_raw(request)
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise ApiError("bad_json", "the body is not valid JSON") from None
    if not isinstance(data, dict) or set(data) - {"label"} or not isinstance(data.get("label"), str):
        raise ApiError("invalid_request", "the body is {\"label\": \"...\"}")
    hub = api_of(request).hub
    made = sandboxes_of(hub).keys.create(data["label"])
    port = getattr(sandboxes_of(hub), "gateway_port", None) or DEFAULT_GATEWAY_PORT
    made["env"] = [f"export E2B_API_URL={hub.address or 'http://127.0.0.1:8420'}{E2B_PREFIX}",
                   f"export E2B_API_KEY={made['key']}",
                   f"export E2B_SANDBOX_URL=http://127.0.0.1:{port}"]
    return made


@endpoint
async def keys_revoke(request: Request) -> dict:
    sandboxes_of(api_of(request).hub).keys.revoke(request.path_params["id"])
    return {"revoked": request.path_params["id"]}


@endpoint
async def owner_sandboxes(request: Request) -> dict:
    return {"sandboxes": [s.owner_row() for s in await _run(sandboxes_of(api_of(request).hub).list)]}


@endpoint
async def owner_kill(request: Request) -> dict:
    await _run(sandboxes_of(api_of(request).hub).kill, request.path_params["id"], "killed", "owner")
    return {"ended": request.path_params["id"]}


@endpoint
async def owner_pause(request: Request) -> dict:
    await _run(sandboxes_of(api_of(request).hub).pause, request.path_params["id"], "owner")
    return {"paused": request.path_params["id"]}


@endpoint
async def owner_resume(request: Request) -> dict:
    sb, _ = await _run(sandboxes_of(api_of(request).hub).connect, request.path_params["id"], None, "owner")
    return {"resumed": sb.id, "state": sb.state}


@endpoint
async def owner_templates(request: Request) -> dict:
    return {"templates": await _run(sandboxes_of(api_of(request).hub).templates.list)}


@endpoint
async def owner_template_delete(request: Request) -> dict:
    await _run(sandboxes_of(api_of(request).hub).templates.delete, request.path_params["id"], "owner")
    return {"deleted": request.path_params["id"]}


ROUTES = [
    Route(E2B_PREFIX + "/sandboxes", create, methods=["POST"]),
    Route(E2B_PREFIX + "/v2/sandboxes", create, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes", list_v1),
    Route(E2B_PREFIX + "/v2/sandboxes", list_v2),
    Route(E2B_PREFIX + "/sandboxes/{id}", detail),
    Route(E2B_PREFIX + "/sandboxes/{id}", kill, methods=["DELETE"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/timeout", set_timeout, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/refreshes", refresh, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/pause", pause, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/resume", resume, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/connect", connect, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/network", network, methods=["PUT"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/snapshots", snapshot, methods=["POST"]),
    Route(E2B_PREFIX + "/sandboxes/{id}/fork", fork, methods=["POST"]),
    Route(E2B_PREFIX + "/snapshots", snapshots),
    Route(E2B_PREFIX + "/v2/sandboxes/{id}/connect", connect, methods=["POST"]),
    Route(E2B_PREFIX + "/v3/templates", template_request, methods=["POST"]),
    Route(E2B_PREFIX + "/v2/templates/{id}/builds/{build}", build_start, methods=["POST"]),
    Route(E2B_PREFIX + "/templates/{id}/builds/{build}/status", build_status),
    Route(E2B_PREFIX + "/templates/{id}/builds/{build}/logs", build_logs),
    Route(E2B_PREFIX + "/templates/{id}/files/{hash}", template_files),
    Route(E2B_PREFIX + "/templates/{id}/files/{hash}", template_upload, methods=["PUT"]),
    Route(E2B_PREFIX + "/templates", templates_list),
    Route(E2B_PREFIX + "/v2/templates", templates_list),
    Route(E2B_PREFIX + "/templates/{id}", template_delete, methods=["DELETE"]),
    Route("/v1/e2b/templates", owner_templates),
    Route("/v1/e2b/templates/{id}", owner_template_delete, methods=["DELETE"]),
    Route("/v1/e2b/keys", keys_list),
    Route("/v1/e2b/keys", keys_create, methods=["POST"]),
    Route("/v1/e2b/keys/{id}", keys_revoke, methods=["DELETE"]),
    Route("/v1/e2b/sandboxes", owner_sandboxes),
    Route("/v1/e2b/sandboxes/{id}", owner_kill, methods=["DELETE"]),
    Route("/v1/e2b/sandboxes/{id}/pause", owner_pause, methods=["POST"]),
    Route("/v1/e2b/sandboxes/{id}/resume", owner_resume, methods=["POST"]),
]
