"""The model gateway's routes: the Anthropic, OpenAI and Gemini shapes under one agent's base URL.

``/v1/gateway/<token>/anthropic`` is what ANTHROPIC_BASE_URL (or the SDK's
``base_url``) is set to; the SDK adds ``/v1/messages``.
``/v1/gateway/<token>/openai/v1`` is the OpenAI base URL; the SDK adds
``/chat/completions``.  ``/v1/gateway/<token>/gemini`` is the Gemini base
URL; the SDK adds ``/v1beta/models/<model>:generateContent``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...adapters.providers.presets import ANTHROPIC, GEMINI, OPENAI
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


async def messages(request: Request):
    return await gateway_of(api_of(request)).handle(ANTHROPIC, request.path_params["token"], request)


async def chat(request: Request):
    return await gateway_of(api_of(request)).handle(OPENAI, request.path_params["token"], request)


async def gemini(request: Request):
    model, _, action = request.path_params["model_action"].partition(":")
    if action not in GEMINI_ACTIONS:
        return gateway_error(GEMINI, 404, "not_found", f"no Gemini method {action or '(none)'}")
    return await gateway_of(api_of(request)).handle(GEMINI, request.path_params["token"], request, model,
                                                    action == "streamGenerateContent")


_P = GATEWAY_PREFIX + "/{token}"
ROUTES = [
    Route(_P + "/anthropic/v1/messages", messages, methods=["POST"]),
    Route(_P + "/openai/v1/chat/completions", chat, methods=["POST"]),
    Route(_P + "/gemini/v1beta/models/{model_action}", gemini, methods=["POST"]),
    Route(_P + "/gemini/v1/models/{model_action}", gemini, methods=["POST"]),
]
