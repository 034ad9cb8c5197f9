"""/v1/usage: totals, splits in hourly or daily buckets, and the recent calls."""

from __future__ import annotations

import sqlalchemy as sa
from starlette.requests import Request
from starlette.routing import Route

from ...projections.models import CALL_FIELDS, SPLITS, SUMS, calls_table, hourly_table
from ...when import parse_when
from ..errors import ApiError
from ..kit import MAX_LIST_LIMIT, Api

BUCKETS = {"hour": 13, "day": 10}  # the length of an hour's key that names the bucket
#: What ``by`` may split on; "agent" is the caller's CID.
BY = {"model": "model", "agent": "cid", "role": "role", "provider": "provider", "route": "route"}
MAX_SERIES_ROWS = 10_000


def _range(request: Request) -> list:
    where = []
    for name, op in (("since", ">="), ("until", "<=")):
        raw = request.query_params.get(name)
        if raw:
            try:
                hour = parse_when(raw)[:13]
            except ValueError as e:
                raise ApiError("invalid_request", str(e)) from None
            where.append(hourly_table.c.hour >= hour if op == ">=" else hourly_table.c.hour <= hour)
    for param, col in BY.items():
        value = request.query_params.get(param)
        if value:
            where.append(hourly_table.c[col] == value)
    return where


def _sums() -> list:
    return [sa.func.sum(hourly_table.c[s]).label(s) for s in SUMS]


def _totals(row: dict) -> dict:
    t = {s: int(row.get(s) or 0) for s in SUMS}
    cached = t["cache_read_tokens"]
    prompt = t["input_tokens"] + cached + t["cache_write_tokens"]
    return {
        "calls": t["calls"], "errors": t["errors"],
        "input_tokens": t["input_tokens"], "output_tokens": t["output_tokens"],
        "cache_read_tokens": cached, "cache_write_tokens": t["cache_write_tokens"],
        "reported_cost": t["reported_cost_micro"] / 1e6, "estimated_cost": t["estimated_cost_micro"] / 1e6,
        "cost": t["cost_micro"] / 1e6, "charged": t["charged"], "shortfall": t["shortfall"],
        "cache_hit_rate": round(cached / prompt, 4) if prompt else 0.0,
        "mean_latency_ms": round(t["latency_us"] / t["calls"] / 1000, 2) if t["calls"] else None,
        "mean_ttft_ms": round(t["ttft_us"] / t["ttft_calls"] / 1000, 2) if t["ttft_calls"] else None,
    }


def routes(api: Api) -> list:
    hub = api.hub

    def query(q) -> list[dict]:
        with hub.read_models.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    async def summary(request: Request) -> dict:
        where = _range(request)

        def read() -> dict:
            total = query(sa.select(*_sums()).where(*where))[0]
            splits = {}
            for name, col in BY.items():
                c = hourly_table.c[col]
                splits[name] = [dict(_totals(r), **{name: r["key"]})
                                for r in query(sa.select(c.label("key"), *_sums()).where(*where).group_by(c).order_by(c))]
            return {"totals": _totals(total), "by": splits, "unit": "credits"}

        return await api.query(read)

    async def series(request: Request) -> dict:
        bucket = request.query_params.get("bucket", "hour")
        if bucket not in BUCKETS:
            raise ApiError("invalid_request", "bucket is hour or day")
        by = request.query_params.get("by")
        if by is not None and by not in BY:
            raise ApiError("invalid_request", f"by is one of {', '.join(BY)}")
        where = _range(request)
        b = sa.func.substr(hourly_table.c.hour, 1, BUCKETS[bucket]).label("bucket")
        cols = [b] + ([hourly_table.c[BY[by]].label("key")] if by else [])
        group = [b] + ([hourly_table.c[BY[by]]] if by else [])

        def read() -> list[dict]:
            q = sa.select(*cols, *_sums()).where(*where).group_by(*group).order_by(*group).limit(MAX_SERIES_ROWS)
            out = []
            for r in query(q):
                point = {"bucket": r["bucket"] + (":00" if bucket == "hour" else ""), **_totals(r)}
                if by:
                    point[by] = r["key"]
                out.append(point)
            return out

        return {"bucket": bucket, "by": by, "series": await api.query(read)}

    async def calls(request: Request) -> dict:
        limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
        where = []
        for param, col in (*BY.items(), ("task", "task"), ("status", "status")):
            value = request.query_params.get(param)
            if value:
                where.append(calls_table.c[col] == value)

        def read() -> list[dict]:
            q = sa.select(calls_table).where(*where).order_by(sa.desc(calls_table.c.position)).limit(limit)
            out = []
            for r in query(q):
                row = {k: r[k] for k in ("position", "id", "at", *CALL_FIELDS)}
                row["agent"] = row.pop("cid")
                row["cost"] = row["cost_micro"] / 1e6
                out.append(row)
            return out

        return {"calls": await api.query(read)}

    return [
        Route("/v1/usage/summary", api.endpoint(summary)),
        Route("/v1/usage/series", api.endpoint(series)),
        Route("/v1/usage/calls", api.endpoint(calls)),
    ]


__all__ = ["routes", "SPLITS"]
