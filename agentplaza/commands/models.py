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
from .unit import Commands, Done, Unit


def load(cmds: Commands) -> ModelSettings:
    s = cmds.store.get(MODELS_ID)
    if s is None:
        raise Refusal("no_models", "the models area is not set up yet")
    return s


def settings_in(unit: Unit) -> ModelSettings:
    s = unit.get(MODELS_ID)
    if s is None:
        raise Refusal("no_models", "the models area is not set up yet")
    return s


def ensure_models(cmds: Commands, starting: Iterable[dict]) -> Done[bool]:
    """On a new install the hub starts with the marked providers and the shipped policy."""
    starting = list(starting)

    def decide(unit: Unit) -> bool:
        if unit.get(MODELS_ID) is not None:
            return False
        unit.add(ModelSettings.create(cmds.context("hub", "the starting providers and the shipped model policy"),
                                      starting))
        return True

    return cmds.run(decide, grouped=False)


def _change(cmds: Commands, act: Callable[[ModelSettings], Any]) -> Done[None]:
    def decide(unit: Unit) -> None:
        s = settings_in(unit)
        act(s)
        unit.add(s)

    return cmds.run(decide)


def add_provider(cmds: Commands, ctx: Context, cfg: dict) -> Done[None]:
    return _change(cmds, lambda s: s.add_provider(ctx, cfg))


def edit_provider(cmds: Commands, ctx: Context, pid: str, changes: dict) -> Done[None]:
    return _change(cmds, lambda s: s.edit_provider(ctx, pid, changes))


def remove_provider(cmds: Commands, ctx: Context, pid: str) -> Done[None]:
    return _change(cmds, lambda s: s.remove_provider(ctx, pid))


def set_policy(cmds: Commands, ctx: Context, changes: dict) -> Done[None]:
    return _change(cmds, lambda s: s.set_policy(ctx, changes))


def issue_link(cmds: Commands, ctx: Context, cid: str, role: str, token_sha256: str,
               model: str | None = None, task: str | None = None, route: str = "gateway") -> Done[None]:
    def decide(unit: Unit) -> None:
        policy = settings_in(unit).policy
        unit.add(_issue_link(ctx, unit.get(link_id(cid)), policy, cid, role, token_sha256, model, task, route))

    return cmds.run(decide)


def revoke_link(cmds: Commands, ctx: Context, cid: str) -> Done[None]:
    def decide(unit: Unit) -> None:
        link: GatewayLink | None = unit.get(link_id(cid))
        if link is None or link.revoked:
            raise Refusal("no_gateway_token", f"agent {cid} has no gateway token")
        link.record(GatewayLink.Revoked, ctx)
        unit.add(link)

    return cmds.run(decide)


def store_price_list(cmds: Commands, ctx: Context, source: str, day: str, prices: dict, digest: str,
                     last_digest: str | None) -> Done[bool]:
    """Keep a fetched list; one per source and day, and only when it changed since the last one.
    Its value: whether the list was stored."""
    if digest == last_digest:
        return Done(False, [])

    def decide(unit: Unit) -> bool:
        if unit.get(price_list_id(source, day)) is not None:
            return False
        unit.add(fetched_list(ctx, source, day, prices, digest))
        return True

    return cmds.run(decide)


#: A charger's part of a call's command: decides the charge in the call's unit (adding the accounts it
#: changed) and gives its facts {"charged", "shortfall", "payer", "entry"}. Called as
#: ``charge(unit, ctx, credits)``; a later call of the same unit sees what an earlier one charged.
ChargeStep = Callable[[Unit, Context, int], dict]
#: One call to record: its context, id, fields and charge step.
CallRecord = tuple[Context, uuid.UUID, dict, "ChargeStep | None"]
#: What a call costs in whole credits: its cost in millionths of a credit, rounded up.
MICRO_PER_CREDIT = 1_000_000


def call_recorded(unit: Unit, ctx: Context, call_id: uuid.UUID, fields: dict, charge: ChargeStep | None) -> None:
    """One model call's ``ModelCalled`` event and its charge, added to the unit."""
    facts = {"charged": 0, "shortfall": 0, "payer": None, "entry": None}
    credits = -(-fields["cost_micro"] // MICRO_PER_CREDIT)
    if charge is not None and credits > 0:
        facts.update(charge(unit, ctx, credits))
    usage: Usage = _record_call(ctx, call_id, **dict(fields, **facts))
    unit.add(usage)


def record_call(cmds: Commands, ctx: Context, call_id: uuid.UUID, fields: dict,
                charge: ChargeStep | None = None) -> Done[None]:
    """One model call: its ``ModelCalled`` event and its charge, committed together; the charge is
    decided on fresh state on each attempt."""
    return cmds.run(lambda unit: call_recorded(unit, ctx, call_id, fields, charge))


class _Failed(Exception):
    """One call of a batch could not be decided: the batch starts again without it."""

    def __init__(self, call: CallRecord, error: Exception):
        super().__init__(str(error))
        self.call, self.error = call, error


def record_calls(cmds: Commands, calls: list[CallRecord], on_error: Callable[[uuid.UUID, Exception], None]) -> int:
    """Many model calls, each with its charge, in ONE commit (the gateway's recorder drains its queue so).

    The calls are decided one after another in one unit; a later call's charge sees the
    accounts earlier calls changed.  A call whose decision fails is left out (``on_error``)
    and the batch is decided again without it (its half-made charge is in no account).
    When the commit loses a race (another hub or thread moved an account first), the
    whole batch is decided again on fresh state.  Returns how many calls were recorded.
    """
    calls = list(calls)
    while calls:
        def decide(unit: Unit, batch: list[CallRecord] = calls) -> int:
            for call in batch:
                try:
                    call_recorded(unit, *call)
                except Exception as e:  # noqa: BLE001 - one bad call does not lose the others
                    raise _Failed(call, e) from e
            return len(batch)

        try:
            return cmds.run(decide).value
        except _Failed as f:
            on_error(f.call[1], f.error)
            calls = [c for c in calls if c is not f.call]
    return 0


__all__ = ["PriceList", "load", "settings_in", "ensure_models", "add_provider", "edit_provider", "remove_provider",
           "set_policy", "issue_link", "revoke_link", "store_price_list", "call_recorded", "record_call",
           "record_calls"]
