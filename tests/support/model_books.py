"""An independent model of the treasury's rules, for the property machines.

Written from the guide (Treasury chapter) and docs/treasury.md, with the guide's numbers taken from
``agentplaza.domain.treasury`` as named constants; the arithmetic and the order of the checks are
this file's own, not a call into the product.  Every operation either raises ``Refused(code)``
before it changes anything, or applies its whole effect.

What it keeps: the plaza budget, every wallet and escrow, the nominal accounts (minted, the
treasury, the model costs), what each payer sent per UTC day, each agent's sanction fines (for the
seven-day cap), the held payments, and the hold (STOP ALL).

Chains of work are kept out: every escrow the machines open is its own root (no ``parent``), so
an escrow's chain margin cap is its own metered cost minus what it paid (margins, and bonuses and
transfers that name its task).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from agentplaza.domain.treasury import (
    DAILY_SEND_LIMIT,
    DEFAULT_TOOL_TASK_BUDGET,
    FINE_WINDOW,
    GENESIS_CREDITS,
    MAX_SANCTION_FINE,
    MIN_TOOL_TASK_BUDGET,
    OWN_LOOP_CALL_CREDITS,
    TOKENS_PER_PRICE,
    WEEKLY_FINE_CAP,
    WORKER_MARGIN_PERCENT,
)


class Refused(Exception):  # noqa: N818 - it is what the model says, not an error of the test
    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def refuse_if(cond: bool, code: str) -> None:
    if cond:
        raise Refused(code)


def positive(amount: object) -> int:
    """A whole number of credits above zero, else invalid_amount."""
    refuse_if(type(amount) is not int or amount < 1, "invalid_amount")
    return amount  # type: ignore[return-value]


@dataclass
class Escrow:
    balance: int = 0
    metered: int = 0
    paid: int = 0  # what the chain (this escrow alone) has paid its agents
    status: str = "open"  # open, passed, failed, withdrawn

    @property
    def open(self) -> bool:
        return self.status == "open"


@dataclass
class Payment:
    payer: str
    payee: str
    amount: int
    task: str | None
    status: str = "pending"


class Books:
    def __init__(self) -> None:
        self.minted = GENESIS_CREDITS
        self.budget = GENESIS_CREDITS
        self.treasury = 0
        self.model_costs = 0
        self.wallets: dict[str, int] = {}
        self.escrows: dict[str, Escrow] = {}
        self.sent: dict[tuple[str, dt.date], int] = defaultdict(int)
        self.fines: dict[str, list[tuple[dt.datetime, int]]] = defaultdict(list)
        self.payments: dict[str, Payment] = {}
        self.held = False

    # -- what the read models must show ------------------------------------------------------

    def balances(self) -> dict[str, int]:
        out = {"budget": self.budget, "treasury": self.treasury, "model-costs": self.model_costs,
               "mint": -self.minted}
        out.update({f"wallet:{c}": b for c, b in self.wallets.items()})
        out.update({f"escrow:{k}": e.balance for k, e in self.escrows.items()})
        return out

    # -- the hold -------------------------------------------------------------------------------

    def stop_all(self) -> None:
        refuse_if(self.held, "plaza_held")
        self.held = True

    def resume(self) -> None:
        refuse_if(not self.held, "plaza_running")
        self.held = False

    def running(self) -> None:
        refuse_if(self.held, "plaza_held")

    # -- the budget and the accounts ----------------------------------------------------------

    def mint(self, amount: object) -> None:
        refuse_if(type(amount) is not int or amount < 1, "mint_whole_units")
        self.budget += amount  # type: ignore[operator]
        self.minted += amount  # type: ignore[operator]

    def open_wallet(self, cid: str) -> None:
        refuse_if(cid in self.wallets, "wallet_exists")
        self.wallets[cid] = 0

    def wallet(self, cid: str) -> int:
        refuse_if(cid not in self.wallets, "no_wallet")
        return self.wallets[cid]

    def escrow(self, task: str) -> Escrow:
        refuse_if(task not in self.escrows, "no_escrow")
        return self.escrows[task]

    def fund(self, task: str, amount: int | None, through_tools: bool = False) -> None:
        if amount is None and through_tools:
            amount = DEFAULT_TOOL_TASK_BUDGET
        amount = positive(amount)
        refuse_if(through_tools and amount < MIN_TOOL_TASK_BUDGET, "budget_too_small")
        e = self.escrows.get(task)
        refuse_if(e is not None and not e.open, "task_closed")
        refuse_if(self.budget < amount, "insufficient_budget")
        e = self.escrows.setdefault(task, Escrow())
        self.budget -= amount
        e.balance += amount

    # -- model calls ------------------------------------------------------------------------------

    def charge_gateway(self, cid: str, task: str | None, cost: int) -> int:
        """The escrow pays while its task is open and holds money, else the wallet; a payer pays what
        it has (the rest is the shortfall).  The whole cost is metered on the task's escrow."""
        wallet = self.wallet(cid)
        e = self.escrows.get(task) if task is not None else None
        from_escrow = e is not None and e.open and e.balance > 0
        charged = min(cost, e.balance if from_escrow else wallet)  # type: ignore[union-attr]
        if from_escrow:
            e.balance -= charged  # type: ignore[union-attr]
        else:
            self.wallets[cid] -= charged
        if e is not None:
            e.metered += cost
        self.model_costs += charged
        return cost - charged

    def charge_own_loop(self, task: str | None, tokens_in: int, tokens_out: int,
                        price: tuple[int, int] | None) -> None:
        """The price of the tokens plus one credit, rounded up, from the task's escrow; no task: free."""
        if task is None:
            return
        if price is None:
            cost = OWN_LOOP_CALL_CREDITS
        else:
            millionths = tokens_in * price[0] + tokens_out * price[1]
            cost = (millionths + TOKENS_PER_PRICE - 1) // TOKENS_PER_PRICE + OWN_LOOP_CALL_CREDITS
        e = self.escrows.get(task)
        refuse_if(e is None or not e.open or e.balance < cost, "budget_exhausted")
        e.balance -= cost  # type: ignore[union-attr]
        e.metered += cost  # type: ignore[union-attr]
        self.model_costs += cost

    # -- ending a task -------------------------------------------------------------------------------

    def settle(self, task: str, worker: str, metered: int | None = None) -> int:
        """A passed task: the worker gets 20% of the metered cost (rounded down), never more than the
        escrow holds or the chain may still pay; the rest goes back to the budget.  The margin."""
        e = self.escrow(task)
        refuse_if(not e.open, "task_closed")
        self.running()
        self.wallet(worker)
        if metered is not None:
            refuse_if(metered < 0, "invalid_amount")
            e.metered = max(e.metered, metered)
        margin = max(0, min(e.metered * WORKER_MARGIN_PERCENT // 100, e.balance, e.metered - e.paid))
        e.paid += margin
        self.wallets[worker] += margin
        self.budget += e.balance - margin
        e.balance = 0
        e.status = "passed"
        return margin

    def refund(self, task: str, outcome: str = "failed") -> None:
        e = self.escrow(task)
        refuse_if(not e.open, "task_closed")
        self.budget += e.balance
        e.balance = 0
        e.status = outcome

    # -- sending -------------------------------------------------------------------------------------

    def _check_send(self, payer: str, payee: str, amount: int, task: str | None, day: dt.date) -> None:
        self.running()
        positive(amount)
        src = self.wallet(payer)
        self.wallet(payee)
        refuse_if(payer == payee, "same_wallet")
        refuse_if(self.sent[(payer, day)] + amount > DAILY_SEND_LIMIT, "daily_limit")
        refuse_if(src < amount, "insufficient_funds")
        if task is not None:
            e = self.escrow(task)
            refuse_if(e.paid + amount > e.metered, "chain_margin_cap")

    def send(self, payer: str, payee: str, amount: int, task: str | None, day: dt.date) -> None:
        """A transfer, a bonus, a payment at or below its limit, an approved payment."""
        self._check_send(payer, payee, amount, task, day)
        self.wallets[payer] -= amount
        self.wallets[payee] += amount
        self.sent[(payer, day)] += amount
        if task is not None:
            self.escrows[task].paid += amount

    def pay(self, payer: str, payee: str, amount: int, task: str | None, approve_over: int,
            day: dt.date) -> bool:
        """The payment tool: moves at once at or below ``approve_over`` (False), else waits (True)."""
        self.running()
        positive(amount)
        if amount <= approve_over:
            self.send(payer, payee, amount, task, day)
            return False
        self.wallet(payer)
        self.wallet(payee)
        refuse_if(payer == payee, "same_wallet")
        if task is not None:
            self.escrow(task)
        return True

    def held_payment(self, pid: str, payer: str, payee: str, amount: int, task: str | None) -> None:
        self.payments[pid] = Payment(payer, payee, amount, task)

    def approve(self, pid: str, day: dt.date) -> None:
        p = self.payments[pid]
        refuse_if(p.status != "pending", "payment_decided")
        self.send(p.payer, p.payee, p.amount, p.task, day)
        p.status = "approved"

    def deny(self, pid: str) -> None:
        p = self.payments[pid]
        refuse_if(p.status != "pending", "approval_decided")
        p.status = "denied"

    # -- fines ------------------------------------------------------------------------------------

    def fined_in_window(self, cid: str, at: dt.datetime) -> int:
        return sum(a for when, a in self.fines[cid] if at - FINE_WINDOW < when <= at)

    def sanction_fine(self, cid: str, amount: int, at: dt.datetime) -> tuple[int, int]:
        """At most the maximum fine, at most the seven-day cap; what the wallet lacks is not collected.
        (levied, collected)."""
        positive(amount)
        held = self.wallet(cid)
        levied = min(amount, MAX_SANCTION_FINE, WEEKLY_FINE_CAP - self.fined_in_window(cid, at))
        refuse_if(levied <= 0, "weekly_fine_cap")
        collected = min(levied, held)
        self.fines[cid].append((at, levied))
        self.wallets[cid] -= collected
        self.treasury += collected
        return levied, collected

    def manual_fine(self, cid: str, amount: int) -> None:
        positive(amount)
        refuse_if(amount > self.wallet(cid), "fine_exceeds_wallet")
        self.wallets[cid] -= amount
        self.treasury += amount
