"""A small treasury on a real store, with a clock the test moves."""

from __future__ import annotations

import datetime as dt

from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands import treasury as tc
from agentplaza.commands.unit import Commands
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
