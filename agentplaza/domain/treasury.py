"""The treasury: a double-entry journal of credits, and every money rule of the guide.

Accounts.  The plaza budget, one wallet per agent and one escrow per task are
aggregates: anything that could take them below zero, or past a cap, is
decided on their state and saved with optimistic concurrency, so two hubs on
one database cannot overdraw them.  Three accounts are *nominal*: the mint
source (where minted credits come from, so its balance is minus everything
minted), the plaza treasury (where fines go) and the model costs (where the
real cost of model calls goes).  They are only ever credited by the rules
below, or debited without limit (the mint source), so no decision reads them;
their balances live in the read models alone, which keeps every model call
and every fine from contending on one hot row.

Entries.  Every move of credits is one ``Entry`` (its own aggregate, one
event ``Entry.Posted``) whose postings (account -> signed integer amount) sum
to zero, saved in the same commit as a ``Posted`` event on each aggregate
account it touches.  Credits are integers: 1 credit = $0.001.

Everything here is pure: the command layer (``agentplaza.commands.treasury``)
loads the aggregates, these functions decide (refusing before any event), and
the command layer commits what ``Books.changed()`` returns.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..wire import JOURNAL_KINDS
from .base import Context, PlazaAggregate, Refusal, _validator_for, fixed_id
from .names import check_cid
from .plaza import require_running

# -- the guide's numbers, each beside the rule that uses it -------------------

#: "A credit ... is shown as $0.001": a credit is a thousandth of a dollar.
MILLIDOLLARS_PER_CREDIT = 1
#: "A new plaza starts with 100,000 credits in its budget."
GENESIS_CREDITS = 100_000
#: "Mint whole units into the budget": a mint is a whole, positive number of credits.
MINT_UNIT = 1
#: The most one mint may add (keeps every sum inside a 64-bit column).
MAX_MINT = 1_000_000_000_000
#: "The worker's pay is a margin of 20 percent of the real cost the task has metered."
WORKER_MARGIN_PERCENT = 20
#: "Tasks that the orchestrator or an agent creates ... If no budget is given, the default is 2,000 credits."
DEFAULT_TOOL_TASK_BUDGET = 2_000
#: "A budget below 200 credits is refused, because it would stop the work at its first call."
MIN_TOOL_TASK_BUDGET = 200
#: Own loop: "the price of the tokens ... plus one credit for the call, rounded up."
OWN_LOOP_CALL_CREDITS = 1
#: Prices are "input and output credits per million tokens".
TOKENS_PER_PRICE = 1_000_000
#: "Its default is 500 credits, so a payment of 501 or more waits for you."
DEFAULT_APPROVE_OVER = 500
#: "An agent can send at most 1,000 credits per UTC day in transfers, payments and bonuses together."
DAILY_SEND_LIMIT = 1_000
#: Sanction fines: "Each is capped at the maximum fine, 300 credits by default."
MAX_SANCTION_FINE = 300
#: "... and an agent cannot be fined more than 1,000 credits in any seven days."
WEEKLY_FINE_CAP = 1_000
FINE_WINDOW = dt.timedelta(days=7)
#: Longest memo an entry carries.
MAX_MEMO_CHARS = 500

# -- entry kinds, as the Treasury screen names them ----------------------------

MINT = "Mint"
SUBCONTRACT = "Subcontract"  # the plaza budget into a task's escrow
SPEND = "Spend"  # a model call on the agent's own loop, from the task's escrow
MODEL_CALL = "Model call"  # a model call through the gateway
PAYMENT = "Payment"  # the worker's margin, from the escrow, when the work passes
REFUND = "Refund"  # what is left in an escrow, back to the budget
FINE = "Fine"
TRANSFER = "Transfer"  # an agent pays another (the payment tool), or a direct transfer
BONUS = "Bonus"  # a hiring agent's bonus to its contact when the hired work passes
KINDS = JOURNAL_KINDS
assert KINDS == (MINT, SUBCONTRACT, SPEND, MODEL_CALL, PAYMENT, REFUND, FINE, TRANSFER, BONUS)
#: What counts towards the daily send limit.
SEND_KINDS = (TRANSFER, BONUS)

# -- accounts ---------------------------------------------------------------------

BUDGET = "budget"
TREASURY = "treasury"
MINT_SOURCE = "mint"
MODEL_COSTS = "model-costs"
NOMINAL = (TREASURY, MINT_SOURCE, MODEL_COSTS)


def wallet_key(cid: str | int) -> str:
    return f"wallet:{cid}"


def escrow_key(task: str) -> str:
    return f"escrow:{task}"


def account_id(key: str) -> uuid.UUID:
    return fixed_id(f"treasury:{key}")


def kind_of(key: str) -> str:
    """budget, treasury, mint, model-costs, wallet or escrow."""
    return key.split(":", 1)[0]


def valid_account(key: str) -> bool:
    k = kind_of(key)
    if k in (BUDGET, *NOMINAL):
        return key == k
    return k in ("wallet", "escrow") and len(key) > len(k) + 1


def _utc_day(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).date().isoformat()


class Account(PlazaAggregate):
    """An account whose balance a rule depends on: the budget, a wallet, an escrow."""

    family = "treasury"

    class Posted(PlazaAggregate.Event):
        entry_id: str
        entry_kind: str
        amount: int

        def apply(self, account: Account) -> None:
            account.balance += self.amount
            account.on_posted(self)

    def on_posted(self, ev: Account.Posted) -> None:
        pass


class Budget(Account):
    class Created(PlazaAggregate.Created):
        pass

    #: All the credits ever minted; None in a copy from a snapshot older than the count (see commands.council).
    minted = None

    def __init__(self) -> None:
        self.key = BUDGET
        self.balance = 0
        self.minted = 0

    def on_posted(self, ev: Account.Posted) -> None:
        if self.minted is not None and ev.entry_kind == MINT and ev.amount > 0:
            self.minted += ev.amount


class Wallet(Account):
    """An agent's wallet, with the counters its caps are checked on."""

    class Created(PlazaAggregate.Created):
        cid: str
        name: str
        role: str

    class Fined(PlazaAggregate.Event):
        """A sanction fine levied (collected or not): counts towards the seven-day cap."""

        entry_id: str
        amount: int
        collected: int

        def apply(self, w: Wallet) -> None:
            w.fines = [f for f in w.fines if dt.datetime.fromisoformat(f[0]) > self.timestamp - FINE_WINDOW]
            w.fines.append((self.timestamp.isoformat(), self.amount))

    class PaymentHeld(PlazaAggregate.Event):
        payment_id: str

        def apply(self, w: Wallet) -> None:
            pass

    def __init__(self, cid: str, name: str, role: str) -> None:
        self.key = wallet_key(cid)
        self.cid, self.name, self.role = cid, name, role
        self.balance = self.earned = self.spent = 0
        self.sent_day = ""
        self.sent_today = 0
        self.fines: list[tuple[str, int]] = []

    def on_posted(self, ev: Account.Posted) -> None:
        if ev.amount > 0:
            self.earned += ev.amount
        else:
            self.spent -= ev.amount
        if ev.entry_kind in SEND_KINDS and ev.amount < 0:
            day = _utc_day(ev.timestamp)
            if day != self.sent_day:
                self.sent_day, self.sent_today = day, 0
            self.sent_today -= ev.amount

    def sent_on(self, at: dt.datetime) -> int:
        """What this agent has sent on the UTC day of ``at``."""
        return self.sent_today if self.sent_day == _utc_day(at) else 0

    def fined_since(self, at: dt.datetime) -> int:
        """Sanction fines levied in the seven days up to ``at``."""
        return sum(a for t, a in self.fines if dt.datetime.fromisoformat(t) > at - FINE_WINDOW)


class Escrow(Account):
    """A task's escrow. The root task of a chain of work also keeps the chain's figures."""

    class Created(PlazaAggregate.Created):
        task: str
        root: str
        parent: str | None

    class Metered(PlazaAggregate.Event):
        """Real cost metered for this task (a model call), charged here or not."""

        amount: int

        def apply(self, e: Escrow) -> None:
            e.metered += self.amount

    class ChainMoved(PlazaAggregate.Event):
        """On the chain's root escrow: its real cost grew, or it paid an agent."""

        cost: int
        paid: int

        def apply(self, e: Escrow) -> None:
            e.chain_cost += self.cost
            e.chain_paid += self.paid

    class Closed(PlazaAggregate.Event):
        task: str
        outcome: str  # passed, failed, withdrawn

        def apply(self, e: Escrow) -> None:
            e.open = False
            e.outcome = self.outcome

    def __init__(self, task: str, root: str, parent: str | None) -> None:
        self.key = escrow_key(task)
        self.task, self.root, self.parent = task, root, parent
        self.balance = self.metered = self.chain_cost = self.chain_paid = 0
        self.open = True
        self.outcome: str | None = None

    @property
    def is_root(self) -> bool:
        return self.root == self.task


class Entry(PlazaAggregate):
    """One journal entry. Its postings sum to zero; nothing in it is ever edited."""

    family = "treasury"

    class Posted(PlazaAggregate.Created):
        kind: str
        memo: str
        task: str | None
        agents: list[str]
        postings: dict[str, int]
        shortfall: int  # a partial payer: what could not be charged
        uncollected: int  # a sanction fine the wallet could not pay
        ref: str | None  # a payment's id, a model call's id ...

    def __init__(self, kind: str, memo: str, task: str | None, agents: list[str],
                 postings: dict[str, int], shortfall: int, uncollected: int, ref: str | None) -> None:
        self.kind, self.memo, self.task, self.agents = kind, memo, task, agents
        self.postings, self.shortfall, self.uncollected, self.ref = postings, shortfall, uncollected, ref

    @classmethod
    def post(cls, ctx: Context, id: uuid.UUID, **fields: Any) -> Entry:
        """An entry is created by its one event, ``Entry.Posted``."""
        return _create(cls, cls.Posted, ctx, id, fields)


def _create(cls: Any, event_class: type, ctx: Context, id: uuid.UUID, fields: dict) -> Any:
    """Create an aggregate by a creation event with a name of its own (not ``Created``)."""
    payload = dict(fields, actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
    _validator_for(event_class)(payload)
    return cls._create(event_class, id=id, timestamp=ctx.at, **payload)


class Payment(PlazaAggregate):
    """A payment above ``approve_over``, waiting for the owner's decision."""

    family = "treasury"

    class Held(PlazaAggregate.Created):
        payer: str
        payee: str
        amount: int
        memo: str
        task: str | None
        approve_over: int

    class Approved(PlazaAggregate.Event):
        entry_id: str

        def apply(self, p: Payment) -> None:
            p.status, p.entry_id = "approved", self.entry_id

    class Denied(PlazaAggregate.Event):
        def apply(self, p: Payment) -> None:
            p.status = "denied"

    def __init__(self, payer: str, payee: str, amount: int, memo: str, task: str | None, approve_over: int) -> None:
        self.payer, self.payee, self.amount, self.memo, self.task = payer, payee, amount, memo, task
        self.approve_over = approve_over
        self.status = "pending"
        self.entry_id: str | None = None


# -- checks of the inputs -----------------------------------------------------------


def _amount(value: Any, what: str = "amount", allow_zero: bool = False) -> int:
    if type(value) is not int or value < (0 if allow_zero else 1):
        raise Refusal("invalid_amount", f"{what} must be a whole number of credits{'' if allow_zero else ' above zero'}")
    if value > MAX_MINT:
        raise Refusal("invalid_amount", f"{what} is at most {MAX_MINT:,} credits")
    return value


def _memo(memo: str | None, required: bool = False, what: str = "an entry") -> str:
    memo = (memo or "").strip()
    if required and not memo:
        raise Refusal("memo_required", f"{what} needs a memo that says what it is for")
    if len(memo) > MAX_MEMO_CHARS:
        raise Refusal("memo_too_long", f"a memo is at most {MAX_MEMO_CHARS} characters")
    return memo


def own_loop_charge(input_tokens: int, output_tokens: int, price: tuple[int, int] | None) -> int:
    """The price of the tokens plus one credit for the call, rounded up.

    ``price`` is (input, output) credits per million tokens; with no price of
    your own a call costs one credit.
    """
    if input_tokens < 0 or output_tokens < 0:
        raise Refusal("invalid_amount", "token counts cannot be negative")
    if price is None:
        return OWN_LOOP_CALL_CREDITS
    tokens = input_tokens * price[0] + output_tokens * price[1]
    return -(-tokens // TOKENS_PER_PRICE) + OWN_LOOP_CALL_CREDITS


def estimated_cost(input_tokens: int, output_tokens: int, price: tuple[int, int]) -> int:
    """The gateway's estimate when the provider reports no cost: the token price, rounded up."""
    return -(-(input_tokens * price[0] + output_tokens * price[1]) // TOKENS_PER_PRICE)


def worker_margin(metered_cost: int) -> int:
    """20 percent of the metered real cost, rounded down: never above that margin."""
    return metered_cost * WORKER_MARGIN_PERCENT // 100


# -- the unit of work -------------------------------------------------------------------


@dataclass
class Books:
    """The accounts one command has loaded, and what it changed.

    ``accounts`` maps account keys to loaded aggregates (missing ones are None);
    ``post`` checks an entry whole before it triggers a single event.
    """

    ctx: Context
    accounts: dict[str, Account | None]
    others: list[PlazaAggregate] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    touched: dict[str, Account] = field(default_factory=dict)

    def wallet(self, cid: str) -> Wallet:
        w = self.accounts.get(wallet_key(cid))
        if w is None:
            raise Refusal("no_wallet", f"no wallet for agent {cid}")
        return w  # type: ignore[return-value]

    def escrow(self, task: str) -> Escrow:
        e = self.accounts.get(escrow_key(task))
        if e is None:
            raise Refusal("no_escrow", f"task {task} has no escrow")
        return e  # type: ignore[return-value]

    def budget(self) -> Budget:
        b = self.accounts.get(BUDGET)
        if b is None:
            raise Refusal("no_budget", "the plaza has no budget yet")
        return b  # type: ignore[return-value]

    def add(self, aggregate: PlazaAggregate) -> None:
        self.others.append(aggregate)

    def post(self, kind: str, memo: str, postings: dict[str, int], *, task: str | None = None,
             agents: Iterable[str] = (), shortfall: int = 0, uncollected: int = 0, ref: str | None = None,
             anchor: Account | None = None) -> Entry:
        """One journal entry: check it whole, then post it to every account it names."""
        assert kind in KINDS, kind
        moves = {k: v for k, v in postings.items() if v != 0}
        for k, v in moves.items():
            assert type(v) is int and valid_account(k), (k, v)
        assert sum(moves.values()) == 0, "an entry must sum to zero"
        live: list[tuple[Account, int]] = []
        for k, v in moves.items():
            if k in NOMINAL:
                continue
            acc = self.accounts.get(k)
            if acc is None:
                raise Refusal("no_account", f"no account {k}")
            if acc.balance + v < 0:  # wallets, escrows and the budget never go below zero
                raise Refusal("insufficient_funds", f"{k} holds {acc.balance} credits and cannot pay {-v}")
            live.append((acc, v))
        if not live:  # nothing moves (a fine not collected, a payer with nothing): still one account's event
            assert anchor is not None, "an entry must touch an account the treasury keeps"
            live.append((anchor, 0))
        first = live[0][0]
        # The entry's id follows from the first account's next version: unique,
        # and the same on a retry of the same decision.
        entry_id = uuid.uuid5(first.id, f"entry:{first.version + 1}")
        for acc, v in live:
            acc.record(Account.Posted, self.ctx, entry_id=entry_id.hex, entry_kind=kind, amount=v)
            self.touched[acc.key] = acc
        entry = Entry.post(
            self.ctx, id=entry_id, kind=kind, memo=memo, task=task, agents=sorted(set(agents)),
            postings=moves, shortfall=shortfall, uncollected=uncollected, ref=ref,
        )
        self.entries.append(entry)
        return entry

    def changed(self) -> list[PlazaAggregate]:
        seen: dict[Any, PlazaAggregate] = {}
        for a in [*self.touched.values(), *self.others, *self.entries]:
            seen[a.id] = a
        return list(seen.values())


def _plaza_running(plaza: Any) -> None:
    """``plaza``: the ``Plaza`` the command loaded, or None (not founded yet)."""
    require_running(lambda _id: plaza)


# -- the operations other areas call ----------------------------------------------------


def open_budget(ctx: Context) -> Budget:
    return Budget.start(ctx, id=account_id(BUDGET))


def genesis(books: Books) -> Entry:
    """A new plaza's first entry: 100,000 credits minted into its budget."""
    return books.post(MINT, "genesis", {MINT_SOURCE: -GENESIS_CREDITS, BUDGET: GENESIS_CREDITS})


def mint(books: Books, amount: int, memo: str | None = None) -> Entry:
    """Mint whole units into the plaza budget."""
    if type(amount) is not int or amount < MINT_UNIT or amount % MINT_UNIT:
        raise Refusal("mint_whole_units", "mint a whole number of credits, at least 1")
    _amount(amount)
    books.budget()
    return books.post(MINT, _memo(memo) or "mint", {MINT_SOURCE: -amount, BUDGET: amount})


def open_wallet(ctx: Context, existing: Wallet | None, cid: str, name: str, role: str) -> Wallet:
    """A new agent's wallet; it starts at zero."""
    cid = check_cid(cid)
    if existing is not None:
        raise Refusal("wallet_exists", f"agent {cid} already has a wallet")
    if not name.strip() or len(name) > 200 or len(role) > 100:
        raise Refusal("invalid_request", "a wallet needs a name (at most 200 characters) and a role")
    return Wallet.start(ctx, id=account_id(wallet_key(cid)), cid=cid, name=name.strip(), role=role.strip())


def fund_task_escrow(books: Books, task: str, amount: int | None, *, parent: str | None = None,
                     through_tools: bool = False, memo: str | None = None) -> Entry:
    """Move a task's budget from the plaza budget into its escrow (opening it if new).

    ``through_tools``: the task was made by the orchestrator or an agent with
    its tools, so a missing budget is 2,000 and one below 200 is refused.
    If the budget cannot cover it, nothing is made.
    """
    task = str(task).strip()
    if not task or len(task) > 64:
        raise Refusal("invalid_task", "a task id is 1 to 64 characters")
    if amount is None and through_tools:
        amount = DEFAULT_TOOL_TASK_BUDGET
    amount = _amount(amount, "a task's budget")
    if through_tools and amount < MIN_TOOL_TASK_BUDGET:
        raise Refusal("budget_too_small",
                      f"a task's budget below {MIN_TOOL_TASK_BUDGET} credits is refused: it would stop the work at its first call")
    budget = books.budget()
    escrow = books.accounts.get(escrow_key(task))
    if escrow is not None and not escrow.open:  # type: ignore[union-attr]
        raise Refusal("task_closed", f"task {task} has ended; its escrow is closed")
    root = task
    if escrow is None and parent is not None:
        root = books.escrow(parent).root
    if budget.balance < amount:
        raise Refusal("insufficient_budget",
                      f"the plaza budget cannot cover this task's budget: it holds {budget.balance} credits, the task needs {amount}")
    if escrow is None:
        escrow = Escrow.start(books.ctx, id=account_id(escrow_key(task)), task=task, root=root, parent=parent)
        books.accounts[escrow.key] = escrow
    return books.post(SUBCONTRACT, _memo(memo) or f"budget of task {task}",
                      {BUDGET: -amount, escrow.key: amount}, task=task)


def _root_of(books: Books, escrow: Escrow) -> Escrow:
    return escrow if escrow.is_root else books.escrow(escrow.root)


def _meter(books: Books, escrow: Escrow, cost: int) -> None:
    if cost <= 0:
        return
    escrow.record(Escrow.Metered, books.ctx, amount=cost)
    books.touched[escrow.key] = escrow
    root = _root_of(books, escrow)
    root.record(Escrow.ChainMoved, books.ctx, cost=cost, paid=0)
    books.touched[root.key] = root


def chain_room(books: Books, task: str | None) -> int | None:
    """What the chain of work ``task`` belongs to may still pay its agents (None: no chain)."""
    if task is None:
        return None
    root = _root_of(books, books.escrow(task))
    return root.chain_cost - root.chain_paid


def _chain_pay(books: Books, task: str | None, amount: int) -> None:
    """The chain margin cap: a chain of work cannot pay its agents more than its real cost."""
    if task is None or amount <= 0:
        return
    root = _root_of(books, books.escrow(task))
    if root.chain_paid + amount > root.chain_cost:
        raise Refusal("chain_margin_cap",
                      f"the chain is at its margin cap: it has paid its agents {root.chain_paid} of its real cost "
                      f"{root.chain_cost}, and {amount} more would pass it")
    root.record(Escrow.ChainMoved, books.ctx, cost=0, paid=amount)
    books.touched[root.key] = root


def settle_task(books: Books, plaza: Any, task: str, passed: bool, *, worker: str | None = None,
                metered_cost: int | None = None, outcome: str | None = None) -> list[Entry]:
    """End a task's escrow.

    Passed: the worker is paid 20% of the metered real cost from the escrow
    (never above that margin, never above what the escrow holds, never past the
    chain's cap) and the rest returns to the budget.  Failed or withdrawn: the
    whole escrow returns.
    """
    escrow = books.escrow(task)
    if not escrow.open:
        raise Refusal("task_closed", f"task {task} has ended; its escrow is closed")
    books.budget()
    entries = []
    if passed:
        _plaza_running(plaza)  # STOP ALL holds every payment
        if worker is None:
            raise Refusal("worker_required", "a passed task names its worker")
        wallet = books.wallet(worker)
        metered = escrow.metered if metered_cost is None else max(_amount(metered_cost, "the metered cost", True), escrow.metered)
        extra = metered - escrow.metered
        if extra > 0:
            _meter(books, escrow, extra)
        room = chain_room(books, task) or 0
        margin = min(worker_margin(metered), escrow.balance, max(room, 0))
        if margin > 0:
            _chain_pay(books, task, margin)
            entries.append(books.post(PAYMENT, f"margin of task {task}: {WORKER_MARGIN_PERCENT}% of {metered}",
                                      {escrow.key: -margin, wallet.key: margin}, task=task, agents=[wallet.cid]))
    rest = escrow.balance
    if rest > 0:
        entries.append(books.post(REFUND, f"escrow of task {task} returned", {escrow.key: -rest, BUDGET: rest}, task=task))
    escrow.record(Escrow.Closed, books.ctx, task=task, outcome=outcome or ("passed" if passed else "failed"))
    books.touched[escrow.key] = escrow
    return entries


def refund_task(books: Books, task: str, outcome: str = "withdrawn") -> list[Entry]:
    """A failed or withdrawn task: its whole escrow returns to the plaza budget."""
    if outcome not in ("failed", "withdrawn"):
        raise Refusal("invalid_request", "a refund is for a failed or withdrawn task")
    return settle_task(books, None, task, False, outcome=outcome)


def charge_own_loop(books: Books, cid: str, task: str | None, input_tokens: int, output_tokens: int,
                    price: tuple[int, int] | None, ref: str | None = None) -> Entry | None:
    """A model call on the agent's own loop, charged to its task's escrow.

    No task: not charged on this route (None).  An escrow that cannot cover
    the charge refuses with "budget exhausted" and nothing is charged.
    """
    if task is None:
        return None
    cost = own_loop_charge(input_tokens, output_tokens, price)
    escrow = books.accounts.get(escrow_key(task))
    if escrow is None or not escrow.open or escrow.balance < cost:  # type: ignore[union-attr]
        raise Refusal("budget_exhausted", "budget exhausted")
    _meter(books, escrow, cost)  # type: ignore[arg-type]
    return books.post(SPEND, f"model call on task {task}", {escrow.key: -cost, MODEL_COSTS: cost},
                      task=task, agents=[str(cid)], ref=ref)


def check_own_loop_call(books: Books, plaza: Any, task: str | None) -> None:
    """Before a call on the agent's own loop: refused while the plaza is held, and on a task whose
    escrow cannot pay even the call's one credit ("budget exhausted").  No task: never refused here."""
    _plaza_running(plaza)
    if task is None:
        return
    escrow = books.accounts.get(escrow_key(task))
    if escrow is None or not escrow.open or escrow.balance < OWN_LOOP_CALL_CREDITS:  # type: ignore[union-attr]
        raise Refusal("budget_exhausted", "budget exhausted")


def gateway_payer(books: Books, cid: str, task: str | None) -> Account:
    """Who pays a gateway call: the task's escrow while it holds money, else the wallet."""
    wallet = books.wallet(cid)
    if task is not None:
        escrow = books.accounts.get(escrow_key(task))
        if escrow is not None and escrow.open and escrow.balance > 0:  # type: ignore[union-attr]
            return escrow  # type: ignore[return-value]
    return wallet


def check_gateway_call(books: Books, plaza: Any, cid: str, task: str | None) -> Account:
    """Before a gateway call: refused when the plaza is held or the payer has nothing."""
    _plaza_running(plaza)
    payer = gateway_payer(books, cid, task)
    if payer.balance <= 0:
        escrow = books.accounts.get(escrow_key(task)) if task else None
        where = f" and the escrow of task {task} holds {escrow.balance}" if escrow is not None else ""
        raise Refusal("payer_empty",
                      f"no credits to pay for the call: the wallet of agent {cid} holds {books.wallet(cid).balance}{where}; "
                      "top up the task's budget or finish the task")
    return payer


def charge_gateway(books: Books, cid: str, task: str | None, *, reported_cost: int | None = None,
                   input_tokens: int = 0, output_tokens: int = 0, price: tuple[int, int] | None = None,
                   ref: str | None = None) -> Entry:
    """A call through the gateway: the provider's cost, else the price's estimate.

    Charged to the escrow while the task holds money, else to the wallet.  A
    payer that can pay only part is charged what it has; the shortfall is kept
    on the entry (the gateway writes it to the agent's transcript).
    """
    if reported_cost is not None:
        cost = _amount(reported_cost, "the reported cost", True)
    elif price is not None:
        cost = estimated_cost(input_tokens, output_tokens, price)
    else:
        raise Refusal("no_price", "the call has no reported cost and no price to estimate it from")
    payer = gateway_payer(books, cid, task)
    charged = min(cost, payer.balance)
    if task is not None and books.accounts.get(escrow_key(task)) is not None:
        _meter(books, books.escrow(task), cost)
    return books.post(MODEL_CALL, "model call" + (f" on task {task}" if task else ""),
                      {payer.key: -charged, MODEL_COSTS: charged}, task=task, agents=[str(cid)],
                      shortfall=cost - charged, ref=ref, anchor=payer)


def _send(books: Books, plaza: Any, kind: str, payer: str, payee: str, amount: int, memo: str,
          task: str | None, ref: str | None = None) -> Entry:
    """Credits from one wallet to another, under STOP ALL, the daily limit and the chain cap."""
    _plaza_running(plaza)
    amount = _amount(amount)
    src, dst = books.wallet(payer), books.wallet(payee)
    if src.key == dst.key:
        raise Refusal("same_wallet", "an agent cannot pay itself")
    sent = src.sent_on(books.ctx.at)
    if sent + amount > DAILY_SEND_LIMIT:
        raise Refusal("daily_limit",
                      f"agent {payer} has used its daily limit: it can send at most {DAILY_SEND_LIMIT:,} credits a day, "
                      f"counted over the UTC day, and has sent {sent} today")
    if src.balance < amount:
        raise Refusal("insufficient_funds", f"the wallet of agent {payer} holds {src.balance} credits and cannot cover {amount}")
    _chain_pay(books, task, amount)
    return books.post(kind, memo, {src.key: -amount, dst.key: amount}, task=task, agents=[src.cid, dst.cid], ref=ref)


def transfer(books: Books, plaza: Any, payer: str, payee: str, amount: int, memo: str | None,
             task: str | None = None, ref: str | None = None) -> Entry:
    return _send(books, plaza, TRANSFER, payer, payee, amount, _memo(memo, True, "a transfer"), task, ref)


def budget_move(books: Books, plaza: Any, payee: str, amount: int, memo: str, ref: str) -> Entry:
    """A carried council budget move: credits from the plaza budget to an agent's wallet."""
    _plaza_running(plaza)
    dst = books.wallet(payee)
    return books.post(TRANSFER, _memo(memo, True, "a budget move"), {BUDGET: -_amount(amount), dst.key: amount},
                      agents=[dst.cid], ref=ref)


def bonus(books: Books, plaza: Any, payer: str, payee: str, amount: int, task: str, memo: str | None = None) -> Entry:
    """A hiring agent's bonus from its own wallet, paid when the hired work passes."""
    return _send(books, plaza, BONUS, payer, payee, amount, _memo(memo) or f"bonus for task {task}", task)


@dataclass
class PayResult:
    status: str  # "moved" or "held"
    entry: Entry | None = None
    payment: Payment | None = None


def pay(books: Books, plaza: Any, payer: str, payee: str, amount: int, memo: str | None,
        task: str | None = None, approve_over: int = DEFAULT_APPROVE_OVER) -> PayResult:
    """The payment tool: at or below ``approve_over`` it moves at once, above it waits for approval."""
    _plaza_running(plaza)
    amount = _amount(amount)
    memo = _memo(memo, True, "a payment")
    if type(approve_over) is not int or approve_over < 0:
        raise Refusal("invalid_request", "approve_over is a whole number of credits, 0 or more")
    if amount <= approve_over:
        return PayResult("moved", entry=_send(books, plaza, TRANSFER, payer, payee, amount, memo, task))
    src, dst = books.wallet(payer), books.wallet(payee)
    if src.key == dst.key:
        raise Refusal("same_wallet", "an agent cannot pay itself")
    if task is not None:
        books.escrow(task)
    payment_id = uuid.uuid5(src.id, f"payment:{src.version + 1}")
    src.record(Wallet.PaymentHeld, books.ctx, payment_id=payment_id.hex)
    books.touched[src.key] = src
    p = _create(Payment, Payment.Held, books.ctx, payment_id, dict(
        payer=src.cid, payee=dst.cid, amount=amount, memo=memo, task=task, approve_over=approve_over))
    books.add(p)
    return PayResult("held", payment=p)


def approve_payment(books: Books, plaza: Any, payment: Payment | None) -> Entry:
    """Approving makes the transfer; the daily limit and the wallet still apply."""
    p = _pending(payment)
    entry = _send(books, plaza, TRANSFER, p.payer, p.payee, p.amount, p.memo, p.task, ref=p.id.hex)
    p.record(Payment.Approved, books.ctx, entry_id=entry.id.hex)
    books.add(p)
    return entry


def deny_payment(books: Books, payment: Payment | None) -> Payment:
    """Denying cancels the payment; the agent is told by the event."""
    p = _pending(payment)
    p.record(Payment.Denied, books.ctx)
    books.add(p)
    return p


def _pending(payment: Payment | None) -> Payment:
    if payment is None:
        raise Refusal("no_payment", "no such payment")
    if payment.status != "pending":
        raise Refusal("payment_decided", f"the payment was already {payment.status}")
    return payment


@dataclass
class FineResult:
    entry: Entry
    levied: int
    collected: int
    uncollected: int


def sanction_fine(books: Books, cid: str, amount: int, memo: str | None, ref: str | None = None) -> FineResult:
    """A fine from the sanctions schedule: at most 300, at most 1,000 per agent in any
    seven days; what the wallet cannot pay is recorded as not collected.  Never from an escrow."""
    amount = _amount(amount)
    wallet = books.wallet(cid)
    room = WEEKLY_FINE_CAP - wallet.fined_since(books.ctx.at)
    levied = min(amount, MAX_SANCTION_FINE, room)
    if levied <= 0:
        raise Refusal("weekly_fine_cap",
                      f"agent {cid} cannot be fined more than {WEEKLY_FINE_CAP:,} credits in any seven days")
    collected = min(levied, wallet.balance)
    entry = books.post(FINE, _memo(memo) or "sanction fine", {wallet.key: -collected, TREASURY: collected},
                       agents=[wallet.cid], uncollected=levied - collected, ref=ref, anchor=wallet)
    wallet.record(Wallet.Fined, books.ctx, entry_id=entry.id.hex, amount=levied, collected=collected)
    books.touched[wallet.key] = wallet
    return FineResult(entry, levied, collected, levied - collected)


def manual_fine(books: Books, cid: str, amount: int, memo: str | None) -> Entry:
    """The owner's fine: needs a memo; larger than the wallet's balance is refused."""
    amount = _amount(amount)
    memo = _memo(memo, True, "a fine")
    wallet = books.wallet(cid)
    if amount > wallet.balance:
        raise Refusal("fine_exceeds_wallet",
                      f"a manual fine larger than the wallet's balance is refused: agent {cid}'s wallet holds {wallet.balance}")
    return books.post(FINE, memo, {wallet.key: -amount, TREASURY: amount}, agents=[wallet.cid])
