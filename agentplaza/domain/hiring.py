"""Hiring and paying: an agent hires a contact, and the owner's setting for payments.

- ``Hire`` (one per hired task, id from the task's number): who hired whom for which task, and the
  bonus the hiring agent offered from its own wallet; what became of the bonus.
- ``PlazaSettings`` (one): the owner's settings agents' money and outreach follow; ``approve_over``
  under payments ("Its default is 500 credits, so a payment of 501 or more waits for you. Setting it
  to 0 makes every payment wait."), and ``outreach_minutes`` under society (``domain.outreach``:
  "By default it does this at most once every 20 minutes ... 0 turns outreach off").

Rules of a hire, in the order ``check_hire`` applies them (the guide, "The society"):

1. An agent hires another agent, never itself (``hire_self``).
2. "The orchestrator cannot be hired" (``cannot_hire_orchestrator``).
3. It hires a *contact*: an agent it has worked or talked with (``not_a_contact``).
4. The bonus is a whole number of credits from 0 to ``DAILY_SEND_LIMIT`` (an agent can never send
   more in a day), and the hiring agent's wallet holds it now (``insufficient_funds``).

The hire becomes a task for the contact, funded from the plaza budget like any task
(``commands.hiring``). The bonus is "paid only if the work passes": in the review's own commit,
under the daily limit on transfers, payments and bonuses together, the wallet and the chain margin
cap (``treasury.bonus``); a bonus that cannot be paid then is recorded as not paid, with why, and
the pass stands.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from . import outreach as o
from . import treasury as t
from .base import Context, PlazaAggregate, Refusal, fixed_id

SETTINGS_ID = fixed_id("plaza-settings")
#: "Its default is 500 credits" (``treasury.DEFAULT_APPROVE_OVER``); the most it may be set to.
DEFAULT_APPROVE_OVER = t.DEFAULT_APPROVE_OVER
MAX_APPROVE_OVER = t.MAX_MINT
#: A bonus is at most what an agent may send in a day ("at most 1,000 credits per UTC day").
MAX_BONUS = t.DAILY_SEND_LIMIT
#: What a hire's bonus became: offered (waiting for the verdict), paid, unpaid (the pass came and it
#: could not be paid), none (no bonus, or the work did not pass).
BONUS_STATES = ("offered", "paid", "unpaid", "none")


def hire_id(task: str) -> uuid.UUID:
    return fixed_id(f"hire:{task}")


class PlazaSettings(PlazaAggregate):
    family = "settings"

    class Created(PlazaAggregate.Created):
        pass

    class PaymentsSet(PlazaAggregate.Event):
        approve_over: int

        def apply(self, s: PlazaSettings) -> None:
            s.approve_over = self.approve_over

    class OutreachSet(PlazaAggregate.Event):
        outreach_minutes: int

        def apply(self, s: PlazaSettings) -> None:
            s.outreach_minutes = self.outreach_minutes

    def __init__(self) -> None:
        self.approve_over = DEFAULT_APPROVE_OVER
        self.outreach_minutes = o.DEFAULT_OUTREACH_MINUTES

    @classmethod
    def open(cls, ctx: Context) -> PlazaSettings:
        return cls.start(ctx, id=SETTINGS_ID)

    def set_approve_over(self, ctx: Context, value: Any) -> None:
        _owner(ctx)
        if type(value) is not int or not 0 <= value <= MAX_APPROVE_OVER:
            raise Refusal("invalid_value", f"payments.approve_over is a whole number of credits from 0 to "
                                           f"{MAX_APPROVE_OVER:,} (0 makes every payment wait)")
        if value == self.approve_over:
            raise Refusal("no_change", f"payments.approve_over is already {value}")
        self.record(self.PaymentsSet, ctx, approve_over=value)

    def set_outreach_minutes(self, ctx: Context, value: Any) -> None:
        _owner(ctx)
        o.check_minutes(value)
        if value == getattr(self, "outreach_minutes", o.DEFAULT_OUTREACH_MINUTES):
            raise Refusal("no_change", f"society.outreach_minutes is already {value}")
        self.record(self.OutreachSet, ctx, outreach_minutes=value)

    def view(self) -> dict:
        return {"payments": {"approve_over": self.approve_over},
                "society": {"outreach_minutes": getattr(self, "outreach_minutes", o.DEFAULT_OUTREACH_MINUTES)}}


def _owner(ctx: Context) -> None:
    if ctx.actor != "owner":
        raise Refusal("owner_only", "only the owner changes the plaza's settings")


def outreach_minutes(get: Callable[[uuid.UUID], Any]) -> int:
    """The owner's ``society.outreach_minutes`` (the default until the owner sets it)."""
    s = get(SETTINGS_ID)
    return getattr(s, "outreach_minutes", o.DEFAULT_OUTREACH_MINUTES) if isinstance(s, PlazaSettings) \
        else o.DEFAULT_OUTREACH_MINUTES


def approve_over(get: Callable[[uuid.UUID], Any]) -> int:
    """The owner's ``payments.approve_over`` (the default until the owner sets it)."""
    s = get(SETTINGS_ID)
    return s.approve_over if isinstance(s, PlazaSettings) else DEFAULT_APPROVE_OVER


def default_settings() -> dict:
    return {"payments": {"approve_over": DEFAULT_APPROVE_OVER},
            "society": {"outreach_minutes": o.DEFAULT_OUTREACH_MINUTES}}


def check_hire(hirer: int, contact: int, contact_tier: str, is_contact: bool, bonus: Any,
               wallet_balance: int | None) -> int:
    """The hire's checks before anything is made; the bonus as a whole number of credits."""
    if hirer == contact:
        raise Refusal("hire_self", "an agent hires another agent, never itself")
    if contact_tier == "orchestrator":
        raise Refusal("cannot_hire_orchestrator", "the orchestrator cannot be hired")
    if not is_contact:
        raise Refusal("not_a_contact", f"agent {contact} is not a contact of agent {hirer}: hire an agent you have "
                                       "worked or talked with")
    bonus = 0 if bonus is None else bonus
    if type(bonus) is not int or not 0 <= bonus <= MAX_BONUS:
        raise Refusal("invalid_amount", f"a bonus is a whole number of credits from 0 to {MAX_BONUS:,} (the most an "
                                        "agent can send in a day)")
    if bonus and (wallet_balance or 0) < bonus:
        raise Refusal("insufficient_funds", f"the wallet of agent {hirer} holds {wallet_balance or 0} credits and "
                                            f"cannot cover a bonus of {bonus}")
    return bonus


class Hire(PlazaAggregate):
    family = "hires"

    class Created(PlazaAggregate.Created):
        task: str
        hirer: int
        contact: int
        bonus: int

    class BonusPaid(PlazaAggregate.Event):
        entry_id: str

        def apply(self, h: Hire) -> None:
            h.bonus_state = "paid"

    class BonusUnpaid(PlazaAggregate.Event):
        code: str
        why: str

        def apply(self, h: Hire) -> None:
            h.bonus_state = "unpaid"

    def __init__(self, task: str, hirer: int, contact: int, bonus: int) -> None:
        self.task, self.hirer, self.contact, self.bonus = task, hirer, contact, bonus
        self.bonus_state = "offered" if bonus else "none"

    @classmethod
    def make(cls, ctx: Context, task: str, hirer: int, contact: int, bonus: int) -> Hire:
        return cls.start(ctx, id=hire_id(task), task=task, hirer=hirer, contact=contact, bonus=bonus)

    def view(self) -> dict:
        return {"task": self.task, "hirer": self.hirer, "contact": self.contact, "bonus": self.bonus,
                "bonus_state": self.bonus_state}


def pay_bonus(books: t.Books, plaza: Any, hire: Hire) -> t.Entry | None:
    """The work passed: the bonus from the hiring agent's wallet to the contact, or recorded as not paid
    (the daily limit, the wallet, the chain margin cap). ``treasury.bonus`` checks everything before it
    records an event, so a refusal leaves the books as they were."""
    if hire.bonus_state != "offered":
        return None
    try:
        entry = t.bonus(books, plaza, str(hire.hirer), str(hire.contact), hire.bonus, hire.task,
                        f"bonus for task {hire.task}, hired by agent {hire.hirer}")
    except Refusal as r:
        hire.record(Hire.BonusUnpaid, books.ctx, code=r.code, why=r.message[:500])
        books.add(hire)
        return None
    hire.record(Hire.BonusPaid, books.ctx, entry_id=entry.id.hex)
    books.add(hire)
    return entry
