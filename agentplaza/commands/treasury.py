"""The treasury's commands: load the accounts an operation needs, decide, commit them together.

Each function here is what another area calls (tasks fund, settle and refund
escrows; the gateway charges model calls; sanctions fine; approvals approve
and deny held payments).  Every one commits all the aggregates it changed in
one transaction with optimistic concurrency on each, and is retried on fresh
state when another writer (another thread, another hub on the same Postgres)
got there first: the check of a balance or a cap and the write that relies on
it are one atomic step.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..domain import treasury as t
from ..domain.base import Context, Refusal
from ..domain.plaza import PLAZA_ID
from .unit import Commands


@dataclass
class Outcome:
    """What a treasury command did: its entries (as the journal shows them) and positions."""

    positions: list[int] = field(default_factory=list)
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


def _load(cmds: Commands, key: str, loaded: dict | None = None) -> Any:
    if loaded is not None and key in loaded:
        return loaded[key]
    return cmds.store.get(t.account_id(key))


def _books(cmds: Commands, ctx: Context, keys: Iterable[str], tasks: Iterable[str | None] = (),
           loaded: dict | None = None) -> t.Books:
    """Load the named accounts, and for each task its escrow and its chain's root escrow.

    ``loaded``: accounts already changed (not yet committed) by earlier steps of
    the same commit, used instead of the store's copies.
    """
    accounts: dict[str, Any] = {}
    for k in keys:
        accounts[k] = _load(cmds, k, loaded)
    for task in tasks:
        if task is None:
            continue
        key = t.escrow_key(task)
        escrow = accounts.get(key) or _load(cmds, key, loaded)
        accounts[key] = escrow
        if escrow is not None and not escrow.is_root:
            root = t.escrow_key(escrow.root)
            accounts[root] = accounts.get(root) or _load(cmds, root, loaded)
    return t.Books(ctx, accounts)


def load_books(cmds: Commands, ctx: Context, keys: Iterable[str], tasks: Iterable[str | None] = ()) -> t.Books:
    """The books another area composes into its own command (tasks fund and settle escrows in the
    same commit as the task's own event; sanctions fine in the same commit as the offence)."""
    return _books(cmds, ctx, keys, tasks)


def plaza(cmds: Commands) -> Any:
    return cmds.store.get(PLAZA_ID)


def _plaza(cmds: Commands) -> Any:
    return cmds.store.get(PLAZA_ID)


def run_books(cmds: Commands, decide: Callable[[], tuple[t.Books, Any]]) -> Outcome:
    """Run another area's decision that composes treasury operations (returns the books, a result)."""
    return _run(cmds, decide)


def _run(cmds: Commands, decide: Callable[[], tuple[t.Books, Any]]) -> Outcome:
    """Run ``decide`` (returns the books and a result) as one command; collect its outcome."""
    out = Outcome()

    def attempt() -> list:
        books, result = decide()
        out.entries = [entry_view(e) for e in books.entries]
        out.payment, out.detail = None, {}
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
        return books.changed()

    out.positions = cmds.run_aggregates(attempt)
    return out


# -- genesis ----------------------------------------------------------------------------


def genesis_aggregates(cmds: Commands, ctx: Context) -> list:
    """The budget and its genesis Mint, when the plaza has no budget yet (else nothing)."""
    if _load(cmds, t.BUDGET) is not None:
        return []
    budget = t.open_budget(ctx)
    books = t.Books(ctx, {t.BUDGET: budget})
    t.genesis(books)
    return books.changed()


# -- accounts ---------------------------------------------------------------------------


def open_wallet(cmds: Commands, ctx: Context, cid: str, name: str, role: str) -> Outcome:
    """Open an agent's wallet (the agents area calls this when it spawns one)."""

    def decide():
        key = t.wallet_key(str(cid).strip())
        books = t.Books(ctx, {})
        books.add(t.open_wallet(ctx, _load(cmds, key), str(cid), name, role))
        return books, {"wallet": {"cid": str(cid).strip(), "name": name.strip(), "role": role.strip(), "balance": 0}}

    return _run(cmds, decide)


def mint(cmds: Commands, ctx: Context, amount: int, memo: str | None = None) -> Outcome:
    def decide():
        books = _books(cmds, ctx, [t.BUDGET])
        t.mint(books, amount, memo)
        return books, None

    return _run(cmds, decide)


# -- tasks ---------------------------------------------------------------------------------


def fund_task_escrow(cmds: Commands, ctx: Context, task: str, amount: int | None, *, parent: str | None = None,
                     through_tools: bool = False, memo: str | None = None) -> Outcome:
    def decide():
        books = _books(cmds, ctx, [t.BUDGET], [task, parent])
        t.fund_task_escrow(books, task, amount, parent=parent, through_tools=through_tools, memo=memo)
        return books, None

    return _run(cmds, decide)


def settle_task(cmds: Commands, ctx: Context, task: str, passed: bool, *, worker: str | None = None,
                metered_cost: int | None = None) -> Outcome:
    def decide():
        keys = [t.BUDGET] + ([t.wallet_key(worker)] if worker is not None else [])
        books = _books(cmds, ctx, keys, [task])
        t.settle_task(books, _plaza(cmds), task, passed, worker=worker, metered_cost=metered_cost)
        return books, None

    return _run(cmds, decide)


def refund_task(cmds: Commands, ctx: Context, task: str, outcome: str = "withdrawn") -> Outcome:
    def decide():
        books = _books(cmds, ctx, [t.BUDGET], [task])
        t.refund_task(books, task, outcome)
        return books, None

    return _run(cmds, decide)


# -- model calls ---------------------------------------------------------------------------


def charge_own_loop(cmds: Commands, ctx: Context, cid: str, task: str | None, input_tokens: int, output_tokens: int,
                    price: tuple[int, int] | None = None, ref: str | None = None) -> Outcome:
    """A call on the agent's own loop; raises Refusal("budget_exhausted") when the escrow cannot cover it."""

    def decide():
        books = _books(cmds, ctx, [], [task])
        t.charge_own_loop(books, cid, task, input_tokens, output_tokens, price, ref)
        return books, None

    return _run(cmds, decide)


def check_gateway_call(cmds: Commands, cid: str, task: str | None) -> dict:
    """Before a gateway call: who would pay, or a refusal (held plaza, payer with nothing)."""
    ctx = cmds.context("hub")
    found: dict = {}

    def decide():
        books = _books(cmds, ctx, [t.wallet_key(cid)], [task])
        payer = t.check_gateway_call(books, _plaza(cmds), cid, task)
        found.update(payer=payer.key, holds=payer.balance)
        return []

    cmds.run_aggregates(decide)
    return found


def charge_gateway(cmds: Commands, ctx: Context, cid: str, task: str | None, *, reported_cost: int | None = None,
                   input_tokens: int = 0, output_tokens: int = 0, price: tuple[int, int] | None = None,
                   ref: str | None = None) -> Outcome:
    def decide():
        books = _books(cmds, ctx, [t.wallet_key(cid)], [task])
        e = t.charge_gateway(books, cid, task, reported_cost=reported_cost, input_tokens=input_tokens,
                             output_tokens=output_tokens, price=price, ref=ref)
        return books, {"shortfall": e.shortfall}

    return _run(cmds, decide)


def quick_check_gateway_call(cmds: Commands, cid: str, task: str | None) -> None:
    """``check_gateway_call`` on the store's cached accounts, without a command: cheap enough for the
    event loop.  A refusal here is only a hint; confirm it with ``check_gateway_call`` (fresh state)."""
    books = _books(cmds, cmds.context("hub"), [t.wallet_key(cid)], [task])
    t.check_gateway_call(books, _plaza(cmds), cid, task)


def gateway_charge_step(cmds: Commands, ctx: Context, cid: str, task: str | None, cost: int,
                        ref: str | None = None, loaded: dict | None = None) -> tuple[list, dict]:
    """A gateway call's charge, decided but not committed: the caller commits the aggregates with its own event.

    ``cost`` is the provider's reported cost, else the price's estimate (whole
    credits).  Charged to the task's escrow while it holds money, else to the
    wallet; a partial payer pays what it has and the rest is the shortfall.
    Returns the changed aggregates and {"charged", "shortfall", "payer", "entry"}; ``loaded`` (when
    given) gets the accounts this step changed, for the next step of the same commit.
    """
    books = _books(cmds, ctx, [t.wallet_key(cid)], [task], loaded)
    payer = t.gateway_payer(books, cid, task).key
    e = t.charge_gateway(books, cid, task, reported_cost=cost, ref=ref)
    if loaded is not None:
        loaded.update(books.touched)
    return books.changed(), {"charged": -e.postings.get(payer, 0), "shortfall": e.shortfall, "payer": payer,
                             "entry": e.id.hex}


def quick_check_own_loop_call(cmds: Commands, task: str | None) -> None:
    """``check_own_loop_call`` on the store's cached accounts (cheap, for the event loop); a refusal is
    confirmed with ``check_own_loop_call`` on fresh state."""
    books = _books(cmds, cmds.context("hub"), [], [task])
    t.check_own_loop_call(books, _plaza(cmds), task)


def check_own_loop_call(cmds: Commands, task: str | None) -> None:
    ctx = cmds.context("hub")

    def decide():
        t.check_own_loop_call(_books(cmds, ctx, [], [task]), _plaza(cmds), task)
        return []

    cmds.run_aggregates(decide)


def own_loop_charge_step(cmds: Commands, ctx: Context, cid: str, task: str | None, input_tokens: int,
                         output_tokens: int, price: tuple[int, int] | None, ref: str | None = None,
                         loaded: dict | None = None) -> tuple[list, dict]:
    """A call on the agent's own loop, charged (Spend) but not committed: the caller commits the
    aggregates with its own event.  Raises Refusal("budget_exhausted") when the escrow cannot cover it;
    no task: nothing charged.  Returns the changed aggregates and {"charged", "shortfall", "payer", "entry"}."""
    books = _books(cmds, ctx, [], [task], loaded)
    e = t.charge_own_loop(books, cid, task, input_tokens, output_tokens, price, ref)
    if e is None:
        return [], {"charged": 0, "shortfall": 0, "payer": None, "entry": None}
    if loaded is not None:
        loaded.update(books.touched)
    payer = t.escrow_key(task)
    return books.changed(), {"charged": -e.postings.get(payer, 0), "shortfall": 0, "payer": payer,
                             "entry": e.id.hex}


def charge_model_call(cmds: Commands, ctx: Context, cid: str, task: str | None, *, route: str = "own_loop",
                      **kw: Any) -> Outcome:
    """One entry point for both routes: ``route`` is "own_loop" or "gateway"."""
    if route == "own_loop":
        return charge_own_loop(cmds, ctx, cid, task, kw.get("input_tokens", 0), kw.get("output_tokens", 0),
                               kw.get("price"), kw.get("ref"))
    if route == "gateway":
        return charge_gateway(cmds, ctx, cid, task, **kw)
    raise Refusal("invalid_request", "route is own_loop or gateway")


# -- payments ----------------------------------------------------------------------------------


def _wallets_and(cmds: Commands, ctx: Context, cids: Iterable[str], task: str | None) -> t.Books:
    return _books(cmds, ctx, [t.wallet_key(c) for c in cids], [task])


def transfer(cmds: Commands, ctx: Context, payer: str, payee: str, amount: int, memo: str | None,
             task: str | None = None) -> Outcome:
    def decide():
        books = _wallets_and(cmds, ctx, [payer, payee], task)
        t.transfer(books, _plaza(cmds), payer, payee, amount, memo, task)
        return books, None

    return _run(cmds, decide)


def bonus(cmds: Commands, ctx: Context, payer: str, payee: str, amount: int, task: str, memo: str | None = None) -> Outcome:
    def decide():
        books = _wallets_and(cmds, ctx, [payer, payee], task)
        t.bonus(books, _plaza(cmds), payer, payee, amount, task, memo)
        return books, None

    return _run(cmds, decide)


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


def sanction_fine(cmds: Commands, ctx: Context, cid: str, amount: int, memo: str | None, ref: str | None = None) -> Outcome:
    def decide():
        books = _books(cmds, ctx, [t.wallet_key(cid)])
        return books, t.sanction_fine(books, cid, amount, memo, ref)

    return _run(cmds, decide)


def manual_fine(cmds: Commands, ctx: Context, cid: str, amount: int, memo: str | None) -> Outcome:
    def decide():
        books = _books(cmds, ctx, [t.wallet_key(cid)])
        t.manual_fine(books, cid, amount, memo)
        return books, None

    return _run(cmds, decide)


def fine(cmds: Commands, ctx: Context, cid: str, amount: int, memo: str | None, *, sanction: bool = False,
         ref: str | None = None) -> Outcome:
    return sanction_fine(cmds, ctx, cid, amount, memo, ref) if sanction else manual_fine(cmds, ctx, cid, amount, memo)


# -- reading the aggregates (for checks, not screens) ------------------------------------------------


def wallet(cmds: Commands, cid: str) -> t.Wallet | None:
    return _load(cmds, t.wallet_key(cid))


def escrow(cmds: Commands, task: str) -> t.Escrow | None:
    return _load(cmds, t.escrow_key(task))


def budget(cmds: Commands) -> t.Budget | None:
    return _load(cmds, t.BUDGET)
