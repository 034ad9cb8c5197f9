"""The model gateway's routes: the Anthropic, OpenAI and Gemini shapes under one agent's base URL.

``/v1/gateway/<token>/anthropic`` is what ANTHROPIC_BASE_URL (or the SDK's
``base_url``) is set to; the SDK adds ``/v1/messages``.
``/v1/gateway/<token>/openai/v1`` is the OpenAI base URL; the SDK adds
``/chat/completions``.  ``/v1/gateway/<token>/gemini`` is the Gemini base
URL; the SDK adds ``/v1beta/models/<model>:generateContent``.
"""

from __future__ import annotations

import re
import sys
import traceback

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ...adapters.providers.presets import ANTHROPIC, GEMINI, OPENAI
from ..edge import Edge, HubNames, edge_headers, with_security_headers
from ..errors import error_response
from ..gateway import Gateway, TreasuryCharger, VaultKeys
from ..gateway import _error as gateway_error
from ..kit import Api, api_of

GATEWAY_PREFIX = "/v1/gateway"
#: The Gemini methods the gateway passes on.
GEMINI_ACTIONS = ("generateContent", "streamGenerateContent")


def gateway_of(api: Api) -> Gateway:
    """The hub's one gateway (made on first use, shared by the models routes)."""
    gw = getattr(api, "gateway", None)
    if gw is None:
        gw = Gateway(api.hub, VaultKeys(api.hub), TreasuryCharger(api.hub))
        api.gateway = gw  # type: ignore[attr-defined]
    return gw


def base_urls(hub_url: str, token: str) -> dict[str, str]:
    root = f"{hub_url.rstrip('/')}{GATEWAY_PREFIX}/{token}"
    return {ANTHROPIC: f"{root}/anthropic", OPENAI: f"{root}/openai/v1", GEMINI: f"{root}/gemini"}


async def call(api: Api, wire: str, token: str, request: Request, model_action: str | None = None) -> Response:
    """One model call in ``wire``'s shape (Gemini names its model and method in the path)."""
    gw = gateway_of(api)
    if wire != GEMINI:
        return await gw.handle(wire, token, request)
    model, _, action = (model_action or "").partition(":")
    if action not in GEMINI_ACTIONS:
        return gateway_error(GEMINI, 404, "not_found", f"no Gemini method {action or '(none)'}")
    return await gw.handle(GEMINI, token, request, model, action == "streamGenerateContent")


async def messages(request: Request):
    return await call(api_of(request), ANTHROPIC, request.path_params["token"], request)


async def chat(request: Request):
    return await call(api_of(request), OPENAI, request.path_params["token"], request)


async def gemini(request: Request):
    return await call(api_of(request), GEMINI, request.path_params["token"], request,
                      request.path_params["model_action"])


_P = GATEWAY_PREFIX + "/{token}"
ROUTES = [
    Route(_P + "/anthropic/v1/messages", messages, methods=["POST"]),
    Route(_P + "/openai/v1/chat/completions", chat, methods=["POST"]),
    Route(_P + "/gemini/v1beta/models/{model_action}", gemini, methods=["POST"]),
    Route(_P + "/gemini/v1/models/{model_action}", gemini, methods=["POST"]),
]

#: The four routes above as one pattern (a path parameter is what Starlette's ``{name}`` matches: no "/").
DOOR_PATH = re.compile(
    re.escape(GATEWAY_PREFIX) + r"/(?P<token>[^/]+)/(?:(?P<anthropic>anthropic/v1/messages)"
    r"|(?P<openai>openai/v1/chat/completions)|gemini/v1(?:beta)?/models/(?P<model_action>[^/]+))")


class Door:
    """A model call taken straight to its route, before the Starlette stack.

    Every model call is a request; Starlette's layers around a route (the error and exception
    middleware, the router, the request-response wrapper, each wrapping ``send`` again) were a tenth
    of the hub's time on a call.  The door takes only a POST whose path is one of ``ROUTES`` and that
    the edge lets through (``Edge.refusal``: the Host, Origin and content checks); it adds the edge's
    headers to the answer (``with_security_headers``).  Anything else, a refused call included, goes
    the whole way round and gets the same answer as before.  The gateway's routes need no owner token
    (``OwnerOnly`` lets their prefix through: the gateway checks its own tokens).  A route that fails
    gets the hub's 500, as Starlette's handler gives it, and the failure is printed for the log.
    """

    def __init__(self, api: Api, names: HubNames):
        self.api, self.edge = api, Edge(None, names)  # type: ignore[arg-type] - only its checks are used

    async def take(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Whether the call was this door's (and is answered)."""
        if scope["method"] != "POST":
            return False
        m = DOOR_PATH.fullmatch(scope["path"])
        if m is None or self.edge.refusal(scope, edge_headers(scope)) is not None:
            return False
        wire = ANTHROPIC if m["anthropic"] else OPENAI if m["openai"] else GEMINI
        request = Request(scope, receive)
        try:
            response = await call(self.api, wire, m["token"], request, m["model_action"])
        except Exception:  # noqa: BLE001 - as Starlette's ServerErrorMiddleware: the hub's 500, the failure logged
            traceback.print_exc(file=sys.stderr)
            response = error_response(500, "internal", "the hub failed to answer; see its log")
        await response(scope, receive, with_security_headers(send))
        return True
