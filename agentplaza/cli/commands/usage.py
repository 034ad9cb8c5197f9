"""agentplaza usage [--since T] [--until T] [--by model|agent|role|provider|route] [--series hour|day] [--calls N]."""

from __future__ import annotations

from ...wire import USAGE_BUCKETS, USAGE_SPLITS
from ..actions import Action, Area, arg
from ..env import Env
from ..output import pairs, table

BY = USAGE_SPLITS


def _filters(args) -> dict:
    out = {"since": args.since, "until": args.until}
    for f in BY:
        out[f] = getattr(args, f"only_{f}")
    return out


SUMMARY_COLUMNS = ["calls", "input_tokens", "output_tokens", "cache_read_tokens", "cost", "charged"]
CALL_COLUMNS = ["at", "agent", "role", "provider", "model", "route", "input_tokens", "output_tokens", "cost", "task",
                "status"]


def run(env: Env) -> int:
    args, c = env.args, env.client
    if args.calls:
        f = {k: v for k, v in _filters(args).items() if k not in ("since", "until")}
        return env.show(c.get("/v1/usage/calls", limit=args.calls, **f), lambda d: table(d["calls"], CALL_COLUMNS))
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


AREA = Area("usage", "model calls: tokens, cost and the recent calls", (
    Action("show", "the totals (split --by), a --series, or the --calls most recent", run=run, default=True),
), top=(
    arg("--since", help="from this time (ISO 8601, UTC)"),
    arg("--until", help="up to this time"),
    arg("--by", choices=BY, help="split the totals (or the series) by this"),
    arg("--series", choices=USAGE_BUCKETS, help="totals in hourly or daily buckets"),
    arg("--calls", type=int, metavar="N", help="the N most recent calls"),
    *[arg(f"--{f}-is", dest=f"only_{f}", metavar=f.upper(), help=f"only this {f}") for f in BY],
))
