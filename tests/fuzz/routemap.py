"""Every route the hub defines, and what each one reads, taken from the app itself.

The fuzzer never keeps a list of routes: it builds the app (create_app on a scratch hub) and reads its
routing table.  A route's body model is found in its handler: the pydantic ``Body`` models the handler's
code names (through its closures and the helpers of its own module) are the bodies it reads with
``read_body``.  A state-changing route that names no model must be declared here, body-less or
provider-shaped, so a new route is either fuzzed with its real body or fails ``test_every_route_is_known``.
"""

from __future__ import annotations

import inspect
import re
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

import pydantic
from starlette.routing import Route, WebSocketRoute

from agentplaza.api.errors import Body

#: Routes that read no body: the fuzzer still sends them hostile bodies, which they must ignore or refuse.
BODYLESS: dict[tuple[str, str], str] = {
    ("POST", "/v1/tasks/schedule"): "one scheduler pass, now",
    ("DELETE", "/v1/e2b/templates/{id}"): "the template is named by the path",
    ("DELETE", "/v1/e2b/keys/{id}"): "the key is named by the path",
    ("DELETE", "/v1/e2b/sandboxes/{id}"): "the sandbox is named by the path",
    ("POST", "/v1/e2b/sandboxes/{id}/pause"): "the sandbox is named by the path",
    ("POST", "/v1/e2b/sandboxes/{id}/resume"): "the sandbox is named by the path",
    ("POST", "/v1/toolbox/{id}/flag"): "the discovery is named by the path",
    ("DELETE", "/v1/toolbox/{id}"): "the discovery is named by the path",
    ("POST", "/v1/vault/recovery"): "a new recovery code, shown once",
    ("DELETE", "/v1/rules/{ident}"): "the rule is named by the path",
    ("DELETE", "/v1/vault/secrets/{id}"): "the secret is named by the path",
    ("DELETE", "/v1/vault/slots/{id}"): "the slot is named by the path",
    ("DELETE", "/v1/models/providers/{pid}"): "the provider is named by the path",
    ("DELETE", "/v1/models/gateway-tokens/{cid}"): "the agent is named by the path",
    ("DELETE", "/v1/agents/{cid}"): "the agent is named by the path",
    ("DELETE", "/v1/agents/{cid}/checkpoints/{name}"): "the checkpoint is named by the path",
    ("DELETE", "/v1/templates/{key}"): "the template is named by the path",
    ("DELETE", "/v1/auth/session"): "signs out the session cookie it is sent with",
    ("DELETE", "/v1/library/{id}"): "the library item is named by the path",
    ("POST", "/v1/hub-mcp/disable"): "turns the hub's MCP server off",
    ("DELETE", "/v1/hub-mcp/tokens/{id}"): "the token is named by the path",
    ("POST", "/v1/join-codes/{id}/revoke"): "the join code is named by the path",
    ("POST", "/v1/hub/owner-token/rotate"): "a new owner token, shown once",
    ("DELETE", "/v1/volumes/{name}"): "the volume is named by the path",
    ("DELETE", "/v1/volumes/roles/{role}"): "the role is named by the path",
    ("POST", "/v1/nodes/{name}/drain"): "the node is named by the path",
    ("POST", "/v1/nodes/{name}/undrain"): "the node is named by the path",
    ("POST", "/v1/nodes/{name}/revoke"): "the node is named by the path",
}

#: Routes whose body is a provider's request shape (the model gateway passes it on): fuzzed with any JSON.
RAW_BODIES: dict[str, str] = {
    "/v1/gateway/": "the Anthropic, OpenAI and Gemini request shapes, checked by the gateway itself",
    "/git/": "git's smart HTTP (pkt-lines and packs), read by the push's command reader and git http-backend",
    "/mcp": "JSON-RPC messages, read by the MCP SDK behind the hub's own door (api/mcp_door.py)",
}

#: Routes the fuzzer leaves alone, each with the reason.  Tests never reach the network.
EXCLUDED: dict[tuple[str, str], str] = {
    ("POST", "/v1/models/prices/refresh"): "fetches the public price lists over the network",
    ("POST", "/v1/models/providers/{pid}/test"): "calls the provider's API over the network",
    ("WS", "/v1/ws"): "a WebSocket, not a request: its limits have their own tests",
    ("POST", "/e2b/sandboxes"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/v2/sandboxes"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("DELETE", "/e2b/sandboxes/{id}"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/timeout"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/refreshes"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/pause"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/resume"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/connect"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("PUT", "/e2b/sandboxes/{id}/network"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/snapshots"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/sandboxes/{id}/fork"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/v2/sandboxes/{id}/connect"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/v3/templates"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/e2b/v2/templates/{id}/builds/{build}"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("DELETE", "/e2b/templates/{id}"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("POST", "/v1/e2b/keys"): "E2B's own JSON shapes, read field by field (an unserved field is a 422): tests/e2b",
    ("PUT", "/e2b/templates/{id}/files/{hash}"): "the SDK's raw upload of a COPY archive to a capability link: tests/e2b",
}

#: Methods that change state: such a route either names its body model or is declared above.
WRITES = ("POST", "PUT", "PATCH", "DELETE")

_PARAM = re.compile(r"{(\w+)(?::\w+)?}")
_NAME = re.compile(r"^[a-z][a-z_]{0,23}$")


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str
    #: Path parameters, in order.
    params: tuple[str, ...]
    #: The body models the handler reads (empty: body-less or raw).
    bodies: tuple[type[pydantic.BaseModel], ...]
    #: A provider-shaped body the handler passes on.
    raw_body: bool
    #: Words the handler's code names: candidates for its query parameters.
    words: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


def _functions(fn) -> list[types.FunctionType]:
    """The handler and every function it reaches through closures and its own module's globals."""
    seen: dict[int, types.FunctionType] = {}
    todo = [fn]
    while todo:
        f = inspect.unwrap(todo.pop())
        if not isinstance(f, types.FunctionType) or id(f) in seen:
            continue
        seen[id(f)] = f
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, types.FunctionType):
                todo.append(value)
        for name in _names(f.__code__):
            value = f.__globals__.get(name)
            if isinstance(value, types.FunctionType) and value.__module__ == f.__module__:
                todo.append(value)
    return list(seen.values())


def _codes(code: types.CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _names(code: types.CodeType) -> set[str]:
    return {n for c in _codes(code) for n in (*c.co_names, *c.co_freevars)}


def _inspect(endpoint) -> tuple[tuple[type[pydantic.BaseModel], ...], tuple[str, ...]]:
    models: dict[str, type[pydantic.BaseModel]] = {}
    words: set[str] = set()
    for f in _functions(endpoint):
        scope = dict(f.__globals__)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                scope[name] = cell.cell_contents
            except ValueError:
                continue
        for name in _names(f.__code__):
            value = scope.get(name)
            if isinstance(value, type) and issubclass(value, Body) and value is not Body:
                models[f"{value.__module__}.{value.__qualname__}"] = value
        for c in _codes(f.__code__):
            words.update(s for s in c.co_consts if isinstance(s, str) and _NAME.match(s))
    return tuple(models[k] for k in sorted(models)), tuple(sorted(words))


def routes_of(app) -> tuple[list[RouteSpec], list[tuple[str, str]]]:
    """(the HTTP routes as specs, the other routes as (kind, path))."""
    specs, others = [], []
    for r in app.routes:
        if isinstance(r, WebSocketRoute):
            others.append(("WS", r.path))
            continue
        if not isinstance(r, Route):
            others.append((type(r).__name__, getattr(r, "path", "?")))
            continue
        bodies, words = _inspect(r.endpoint)
        raw = any(r.path.startswith(p) for p in RAW_BODIES)
        for method in sorted(r.methods or ()):
            if method == "HEAD":  # Starlette answers HEAD with the GET handler
                continue
            specs.append(RouteSpec(method, r.path, tuple(_PARAM.findall(r.path)), bodies, raw, words))
    return specs, others


def app_routes() -> tuple[list[RouteSpec], list[tuple[str, str]]]:
    """The routes of the app a hub serves, read from a scratch hub (SQLite, in a temporary folder)."""
    from agentplaza.api.app import create_app
    from agentplaza.api.hub import Hub
    from agentplaza.config import Folders

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        hub = Hub.open(Folders(root / "state", root / "config", root / "data"), database_url="")
        try:
            return routes_of(create_app(hub))
        finally:
            hub.close()


def unknown(specs: list[RouteSpec]) -> list[str]:
    """State-changing routes with no body model found that are not declared body-less, raw or excluded."""
    declared = BODYLESS.keys() | EXCLUDED.keys()
    return [s.name for s in specs
            if s.method in WRITES and not s.bodies and not s.raw_body and (s.method, s.path) not in declared]
