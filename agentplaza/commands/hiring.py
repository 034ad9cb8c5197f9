"""Hiring and paying: ``plaza_hire`` (a hire becomes a task for the contact, in one commit), the payment
tool ``plaza_pay`` under the owner's ``payments.approve_over``, and the owner's settings.

A hire is one commit: the task is created and funded from the plaza budget like any task, the contact
takes it at once (as if assigned), and the ``Hire`` records the bonus; when the contact cannot take it
now (offline, or holding another task) nothing is made. The bonus moves in the review's commit
(``commands.tasks.review`` through ``domain.hiring.pay_bonus``).
"""

from __future__ import annotations

from ..domain import hiring as h
from ..domain import treasury as t
from ..domain.base import Context
from ..domain.names import check_cid
from ..domain.plaza import require_running
from ..domain.society import bond_id
from ..domain.tasks import Worker, worker_id
from . import payments, tasks, treasury
from .agents import agent_in
from .unit import Commands, Done, Unit


def hire(cmds: Commands, ctx: Context, hirer: int, contact: int, title: str, acceptance: str, *,
         details: str = "", budget: int | None = None, bonus: int | None = None) -> Done[dict]:
    """Agent ``hirer`` hires its contact ``contact``: a task for it, funded like any task, with an optional
    bonus from the hirer's wallet paid only if the work passes."""

    def decide(unit: Unit) -> dict:
        require_running(unit.get)
        them = agent_in(unit, contact)
        them._not_retired("be hired")
        wallet = treasury.account(unit, t.wallet_key(hirer))
        amount = h.check_hire(hirer, contact, them.tier, unit.get(bond_id(hirer, contact)) is not None, bonus,
                              wallet.balance if wallet is not None else None)
        note = f"Hired by agent {hirer}" + (f", with a bonus of {amount} credits if the work passes" if amount else "")
        task = tasks.create_in(unit, ctx, title, acceptance, budget, details=(f"{details}\n\n" if details else "")
                               + note + ".", role=them.role)
        key = str(check_cid(str(contact)))
        w = unit.get(worker_id(key))
        if w is None:  # an agent the scheduler has not seen yet is taken as idle, as for a claim
            w = Worker.join(ctx, key, them.role, "worker")
            w.available(ctx, them.role, "worker")
        task.claim(ctx, key, them.role, "hired")
        w.take(ctx, task.number, "task")
        made = h.Hire.make(ctx, task.number, hirer, contact, amount)
        unit.add(task, w, made)
        return {**tasks.view(task), "hire": made.view()}

    return cmds.run(decide)


def transfer(cmds: Commands, ctx: Context, payer: int, payee: int, amount: int, memo: str | None) -> Done[dict]:
    """The payment tool: at or below the owner's ``payments.approve_over`` the credits move at once;
    above it the payment waits in Approvals (the daily limit still applies when it is approved)."""
    over = h.approve_over(cmds.store.get)
    out = payments.pay(cmds, ctx, str(payer), str(payee), amount, memo, approve_over=over)
    return Done({**out.value.as_dict(), "approve_over": over}, out.positions)


def settings(cmds: Commands) -> dict:
    s = cmds.store.get(h.SETTINGS_ID)
    return s.view() if isinstance(s, h.PlazaSettings) else h.default_settings()


def set_approve_over(cmds: Commands, ctx: Context, value: int) -> Done[dict]:
    """The owner's ``payments.approve_over``."""

    def decide(unit: Unit) -> dict:
        s = unit.get(h.SETTINGS_ID) or h.PlazaSettings.open(ctx)
        s.set_approve_over(ctx, value)
        unit.add(s)
        return s.view()

    return cmds.run(decide)


def set_outreach_minutes(cmds: Commands, ctx: Context, value: int) -> Done[dict]:
    """The owner's ``society.outreach_minutes`` (0 turns outreach off)."""

    def decide(unit: Unit) -> dict:
        s = unit.get(h.SETTINGS_ID) or h.PlazaSettings.open(ctx)
        s.set_outreach_minutes(ctx, value)
        unit.add(s)
        return s.view()

    return cmds.run(decide)
