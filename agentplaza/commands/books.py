"""The treasury's books inside another area's unit of work: what they changed joins the unit, and
the answer shows their entries (tasks fund and settle escrows, approvals move held payments, in
the same commit as their own events)."""

from __future__ import annotations

from typing import Any

from ..domain import treasury as t
from .treasury import Outcome, entry_view, payment_view
from .unit import Unit


def outcome(unit: Unit, books: t.Books, result: Any = None, **detail: Any) -> Outcome:
    """Add what ``books`` changed to ``unit``; the entries, the payment (a held or decided one, or
    a ``PayResult``'s) and ``detail``, as the journal shows them."""
    unit.add(*books.changed())
    out = Outcome(entries=[entry_view(e) for e in books.entries], detail=dict(detail))
    if isinstance(result, t.PayResult):
        out.detail["status"] = result.status
        result = result.payment
    if isinstance(result, t.Payment):
        out.payment = payment_view(result)
    return out
