"""What an agent does with its work, done in a test the way the agents' runtime does it: through
the commands, on the hub's own store (a second writer; the hub follows the log), never through a
hub route (the guide's API has none for it).

    with AgentSide(hub) as agent:
        agent.available(7, "builder")
        agent.report("t1", 7, "Listed them", ["NOTES.md"], "Compared with git log")

Each action waits until the hub's read models show what it wrote, so the next request sees it.
A refusal is the domain's ``Refusal`` (its code and kind), raised here instead of an HTTP answer.
"""

from __future__ import annotations

import time

import httpx

from agentplaza.commands import approvals, tasks
from agentplaza.commands.unit import Commands, Done
from agentplaza.events.store import EventStore

#: The longest an action waits for the hub's read models to show it.
SETTLE_S = 10.0


class AgentSide:
    def __init__(self, hub, database_url: str | None = None):
        self.hub = hub
        url = database_url if database_url is not None else hub.env.get("APZ_DATABASE_URL")
        self.store = EventStore.open(state_dir=hub.folders.state, database_url=url)
        self.cmds = Commands(self.store)

    def __enter__(self) -> AgentSide:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def ctx(self, cid, reason: str | None = None):
        return self.cmds.context(f"agent:{cid}", reason)

    def _settled(self, done: Done):
        """Wait until the hub's read models show ``done``'s events; its value."""
        if done.positions:
            end = time.monotonic() + SETTLE_S
            with httpx.Client(base_url=self.hub.url, timeout=10) as c:
                while c.get("/v1/hub").json()["projections_at"] < done.positions[-1]:
                    if time.monotonic() > end:
                        raise TimeoutError("the hub did not fold the agent's events")
                    time.sleep(0.05)
        return done.value

    # -- the scheduler's view of the agent (the runtime reports it) ---------------------------------
    def available(self, cid, role: str, tier: str = "worker"):
        return self._settled(tasks.worker_available(self.cmds, self.ctx(cid), str(cid), role, tier))

    def busy(self, cid, activity: str = "busy"):
        return self._settled(tasks.worker_busy(self.cmds, self.ctx(cid), str(cid), activity))

    def offline(self, cid):
        return self._settled(tasks.worker_offline(self.cmds, self.cmds.context("hub"), str(cid)))

    # -- the task tools --------------------------------------------------------------------------------
    def create(self, cid, title: str, acceptance: str, budget: int | None = None, **kw):
        return self._settled(tasks.create(self.cmds, self.ctx(cid), title, acceptance, budget, **kw))

    def bid(self, number: str, cid, role: str | None, price: int):
        return self._settled(tasks.bid(self.cmds, self.ctx(cid), number, str(cid), role, price))

    def claim(self, number: str, cid, role: str | None):
        return self._settled(tasks.claim(self.cmds, self.ctx(cid), number, str(cid), role))

    def report(self, number: str, cid, summary: str, files: list[str], checks: str):
        return self._settled(tasks.report_done(self.cmds, self.ctx(cid), number, str(cid), summary, files, checks))

    def take_review(self, number: str, cid, role: str | None):
        return self._settled(tasks.take_review(self.cmds, self.ctx(cid), number, str(cid), role))

    def review(self, number: str, cid, passed: bool, notes: str = "", metered_cost: int | None = None):
        return self._settled(tasks.review(self.cmds, self.ctx(cid), number, str(cid), passed, notes,
                                          metered_cost=metered_cost))

    def give_up(self, number: str, cid, notes: str = ""):
        return self._settled(tasks.give_up(self.cmds, self.ctx(cid), number, str(cid), notes))

    # -- what other areas put in the owner's queue --------------------------------------------------------
    def request_approval(self, kind: str, title: str, **kw) -> str:
        return self._settled(approvals.request(self.cmds, self.cmds.context("hub"), kind, title, **kw))
