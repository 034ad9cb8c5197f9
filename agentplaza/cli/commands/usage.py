"""agentplaza usage [--since T] [--until T] [--by model|agent|role|provider|route] [--series hour|day] [--calls N]."""

from __future__ import annotations

from ..env import Env
from ..output import pairs, table

NAME = "usage"
BY = ("model", "agent", "role", "provider", "route")


def register(sub) -> None:
    p = sub.add_parser(NAME, help="model calls: tokens, cost and the recent calls")
    p.add_argument("--since", help="from this time (ISO 8601, UTC)")
    p.add_argument("--until", help="up to this time")
    p.add_argument("--by", choices=BY, help="split the totals (or the series) by this")
    p.add_argument("--series", choices=("hour", "day"), help="totals in hourly or daily buckets")
    p.add_argument("--calls", type=int, metavar="N", help="the N most recent calls")
    for f in BY:
        p.add_argument(f"--{f}-is", dest=f"only_{f}", metavar=f.upper(), help=f"only this {f}")


def _filters(args) -> dict:
    out = {"since": args.since, "until": args.until}
    for f in BY:
        out[f] = getattr(args, f"only_{f}")
    return out


SUMMARY_COLUMNS = ["calls", "input_tokens", "output_tokens", "cache_read_tokens", "cost", "charged"]


def run(env: Env) -> int:
    args, c = env.args, env.client
    if args.calls:
        f = {k: v for k, v in _filters(args).items() if k not in ("since", "until")}
        return env.show(c.get("/v1/usage/calls", limit=args.calls, **f), lambda d: table(
            d["calls"], ["at", "agent", "role", "provider", "model", "route", "input_tokens", "output_tokens",
                         "cost", "task", "status"]))
    if args.series:
        return env.show(c.get("/v1/usage/series", bucket=args.series, by=args.by, **_filters(args)), lambda d: table(
            d["series"], ["bucket"] + ([args.by] if args.by else []) + SUMMARY_COLUMNS))
    out = c.get("/v1/usage/summary", **_filters(args))

    def render(d: dict) -> str:
        text = pairs(d["totals"])
        if args.by:
            text += "\n\n" + table(d["by"][args.by], [args.by] + SUMMARY_COLUMNS)
        return text

    return env.show(out, render)
