"""/v1/settings (the owner's settings agents' money and outreach follow: ``payments.approve_over``,
``society.outreach_minutes``) and
/v1/society/hires (who hired whom, the bonus and what became of it)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import hiring as cmd
from ...projections import hiring as rm
from ..errors import ApiError, Body, read_body
from ..kit import MAX_LIST_LIMIT, api_of, endpoint
from .society import _cid


class PaymentsBody(Body):
    approve_over: int


class SocietySettingsBody(Body):
    outreach_minutes: int


class SettingsBody(Body):
    payments: PaymentsBody | None = None
    society: SocietySettingsBody | None = None


@endpoint
async def get_settings(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.settings_view, api.hub.read_models)


@endpoint
async def patch_settings(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, SettingsBody)
    if body.payments is None and body.society is None:
        raise ApiError("invalid_request", "name a setting to change, like {\"payments\": {\"approve_over\": 500}} "
                                          "or {\"society\": {\"outreach_minutes\": 20}}")
    ctx = api.context(request)
    if body.payments is not None:
        await api.command(lambda: cmd.set_approve_over(api.hub.commands, ctx, body.payments.approve_over))
    if body.society is not None:
        await api.command(lambda: cmd.set_outreach_minutes(api.hub.commands, ctx, body.society.outreach_minutes))
    return await api.query(rm.settings_view, api.hub.read_models)


@endpoint
async def get_hires(request: Request) -> dict:
    api = api_of(request)
    cid = _cid(request.query_params.get("cid"))
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return {"hires": await api.query(rm.hire_rows, api.hub.read_models, cid, limit)}


ROUTES = [
    Route("/v1/settings", get_settings),
    Route("/v1/settings", patch_settings, methods=["PATCH"]),
    Route("/v1/society/hires", get_hires),
]
