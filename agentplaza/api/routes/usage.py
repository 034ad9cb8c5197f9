"""/v1/usage: totals, splits in hourly or daily buckets, and the recent calls (the queries sit beside
their tables in ``projections/models.py``)."""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.routing import Route

from ...projections import models as rm
from ...when import parse_when
from ..errors import ApiError
from ..kit import MAX_LIST_LIMIT, Api, api_of, endpoint
from .gateway import gateway_of

#: How long ``?settled=1`` waits for the calls already answered to be recorded.
SETTLE_TIMEOUT_S = 30.0


def _hour(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        return parse_when(raw)[:13]
    except ValueError as e:
        raise ApiError("invalid_request", str(e)) from None


def _keys(request: Request, names) -> dict[str, str]:
    return {n: v for n in names if (v := request.query_params.get(n))}


def _range(request: Request) -> list:
    return rm.usage_range(_hour(request, "since"), _hour(request, "until"), _keys(request, rm.BY))


@endpoint
async def summary(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.usage_summary, api.hub.read_models, _range(request))


@endpoint
async def series(request: Request) -> dict:
    api = api_of(request)
    bucket = request.query_params.get("bucket", "hour")
    if bucket not in rm.BUCKETS:
        raise ApiError("invalid_request", "bucket is hour or day")
    by = request.query_params.get("by")
    if by is not None and by not in rm.BY:
        raise ApiError("invalid_request", f"by is one of {', '.join(rm.BY)}")
    where = _range(request)
    return {"bucket": bucket, "by": by, "series": await api.query(rm.usage_series, api.hub.read_models, bucket, by, where)}


async def settle_calls(api: Api) -> None:
    """Wait until every model call answered before this moment is recorded and shows in the read
    models: the gateway records on its own thread, a moment after each answer (``Recorder``)."""
    if not await anyio.to_thread.run_sync(gateway_of(api).recorder.drain, SETTLE_TIMEOUT_S):
        raise ApiError("calls_not_settled", f"the calls answered were not recorded within {SETTLE_TIMEOUT_S:g} s")
    await api.follower.settle(await api.query(api.hub.store.max_position))


@endpoint
async def calls(request: Request) -> dict:
    """The recent calls; ``?settled=1`` first waits until every call answered before it is recorded
    (so "a refusal recorded nothing" can be read without a race)."""
    api = api_of(request)
    if request.query_params.get("settled") in ("1", "true"):
        await settle_calls(api)
    limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
    keys = _keys(request, rm.CALL_FILTERS)
    return {"calls": await api.query(rm.usage_calls, api.hub.read_models, keys, limit)}


ROUTES = [
    Route("/v1/usage/summary", summary),
    Route("/v1/usage/series", series),
    Route("/v1/usage/calls", calls),
]
