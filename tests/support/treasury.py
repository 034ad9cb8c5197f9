"""A small treasury on a real store, with a clock the test moves."""

from __future__ import annotations

import datetime as dt
import time

import httpx

from agentplaza.commands import payments
from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import treasury as tc
from agentplaza.commands.unit import Commands, Done
from agentplaza.domain import treasury as t
from agentplaza.events.store import EventStore
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


class Clock:
    def __init__(self, at: dt.datetime = T0):
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at

    def advance(self, **kw) -> None:
        self.at += dt.timedelta(**kw)


class Plaza:
    """The store, the read models and the commands of one plaza."""

    def __init__(self, state_dir, database_url=None, clock: Clock | None = None):
        self.store = EventStore.open(state_dir=state_dir, database_url=database_url)
        self.rm = ReadModels(make_engine(read_model_url(state_dir=state_dir, database_url=database_url)),
                             self.store, all_projections())
        self.rm.setup()
        self.clock = clock or Clock()
        self.cmds = Commands(self.store, self.clock)
        plaza_commands.ensure_founded(self.cmds)

    def ctx(self, actor: str = "owner", reason: str | None = None):
        return self.cmds.context(actor, reason)

    # shorthands for the tests
    def wallet(self, cid: str, name: str | None = None, role: str = "builder"):
        return tc.open_wallet(self.cmds, self.ctx(), cid, name or f"agent-{cid}", role)

    def balance(self, key: str) -> int:
        agg = self.store.get(t.account_id(key))
        return agg.balance if agg is not None else 0

    def earn(self, cid: str, amount: int, task: str | None = None) -> None:
        """Put ``amount`` into a wallet the only way there is: a passed task's margin."""
        task = task or f"earn-{cid}-{self.store.max_position()}"
        cost = amount * 100 // t.WORKER_MARGIN_PERCENT
        tc.fund_task_escrow(self.cmds, self.ctx(), task, cost + amount)
        tc.charge_gateway(self.cmds, self.ctx(f"agent:{cid}"), cid, task, reported_cost=cost)
        tc.settle_task(self.cmds, self.ctx(), task, True, worker=cid)

    def read(self) -> dict:
        self.rm.catch_up()
        return self.rm.live(["treasury"])["treasury"]

    def close(self) -> None:
        self.store.close()
        self.rm.engine.dispose()


def refused(p: Plaza, code: str, fn, *args, **kw):
    """The call is refused with ``code`` and writes nothing."""
    import pytest

    from agentplaza.domain.base import Refusal

    before = p.store.max_position()
    with pytest.raises(Refusal) as info:
        fn(*args, **kw)
    assert info.value.code == code, info.value.message
    assert p.store.max_position() == before, "a refusal changed something"
    return info.value


def refused_command(p: Plaza, code: str, fn, *args, **kw):
    """The command ``fn(p.cmds, ...)`` is refused with ``code`` and writes nothing."""
    return refused(p, code, fn, p.cmds, *args, **kw)


#: How long a teller waits for a hub to show what it wrote (the hub polls the log four times a second).
HUB_FOLLOWS_S = 30.0


class Teller:
    """The treasury's commands that the hub offers no route for, run on a real hub's store as a
    second writer (every hub follows the log): opening a wallet (the agents area does it on spawn),
    funding, settling and refunding a task's escrow (the tasks area), charging a model call (the
    gateway) and the payment tool.  Each gives what the command gave (``Outcome.as_dict()``),
    raises its ``Refusal``, and returns once the hub's read models show what it wrote."""

    def __init__(self, h):
        self.h = h
        self.store = EventStore.open(state_dir=h.folders.state, database_url=h.env.get("APZ_DATABASE_URL"))
        self.cmds = Commands(self.store)

    def __enter__(self) -> Teller:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def ctx(self, actor: str = "owner", reason: str | None = None):
        return self.cmds.context(actor, reason)

    def _shown(self, out) -> dict:
        """Wait until the hub's read models include the command's positions; its outcome."""
        done = out if isinstance(out, Done) else Done(out, out.positions)
        if done.positions:
            deadline = time.monotonic() + HUB_FOLLOWS_S
            token = self.h.env.get("APZ_TOKEN")  # a hub with loopback trust off wants the owner token
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            with httpx.Client(base_url=self.h.url, timeout=30, headers=headers) as c:
                while min(c.get("/v1/read-models").json()["read_models"].values()) < done.positions[-1]:
                    assert time.monotonic() < deadline, "the hub does not follow the log"
                    time.sleep(0.02)
        return done.value.as_dict()

    def wallet(self, cid, name: str, role: str = "") -> dict:
        return self._shown(tc.open_wallet(self.cmds, self.ctx(), str(cid), name, role))

    def escrow(self, task: str, amount: int | None = None, *, parent: str | None = None,
               through_tools: bool = False, memo: str | None = None) -> dict:
        return self._shown(tc.fund_task_escrow(self.cmds, self.ctx("owner", memo), task, amount, parent=parent,
                                               through_tools=through_tools, memo=memo))

    def settle(self, task: str, passed: bool, worker=None, metered_cost: int | None = None) -> dict:
        worker = str(worker) if worker is not None else None
        return self._shown(tc.settle_task(self.cmds, self.ctx(), task, passed, worker=worker,
                                          metered_cost=metered_cost))

    def refund(self, task: str, outcome: str = "withdrawn") -> dict:
        return self._shown(tc.refund_task(self.cmds, self.ctx(), task, outcome))

    def charge(self, cid, task: str | None = None, *, route: str = "own_loop", input_tokens: int = 0,
               output_tokens: int = 0, price: tuple[int, int] | None = None, reported_cost: int | None = None,
               ref: str | None = None) -> dict:
        cid = str(cid)
        ctx = self.ctx(f"agent:{cid}")
        if route == "own_loop":
            return self._shown(tc.charge_own_loop(self.cmds, ctx, cid, task, input_tokens, output_tokens, price, ref))
        return self._shown(tc.charge_gateway(self.cmds, ctx, cid, task, reported_cost=reported_cost,
                                             input_tokens=input_tokens, output_tokens=output_tokens, price=price,
                                             ref=ref))

    def pay(self, payer, payee, amount: int, memo: str, task: str | None = None,
            approve_over: int = t.DEFAULT_APPROVE_OVER) -> dict:
        payer, payee = str(payer), str(payee)
        return self._shown(payments.pay(self.cmds, self.ctx(f"agent:{payer}"), payer, payee, amount, memo, task,
                                  approve_over))

    def earn(self, cid, amount: int, task: str) -> None:
        """A wallet is filled the only way there is: a passed task pays its worker 20% of the real cost."""
        cost = amount * 100 // t.WORKER_MARGIN_PERCENT
        self.escrow(task, cost + amount)
        self.charge(cid, task, route="gateway", reported_cost=cost)
        self.settle(task, True, worker=cid)
