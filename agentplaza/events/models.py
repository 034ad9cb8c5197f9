"""The models area's commands: providers, the policy, gateway links, price lists, model calls."""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable

from ..domain.base import Context, Refusal
from ..domain.models import (
    MODELS_ID,
    GatewayLink,
    ModelSettings,
    PriceList,
    Usage,
    fetched_list,
    issue_link as _issue_link,
    link_id,
    price_list_id,
    record_call as _record_call,
)
from .commands import Commands


def load(cmds: Commands) -> ModelSettings:
    s = cmds.store.get(MODELS_ID)
    if s is None:
        raise Refusal("no_models", "the models area is not set up yet", 409)
    return s


def ensure_models(cmds: Commands, starting: Iterable[dict]) -> list[int]:
    """On a new install the hub starts with the marked providers and the shipped policy."""
    starting = list(starting)

    def decide():
        if cmds.store.get(MODELS_ID) is not None:
            return []
        return [ModelSettings.create(cmds.context("hub", "the starting providers and the shipped model policy"), starting)]

    return cmds.run(decide, grouped=False)


def _change(cmds: Commands, act: Callable[[ModelSettings], Any]) -> list[int]:
    def decide():
        s = load(cmds)
        act(s)
        return [s]

    return cmds.run(decide)


def add_provider(cmds: Commands, ctx: Context, cfg: dict) -> list[int]:
    return _change(cmds, lambda s: s.add_provider(ctx, cfg))


def edit_provider(cmds: Commands, ctx: Context, pid: str, changes: dict) -> list[int]:
    return _change(cmds, lambda s: s.edit_provider(ctx, pid, changes))


def remove_provider(cmds: Commands, ctx: Context, pid: str) -> list[int]:
    return _change(cmds, lambda s: s.remove_provider(ctx, pid))


def set_policy(cmds: Commands, ctx: Context, changes: dict) -> list[int]:
    return _change(cmds, lambda s: s.set_policy(ctx, changes))


def issue_link(cmds: Commands, ctx: Context, cid: str, role: str, token_sha256: str,
               model: str | None = None, task: str | None = None) -> list[int]:
    def decide():
        policy = load(cmds).policy
        existing = cmds.store.get(link_id(cid))
        return [_issue_link(ctx, existing, policy, cid, role, token_sha256, model, task)]

    return cmds.run(decide)


def revoke_link(cmds: Commands, ctx: Context, cid: str) -> list[int]:
    def decide():
        link: GatewayLink | None = cmds.store.get(link_id(cid))
        if link is None or link.revoked:
            raise Refusal("no_gateway_token", f"agent {cid} has no gateway token", 404)
        link.record(GatewayLink.Revoked, ctx)
        return [link]

    return cmds.run(decide)


def store_price_list(cmds: Commands, ctx: Context, source: str, day: str, prices: dict, digest: str,
                     last_digest: str | None) -> list[int]:
    """Keep a fetched list; one per source and day, and only when it changed since the last one."""
    if digest == last_digest:
        return []

    def decide():
        if cmds.store.get(price_list_id(source, day)) is not None:
            return []
        return [fetched_list(ctx, source, day, prices, digest)]

    return cmds.run(decide)


#: A charger's part of a call's command: (aggregates to commit with the call, charge facts).
ChargeStep = Callable[[Context, int], tuple[list, dict]]


def record_call(cmds: Commands, ctx: Context, call_id: uuid.UUID, fields: dict,
                charge: ChargeStep | None = None) -> list[int]:
    """One model call: its ``ModelCalled`` event and its charge, committed together.

    ``charge(ctx, credits)`` decides the charge on fresh state each attempt and
    returns the aggregates it changed and {"charged", "shortfall", "payer", "entry"}.
    """

    def decide():
        aggs: list = []
        facts = {"charged": 0, "shortfall": 0, "payer": None, "entry": None}
        credits = -(-fields["cost_micro"] // 1_000_000)
        if charge is not None and credits > 0:
            aggs, got = charge(ctx, credits)
            facts.update(got)
        usage: Usage = _record_call(ctx, call_id, **dict(fields, **facts))
        return [*aggs, usage]

    return cmds.run(decide)


__all__ = ["PriceList", "load", "ensure_models", "add_provider", "edit_provider", "remove_provider", "set_policy",
           "issue_link", "revoke_link", "store_price_list", "record_call"]
