"""Read models of the models area: providers, the policy, gateway links, price lists and usage.

Usage is kept two ways, each O(1) per call: every call, in an append-only
table (written, then dropped from memory), and hourly buckets per (provider,
model, agent, role, route) with the sums the Tokens & spend tab shows.  Daily
buckets and every split are sums over the hourly rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..domain.models import stored_policy
from ..events.records import EventRecord
from ..wire import USAGE_BUCKETS, USAGE_SPLITS
from .framework import Projection, Rows, append_only, evictable, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

providers_table = sa.Table(
    "rm_model_providers", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("preset", sa.String(64), nullable=False),
    sa.Column("wires", sa.JSON, nullable=False),
    sa.Column("auth", sa.String(32), nullable=False),
    sa.Column("models", sa.JSON, nullable=False),
    sa.Column("key", sa.JSON, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("added_at", sa.String(40), nullable=False),
    sa.Column("changed_at", sa.String(40), nullable=False),
)

policy_table = sa.Table(
    "rm_model_policy", metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("policy", sa.JSON, nullable=False),
    sa.Column("changed_at", sa.String(40), nullable=False),
    sa.Column("by", sa.String(200), nullable=False),
)

links_table = sa.Table(
    "rm_gateway_links", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("cid", sa.String(64), nullable=False),
    sa.Column("role", sa.String(64), nullable=False),
    sa.Column("model", sa.String(200)),
    sa.Column("task", sa.String(64)),
    sa.Column("route", sa.String(16), nullable=False),
    sa.Column("token_sha256", sa.String(64), nullable=False),
    sa.Column("revoked", sa.Boolean, nullable=False),
    sa.Column("issued_at", sa.String(40), nullable=False),
)

tokens_table = sa.Table(
    "rm_gateway_tokens", metadata,
    sa.Column("token_sha256", sa.String(64), primary_key=True),
    sa.Column("link", sa.String(32), nullable=False),
)

price_lists_table = sa.Table(
    "rm_price_lists", metadata,
    sa.Column("source", sa.String(32), primary_key=True),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("prices", sa.JSON, nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
)

_CALL_COLUMNS = (
    ("route", sa.String(16)), ("wire", sa.String(16)), ("cid", sa.String(64)), ("role", sa.String(64)),
    ("tier", sa.String(16)), ("task", sa.String(64)), ("provider", sa.String(64)), ("model", sa.String(200)),
    ("effort", sa.String(16)), ("stream", sa.Boolean), ("status", sa.String(16)), ("http_status", sa.Integer),
    ("input_tokens", sa.BigInteger), ("output_tokens", sa.BigInteger), ("cache_read_tokens", sa.BigInteger),
    ("cache_write_tokens", sa.BigInteger), ("latency_us", sa.BigInteger), ("ttft_us", sa.BigInteger),
    ("reported_cost_micro", sa.BigInteger), ("cost_micro", sa.BigInteger), ("cost_source", sa.String(16)),
    ("charged", sa.BigInteger), ("shortfall", sa.BigInteger), ("payer", sa.String(100)), ("entry", sa.String(64)),
)
CALL_FIELDS = tuple(n for n, _ in _CALL_COLUMNS)

calls_table = append_only(sa.Table(
    "rm_usage_calls", metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("id", sa.String(32), nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    *[sa.Column(n, t) for n, t in _CALL_COLUMNS],
))

usage_meta_table = sa.Table(
    "rm_usage_meta", metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

SUMS = ("calls", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
        "reported_cost_micro", "estimated_cost_micro", "cost_micro", "charged", "shortfall", "latency_us",
        "ttft_us", "ttft_calls")
SPLITS = ("provider", "model", "cid", "role", "route")

hourly_table = evictable(sa.Table(
    "rm_usage_hourly", metadata,
    sa.Column("hour", sa.String(13), primary_key=True),  # "2026-11-29T21"
    *[sa.Column(n, sa.String(200), primary_key=True) for n in SPLITS],
    *[sa.Column(n, sa.BigInteger, nullable=False) for n in SUMS],
))


class ModelsProjection(Projection):
    name = "models"
    version = 3  # 2: a gateway link's route; 3: the policy's fetch blocklist (empty on older policies)
    tables = (providers_table, policy_table, links_table, tokens_table, price_lists_table)

    def _provider(self, e: EventRecord, rows: Rows, p: dict) -> None:
        old = rows.get("rm_model_providers", p["id"])
        rows.put("rm_model_providers", {
            "id": p["id"], "preset": p["preset"], "wires": p["wires"], "auth": p["auth"], "models": p["models"],
            "key": p["key"], "enabled": p.get("enabled", True),
            "added_at": old["added_at"] if old else e.at, "changed_at": e.at,
        })

    def _policy(self, e: EventRecord, rows: Rows, policy: dict) -> None:
        rows.put("rm_model_policy", {"id": "policy", "policy": stored_policy(policy), "changed_at": e.at,
                                     "by": e.actor})

    def on_ModelSettings_Created(self, e: EventRecord, rows: Rows) -> None:
        for p in e.data["providers"].values():
            self._provider(e, rows, p)
        self._policy(e, rows, e.data["policy"])

    def on_ModelSettings_ProviderAdded(self, e: EventRecord, rows: Rows) -> None:
        self._provider(e, rows, e.data["provider"])

    def on_ModelSettings_ProviderEdited(self, e: EventRecord, rows: Rows) -> None:
        self._provider(e, rows, e.data["provider"])

    def on_ModelSettings_ProviderRemoved(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_model_providers", e.data["provider_id"])

    def on_ModelSettings_PolicySet(self, e: EventRecord, rows: Rows) -> None:
        self._policy(e, rows, e.data["policy"])

    def _link(self, e: EventRecord, rows: Rows, cid: str) -> None:
        old = rows.get("rm_gateway_links", e.originator_id)
        if old:
            rows.delete("rm_gateway_tokens", old["token_sha256"])
        d = e.data
        rows.put("rm_gateway_links", {
            "id": e.originator_id, "cid": cid, "role": d["role"], "model": d["model"], "task": d["task"],
            "route": d.get("route", "gateway"), "token_sha256": d["token_sha256"], "revoked": False, "issued_at": e.at,
        })
        rows.put("rm_gateway_tokens", {"token_sha256": d["token_sha256"], "link": e.originator_id})

    def on_GatewayLink_Created(self, e: EventRecord, rows: Rows) -> None:
        self._link(e, rows, e.data["cid"])

    def on_GatewayLink_Reissued(self, e: EventRecord, rows: Rows) -> None:
        self._link(e, rows, rows.get("rm_gateway_links", e.originator_id)["cid"])

    def on_GatewayLink_Revoked(self, e: EventRecord, rows: Rows) -> None:
        old = rows.get("rm_gateway_links", e.originator_id)
        rows.delete("rm_gateway_tokens", old["token_sha256"])
        rows.put("rm_gateway_links", dict(old, revoked=True))

    def on_PriceList_Fetched(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        old = rows.get("rm_price_lists", d["source"])
        if old and old["day"] > d["day"]:
            return
        rows.put("rm_price_lists", {"source": d["source"], "day": d["day"], "digest": d["digest"],
                                    "count": len(d["prices"]), "prices": d["prices"], "at": e.at})


class UsageProjection(Projection):
    name = "usage"
    version = 2
    tables = (calls_table, usage_meta_table, hourly_table)

    def on_Usage_ModelCalled(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        meta = rows.get("rm_usage_meta", "calls")
        seq = meta["value"] if meta else 0
        rows.put("rm_usage_meta", {"name": "calls", "value": seq + 1})
        call = {k: d.get(k) for k in CALL_FIELDS}
        rows.put("rm_usage_calls", {"position": e.position, "id": e.originator_id, "at": e.at, **call})
        key = {"hour": e.at[:13], "provider": d["provider"], "model": d["model"], "cid": d["cid"],
               "role": d["role"], "route": d["route"]}
        k = tuple(key[c] for c in ("hour", *SPLITS))
        old = rows.get("rm_usage_hourly", k) or dict(key, **{s: 0 for s in SUMS})
        reported = d["reported_cost_micro"]
        add = {
            "calls": 1, "errors": int(d["status"] != "ok"),
            "input_tokens": d["input_tokens"], "output_tokens": d["output_tokens"],
            "cache_read_tokens": d["cache_read_tokens"], "cache_write_tokens": d["cache_write_tokens"],
            "reported_cost_micro": reported or 0,
            "estimated_cost_micro": 0 if reported is not None else d["cost_micro"],
            "cost_micro": d["cost_micro"], "charged": d["charged"], "shortfall": d["shortfall"],
            "latency_us": d["latency_us"], "ttft_us": d["ttft_us"] or 0, "ttft_calls": int(d["ttft_us"] is not None),
        }
        rows.put("rm_usage_hourly", {**old, **{s: old[s] + add[s] for s in SUMS}})


# -- the queries of the models area's screens (read models only) ------------------------------


def providers(models: ReadModels) -> list[dict]:
    """Every provider, by id."""
    return sorted(models.states["models"].rows.all("rm_model_providers"), key=lambda r: r["id"])


def provider(models: ReadModels, pid: str) -> dict | None:
    return models.states["models"].rows.get("rm_model_providers", pid)


def policy_row(models: ReadModels) -> dict | None:
    return models.states["models"].rows.get("rm_model_policy", "policy")


def price_lists(models: ReadModels) -> dict[str, dict]:
    """The public price lists kept, by source."""
    return {r["source"]: r for r in models.states["models"].rows.all("rm_price_lists")}


def gateway_links(models: ReadModels) -> list[dict]:
    """Every agent's gateway link, by CID, without its token's digest."""
    return [{k: v for k, v in r.items() if k not in ("id", "token_sha256")}
            for r in sorted(models.states["models"].rows.all("rm_gateway_links"), key=lambda r: r["cid"])]


def overview_counts(models: ReadModels) -> dict:
    meta = models.states["usage"].rows.get("rm_usage_meta", "calls")
    return {"providers": len(models.states["models"].rows.all("rm_model_providers")),
            "model_calls": meta["value"] if meta else 0}


#: The length of an hour's key that names a usage bucket.
BUCKETS = dict(zip(USAGE_BUCKETS, (13, 10), strict=True))
#: What usage may be split on; "agent" is the caller's CID.
BY = {name: "cid" if name == "agent" else name for name in USAGE_SPLITS}
#: The most points one usage series returns.
MAX_SERIES_ROWS = 10_000


def usage_range(since_hour: str | None, until_hour: str | None, keys: dict[str, str]) -> list:
    """The hourly rows within the hours named (``"2026-11-29T21"``) and of the splits named (``BY``)."""
    h = hourly_table.c
    where = ([h.hour >= since_hour] if since_hour else []) + ([h.hour <= until_hour] if until_hour else [])
    return where + [h[BY[name]] == value for name, value in keys.items()]


def _sums() -> list:
    return [sa.func.sum(hourly_table.c[s]).label(s) for s in SUMS]


def _usage_totals(row: dict) -> dict:
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


def _select(models: ReadModels, q: Any) -> list[dict]:
    with models.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q)]


def usage_summary(models: ReadModels, where: list) -> dict:
    total = _select(models, sa.select(*_sums()).where(*where))[0]
    splits = {}
    for name, col in BY.items():
        c = hourly_table.c[col]
        q = sa.select(c.label("key"), *_sums()).where(*where).group_by(c).order_by(c)
        splits[name] = [dict(_usage_totals(r), **{name: r["key"]}) for r in _select(models, q)]
    return {"totals": _usage_totals(total), "by": splits, "unit": "credits"}


def usage_series(models: ReadModels, bucket: str, by: str | None, where: list) -> list[dict]:
    b = sa.func.substr(hourly_table.c.hour, 1, BUCKETS[bucket]).label("bucket")
    cols = [b] + ([hourly_table.c[BY[by]].label("key")] if by else [])
    group = [b] + ([hourly_table.c[BY[by]]] if by else [])
    q = sa.select(*cols, *_sums()).where(*where).group_by(*group).order_by(*group).limit(MAX_SERIES_ROWS)
    out = []
    for r in _select(models, q):
        point = {"bucket": r["bucket"] + (":00" if bucket == "hour" else ""), **_usage_totals(r)}
        if by:
            point[by] = r["key"]
        out.append(point)
    return out


#: What the recent calls may be filtered on, beyond the splits.
CALL_FILTERS = {**BY, "task": "task", "status": "status"}


def usage_calls(models: ReadModels, keys: dict[str, str], limit: int) -> list[dict]:
    where = [calls_table.c[CALL_FILTERS[name]] == value for name, value in keys.items()]
    q = sa.select(calls_table).where(*where).order_by(sa.desc(calls_table.c.position)).limit(limit)
    out = []
    for r in _select(models, q):
        row = {k: r[k] for k in ("position", "id", "at", *CALL_FIELDS)}
        row["agent"] = row.pop("cid")
        row["cost"] = row["cost_micro"] / 1e6
        out.append(row)
    return out
