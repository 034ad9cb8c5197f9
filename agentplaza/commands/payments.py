"""Payments that wait for the owner: the payment tool holds one above its limit as an approval of
kind payment (in the same commit), and approving or denying a held payment goes through that
approval (``approvals.decide``).  A payment held before approvals existed has none, and is decided
on its own."""

from __future__ import annotations

from ..domain import treasury as t
from ..domain.base import Context
from . import approvals, treasury
from .unit import Commands, Done, Unit


def pay(cmds: Commands, ctx: Context, payer: str, payee: str, amount: int, memo: str | None,
        task: str | None = None, approve_over: int = t.DEFAULT_APPROVE_OVER) -> Done[treasury.Outcome]:
    """The payment tool: moves at once at or below ``approve_over``, else is held for approval."""

    def decide(unit: Unit) -> treasury.Outcome:
        books = treasury.books(unit, ctx, [t.wallet_key(payer), t.wallet_key(payee)], [task])
        result = t.pay(books, treasury.plaza_in(unit), payer, payee, amount, memo, task, approve_over)
        if result.status == "held":
            approvals.Maker(unit, ctx).payment(result.payment)
        return treasury.booked(unit, books, result)

    return cmds.run(decide)


def approve_payment(cmds: Commands, ctx: Context, payment_id: str) -> Done[treasury.Outcome]:
    """Approve a held payment: the decision goes through its approval (kind payment)."""
    found = approvals.by_ref(cmds, approvals.payment_ref(payment_id))
    if found is not None:
        return approvals.decide(cmds, ctx, found.number, True)

    def decide(unit: Unit) -> treasury.Outcome:
        p = treasury.payment_of(cmds, payment_id)
        books = treasury.books(unit, ctx, [t.wallet_key(p.payer), t.wallet_key(p.payee)] if p else [],
                                    [p.task] if p else [])
        t.approve_payment(books, treasury.plaza_in(unit), p)
        return treasury.booked(unit, books, p)

    return cmds.run(decide)


def deny_payment(cmds: Commands, ctx: Context, payment_id: str) -> Done[treasury.Outcome]:
    """Deny a held payment: the decision goes through its approval (kind payment)."""
    found = approvals.by_ref(cmds, approvals.payment_ref(payment_id))
    if found is not None:
        return approvals.decide(cmds, ctx, found.number, False)

    def decide(unit: Unit) -> treasury.Outcome:
        books = t.Books(ctx, {})
        return treasury.booked(unit, books, t.deny_payment(books, treasury.payment_of(cmds, payment_id)))

    return cmds.run(decide)
