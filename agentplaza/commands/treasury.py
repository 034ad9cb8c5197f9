"""The treasury's commands: load the accounts an operation needs, decide, commit them together.

Each function here is what another area calls (tasks fund, settle and refund
escrows; the gateway charges model calls; sanctions fine; approvals approve
and deny held payments).  A command runs in one unit of work (``Commands.run``)
and returns ``Done(Outcome, positions)``: every aggregate it changed is
committed in one transaction with optimistic concurrency on each, and the
decision is re-run on fresh state when another writer (another thread, another
hub on the same Postgres) got there first, so the check of a balance or a cap
and the write that relies on it are one atomic step.

Another area composes treasury operations into its own unit: ``books(unit, ...)``
loads the accounts through the unit (so two steps of one commit see each other's
postings), the domain's operations post to them, and ``booked(unit, books, result)``
adds what changed to the unit and gives the ``Outcome``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..domain import treasury as t
from ..domain.base import Context, Refusal
from ..domain.plaza import PLAZA_ID
from .unit import Commands, Done, Look, Unit


@dataclass
class Outcome:
    """What a treasury command did: its entries (as the journal shows them), and the payment or
    other detail it gives back."""

    entries: list[dict] = field(default_factory=list)
    payment: dict | None = None
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"entries": self.entries}
        if self.payment is not None:
            out["payment"] = self.payment
        out.update(self.detail)
        return out


def entry_view(e: t.Entry) -> dict:
    return {
        "id": e.id.hex, "kind": e.kind, "memo": e.memo, "task": e.task, "agents": list(e.agents),
        "postings": dict(e.postings), "shortfall": e.shortfall, "uncollected": e.uncollected, "ref": e.ref,
    }


def payment_view(p: t.Payment) -> dict:
    return {
        "id": p.id.hex, "payer": p.payer, "payee": p.payee, "amount": p.amount, "memo": p.memo,
        "task": p.task, "status": p.status, "approve_over": p.approve_over, "entry_id": p.entry_id,
    }


def outcome_of(books: t.Books, result: Any) -> Outcome:
    """The outcome of a decision on ``books`` whose domain operation gave ``result``."""
    out = Outcome(entries=[entry_view(e) for e in books.entries])
    if isinstance(result, t.Payment):
        out.payment = payment_view(result)
    elif isinstance(result, t.PayResult):
        out.detail["status"] = result.status
        if result.payment is not None:
            out.payment = payment_view(result.payment)
    elif isinstance(result, t.FineResult):
        out.detail.update(levied=result.levied, collected=result.collected, uncollected=result.uncollected)
    elif isinstance(result, dict):
        out.detail.update(result)
    return out


# -- loading the books in a unit ----------------------------------------------------------


def account(unit: Unit, key: str) -> Any:
    """An account of the unit (None when there is none)."""
    return unit.get(t.account_id(key))


def books(unit: Unit, ctx: Context, keys: Iterable[str], tasks: Iterable[str | None] = ()) -> t.Books:
    """The named accounts, and for each task its escrow and its chain's root escrow, loaded through
    the unit: a later step of the same commit sees what an earlier one posted."""
    accounts: dict[str, Any] = {k: account(unit, k) for k in keys}
    for task in tasks:
        if task is None:
            continue
        key = t.escrow_key(task)
        escrow = accounts.get(key) or account(unit, key)
        accounts[key] = escrow
        if escrow is not None and not escrow.is_root:
            root = t.escrow_key(escrow.root)
            accounts[root] = accounts.get(root) or account(unit, root)
    return t.Books(ctx, accounts)


def booked(unit: Unit, books: t.Books, result: Any = None, **detail: Any) -> Outcome:
    """What ``books`` changed goes into the unit; the outcome of the decision (with ``detail``)."""
    unit.add(*books.changed())
    out = outcome_of(books, result)
    out.detail.update(detail)
    return out


def plaza_in(unit: Unit) -> Any:
    return unit.get(PLAZA_ID)


def _decided(cmds: Commands, decide: Callable[[Unit], tuple[t.Books, Any]]) -> Done[Outcome]:
    """Run ``decide`` (the books it posted to, and its result) in a unit; its outcome."""
    return cmds.run(lambda unit: booked(unit, *decide(unit)))


# -- genesis ----------------------------------------------------------------------------


def genesis(unit: Unit, ctx: Context) -> None:
    """The budget and its genesis Mint, when the plaza has no budget yet (else nothing)."""
    if account(unit, t.BUDGET) is not None:
        return
    budget = t.open_budget(ctx)
    b = t.Books(ctx, {t.BUDGET: budget})
    t.genesis(b)
    unit.add(*b.changed())


# -- accounts ---------------------------------------------------------------------------


def wallet_opened(unit: Unit, ctx: Context, cid: str, name: str, role: str) -> dict:
    """An agent's new wallet, at zero, added to the unit (the agents area opens one on spawn)."""
    key = t.wallet_key(str(cid).strip())
    unit.add(t.open_wallet(ctx, account(unit, key), str(cid), name, role))
    return {"wallet": {"cid": str(cid).strip(), "name": name.strip(), "role": role.strip(), "balance": 0}}


def open_wallet(cmds: Commands, ctx: Context, cid: str, name: str, role: str) -> Done[Outcome]:
    """Open an agent's wallet (the agents area calls this when it spawns one)."""
    return cmds.run(lambda unit: Outcome(detail=wallet_opened(unit, ctx, cid, name, role)))


def mint(cmds: Commands, ctx: Context, amount: int, memo: str | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.BUDGET])
        t.mint(b, amount, memo)
        return b, None

    return _decided(cmds, decide)


# -- tasks ---------------------------------------------------------------------------------


def fund_task_escrow(cmds: Commands, ctx: Context, task: str, amount: int | None, *, parent: str | None = None,
                     through_tools: bool = False, memo: str | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.BUDGET], [task, parent])
        t.fund_task_escrow(b, task, amount, parent=parent, through_tools=through_tools, memo=memo)
        return b, None

    return _decided(cmds, decide)


def settle_task(cmds: Commands, ctx: Context, task: str, passed: bool, *, worker: str | None = None,
                metered_cost: int | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        keys = [t.BUDGET] + ([t.wallet_key(worker)] if worker is not None else [])
        b = books(unit, ctx, keys, [task])
        t.settle_task(b, plaza_in(unit), task, passed, worker=worker, metered_cost=metered_cost)
        return b, None

    return _decided(cmds, decide)


def refund_task(cmds: Commands, ctx: Context, task: str, outcome: str = "withdrawn") -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.BUDGET], [task])
        t.refund_task(b, task, outcome)
        return b, None

    return _decided(cmds, decide)


# -- model calls ---------------------------------------------------------------------------


def charge_own_loop(cmds: Commands, ctx: Context, cid: str, task: str | None, input_tokens: int, output_tokens: int,
                    price: tuple[int, int] | None = None, ref: str | None = None) -> Done[Outcome]:
    """A call on the agent's own loop; raises Refusal("budget_exhausted") when the escrow cannot cover it."""

    def decide(unit: Unit):
        b = books(unit, ctx, [], [task])
        t.charge_own_loop(b, cid, task, input_tokens, output_tokens, price, ref)
        return b, None

    return _decided(cmds, decide)


def check_gateway_call(cmds: Commands, cid: str, task: str | None) -> dict:
    """Before a gateway call: who would pay, or a refusal (held plaza, payer with nothing), confirmed
    on fresh state."""
    ctx = cmds.context("hub")

    def decide(unit: Unit) -> dict:
        payer = t.check_gateway_call(books(unit, ctx, [t.wallet_key(cid)], [task]), plaza_in(unit), cid, task)
        return {"payer": payer.key, "holds": payer.balance}

    return cmds.run(decide).value


def charge_gateway(cmds: Commands, ctx: Context, cid: str, task: str | None, *, reported_cost: int | None = None,
                   input_tokens: int = 0, output_tokens: int = 0, price: tuple[int, int] | None = None,
                   ref: str | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.wallet_key(cid)], [task])
        e = t.charge_gateway(b, cid, task, reported_cost=reported_cost, input_tokens=input_tokens,
                             output_tokens=output_tokens, price=price, ref=ref)
        return b, {"shortfall": e.shortfall}

    return _decided(cmds, decide)


def quick_check_gateway_call(cmds: Commands, cid: str, task: str | None) -> None:
    """``check_gateway_call`` on the store's cached accounts, without a command: cheap enough for the
    event loop.  A refusal here is only a hint; confirm it with ``check_gateway_call`` (fresh state)."""
    unit = Look(cmds.store)
    t.check_gateway_call(books(unit, cmds.context("hub"), [t.wallet_key(cid)], [task]), plaza_in(unit), cid, task)


#: What a charge of a model call gives back when nothing is charged.
NO_CHARGE = {"charged": 0, "shortfall": 0, "payer": None, "entry": None}


def gateway_charged(unit: Unit, ctx: Context, cid: str, task: str | None, cost: int,
                    ref: str | None = None) -> dict:
    """A gateway call's charge, decided in the caller's unit (committed with the call's own event).

    ``cost`` is the provider's reported cost, else the price's estimate (whole
    credits).  Charged to the task's escrow while it holds money, else to the
    wallet; a partial payer pays what it has and the rest is the shortfall.
    Returns {"charged", "shortfall", "payer", "entry"}.
    """
    b = books(unit, ctx, [t.wallet_key(cid)], [task])
    payer = t.gateway_payer(b, cid, task).key
    e = t.charge_gateway(b, cid, task, reported_cost=cost, ref=ref)
    unit.add(*b.changed())
    return {"charged": -e.postings.get(payer, 0), "shortfall": e.shortfall, "payer": payer, "entry": e.id.hex}


def quick_check_own_loop_call(cmds: Commands, task: str | None) -> None:
    """``check_own_loop_call`` on the store's cached accounts (cheap, for the event loop); a refusal is
    confirmed with ``check_own_loop_call`` on fresh state."""
    unit = Look(cmds.store)
    t.check_own_loop_call(books(unit, cmds.context("hub"), [], [task]), plaza_in(unit), task)


def check_own_loop_call(cmds: Commands, task: str | None) -> None:
    ctx = cmds.context("hub")
    cmds.run(lambda unit: t.check_own_loop_call(books(unit, ctx, [], [task]), plaza_in(unit), task))


def own_loop_charged(unit: Unit, ctx: Context, cid: str, task: str | None, input_tokens: int,
                     output_tokens: int, price: tuple[int, int] | None, ref: str | None = None) -> dict:
    """A call on the agent's own loop, charged (Spend) in the caller's unit.  Raises
    Refusal("budget_exhausted") when the escrow cannot cover it; no task: nothing charged.
    Returns {"charged", "shortfall", "payer", "entry"}."""
    b = books(unit, ctx, [], [task])
    e = t.charge_own_loop(b, cid, task, input_tokens, output_tokens, price, ref)
    if e is None:
        return dict(NO_CHARGE)
    unit.add(*b.changed())
    payer = t.escrow_key(task)
    return {"charged": -e.postings.get(payer, 0), "shortfall": 0, "payer": payer, "entry": e.id.hex}


def charge_model_call(cmds: Commands, ctx: Context, cid: str, task: str | None, *, route: str = "own_loop",
                      **kw: Any) -> Done[Outcome]:
    """One entry point for both routes: ``route`` is "own_loop" or "gateway"."""
    if route == "own_loop":
        return charge_own_loop(cmds, ctx, cid, task, kw.get("input_tokens", 0), kw.get("output_tokens", 0),
                               kw.get("price"), kw.get("ref"))
    if route == "gateway":
        return charge_gateway(cmds, ctx, cid, task, **kw)
    raise Refusal("invalid_request", "route is own_loop or gateway")


# -- payments ----------------------------------------------------------------------------------


def transfer(cmds: Commands, ctx: Context, payer: str, payee: str, amount: int, memo: str | None,
             task: str | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.wallet_key(payer), t.wallet_key(payee)], [task])
        t.transfer(b, plaza_in(unit), payer, payee, amount, memo, task)
        return b, None

    return _decided(cmds, decide)


def bonus(cmds: Commands, ctx: Context, payer: str, payee: str, amount: int, task: str,
          memo: str | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.wallet_key(payer), t.wallet_key(payee)], [task])
        t.bonus(b, plaza_in(unit), payer, payee, amount, task, memo)
        return b, None

    return _decided(cmds, decide)


def _payment(cmds: Commands, payment_id: str) -> t.Payment | None:
    try:
        pid = uuid.UUID(hex=payment_id)
    except (ValueError, TypeError):
        raise Refusal("no_payment", f"no payment {payment_id!r}") from None
    found = cmds.store.get(pid)
    return found if isinstance(found, t.Payment) else None


def payment_of(cmds: Commands, payment_id: str) -> t.Payment | None:
    return _payment(cmds, payment_id)


# -- fines ----------------------------------------------------------------------------------------


def sanction_fine(cmds: Commands, ctx: Context, cid: str, amount: int, memo: str | None,
                  ref: str | None = None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.wallet_key(cid)])
        return b, t.sanction_fine(b, cid, amount, memo, ref)

    return _decided(cmds, decide)


def manual_fine(cmds: Commands, ctx: Context, cid: str, amount: int, memo: str | None) -> Done[Outcome]:
    def decide(unit: Unit):
        b = books(unit, ctx, [t.wallet_key(cid)])
        t.manual_fine(b, cid, amount, memo)
        return b, None

    return _decided(cmds, decide)


def fine(cmds: Commands, ctx: Context, cid: str, amount: int, memo: str | None, *, sanction: bool = False,
         ref: str | None = None) -> Done[Outcome]:
    return sanction_fine(cmds, ctx, cid, amount, memo, ref) if sanction else manual_fine(cmds, ctx, cid, amount, memo)


# -- reading the aggregates (for checks, not screens) ------------------------------------------------


def wallet(cmds: Commands, cid: str) -> t.Wallet | None:
    return cmds.store.get(t.account_id(t.wallet_key(cid)))


def escrow(cmds: Commands, task: str) -> t.Escrow | None:
    return cmds.store.get(t.account_id(t.escrow_key(task)))


def budget(cmds: Commands) -> t.Budget | None:
    return cmds.store.get(t.account_id(t.BUDGET))
