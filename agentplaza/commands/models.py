"""The models area's commands: providers, the policy, gateway links, price lists, model calls."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from ..domain.base import Context, Refusal
from ..domain.models import (
    MODELS_ID,
    GatewayLink,
    ModelSettings,
    PriceList,
    Usage,
    fetched_list,
    link_id,
    price_list_id,
)
from ..domain.models import (
    issue_link as _issue_link,
)
from ..domain.models import (
    record_call as _record_call,
)
from ..events.committer import CommitConflict
from .unit import Commands


def load(cmds: Commands) -> ModelSettings:
    s = cmds.store.get(MODELS_ID)
    if s is None:
        raise Refusal("no_models", "the models area is not set up yet")
    return s


def ensure_models(cmds: Commands, starting: Iterable[dict]) -> list[int]:
    """On a new install the hub starts with the marked providers and the shipped policy."""
    starting = list(starting)

    def decide():
        if cmds.store.get(MODELS_ID) is not None:
            return []
        return [ModelSettings.create(cmds.context("hub", "the starting providers and the shipped model policy"), starting)]

    return cmds.run_aggregates(decide, grouped=False)


def _change(cmds: Commands, act: Callable[[ModelSettings], Any]) -> list[int]:
    def decide():
        s = load(cmds)
        act(s)
        return [s]

    return cmds.run_aggregates(decide)


def add_provider(cmds: Commands, ctx: Context, cfg: dict) -> list[int]:
    return _change(cmds, lambda s: s.add_provider(ctx, cfg))


def edit_provider(cmds: Commands, ctx: Context, pid: str, changes: dict) -> list[int]:
    return _change(cmds, lambda s: s.edit_provider(ctx, pid, changes))


def remove_provider(cmds: Commands, ctx: Context, pid: str) -> list[int]:
    return _change(cmds, lambda s: s.remove_provider(ctx, pid))


def set_policy(cmds: Commands, ctx: Context, changes: dict) -> list[int]:
    return _change(cmds, lambda s: s.set_policy(ctx, changes))


def issue_link(cmds: Commands, ctx: Context, cid: str, role: str, token_sha256: str,
               model: str | None = None, task: str | None = None, route: str = "gateway") -> list[int]:
    def decide():
        policy = load(cmds).policy
        existing = cmds.store.get(link_id(cid))
        return [_issue_link(ctx, existing, policy, cid, role, token_sha256, model, task, route)]

    return cmds.run_aggregates(decide)


def revoke_link(cmds: Commands, ctx: Context, cid: str) -> list[int]:
    def decide():
        link: GatewayLink | None = cmds.store.get(link_id(cid))
        if link is None or link.revoked:
            raise Refusal("no_gateway_token", f"agent {cid} has no gateway token")
        link.record(GatewayLink.Revoked, ctx)
        return [link]

    return cmds.run_aggregates(decide)


def store_price_list(cmds: Commands, ctx: Context, source: str, day: str, prices: dict, digest: str,
                     last_digest: str | None) -> list[int]:
    """Keep a fetched list; one per source and day, and only when it changed since the last one."""
    if digest == last_digest:
        return []

    def decide():
        if cmds.store.get(price_list_id(source, day)) is not None:
            return []
        return [fetched_list(ctx, source, day, prices, digest)]

    return cmds.run_aggregates(decide)


#: A charger's part of a call's command: (aggregates to commit with the call, charge facts).
#: Called as ``charge(ctx, credits, loaded)``; ``loaded`` holds the accounts earlier calls of the
#: same commit changed (None when the call is committed alone).
ChargeStep = Callable[[Context, int, "dict | None"], tuple[list, dict]]
#: One call to record: its context, id, fields and charge step.
CallRecord = tuple[Context, uuid.UUID, dict, "ChargeStep | None"]
#: What a call costs in whole credits: its cost in millionths of a credit, rounded up.
MICRO_PER_CREDIT = 1_000_000


def _decide_call(ctx: Context, call_id: uuid.UUID, fields: dict, charge: ChargeStep | None,
                 loaded: dict | None) -> list:
    aggs: list = []
    facts = {"charged": 0, "shortfall": 0, "payer": None, "entry": None}
    credits = -(-fields["cost_micro"] // MICRO_PER_CREDIT)
    if charge is not None and credits > 0:
        aggs, got = charge(ctx, credits, loaded)
        facts.update(got)
    usage: Usage = _record_call(ctx, call_id, **dict(fields, **facts))
    return [*aggs, usage]


def record_call(cmds: Commands, ctx: Context, call_id: uuid.UUID, fields: dict,
                charge: ChargeStep | None = None) -> list[int]:
    """One model call: its ``ModelCalled`` event and its charge, committed together.

    ``charge(ctx, credits, None)`` decides the charge on fresh state each attempt and
    returns the aggregates it changed and {"charged", "shortfall", "payer", "entry"}.
    """
    return cmds.run_aggregates(lambda: _decide_call(ctx, call_id, fields, charge, None))


def record_calls(cmds: Commands, calls: list[CallRecord], on_error: Callable[[uuid.UUID, Exception], None]) -> int:
    """Many model calls, each with its charge, in ONE commit (the gateway's recorder drains its queue so).

    The calls are decided one after another; a later call's charge sees the
    accounts earlier calls changed.  A call whose decision fails is left out
    (``on_error``).  When the commit loses a race (another hub or thread moved
    an account first), each call is recorded alone, on fresh state.
    Returns how many calls were recorded.
    """
    loaded: dict = {}
    aggregates: dict = {}
    kept: list[CallRecord] = []
    for call in calls:
        ctx, call_id, fields, charge = call
        try:
            for a in _decide_call(ctx, call_id, fields, charge, loaded):
                aggregates[a.id] = a
        except Exception as e:  # noqa: BLE001 - one bad call does not lose the others
            on_error(call_id, e)
            # its half-made charge may have touched shared accounts: start the batch again without it
            return _without(cmds, calls, call, on_error)
        kept.append(call)
    if not aggregates:
        return 0
    try:
        cmds.store.commit(*aggregates.values())
        return len(kept)
    except CommitConflict:
        done = 0
        for ctx, call_id, fields, charge in kept:
            try:
                record_call(cmds, ctx, call_id, fields, charge)
                done += 1
            except Exception as e:  # noqa: BLE001
                on_error(call_id, e)
        return done


def _without(cmds: Commands, calls: list[CallRecord], bad: CallRecord, on_error) -> int:
    rest = [c for c in calls if c is not bad]  # every account was a private copy: nothing to undo
    return record_calls(cmds, rest, on_error) if rest else 0


__all__ = ["PriceList", "load", "ensure_models", "add_provider", "edit_provider", "remove_provider", "set_policy",
           "issue_link", "revoke_link", "store_price_list", "record_call",
           "record_calls"]
