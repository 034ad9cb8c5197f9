"""Random agents talking, working, rating each other, the owner's ratings, time passing and hub
restarts, on the injected clock. After every step: every reputation is 0-100 or "unrated", unrated
exactly while the weighed evidence is under the threshold; the society's read models equal a fold
from event 1; and a replay at any earlier time T gives the reputation the live model showed at T."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.treasury import Clock, Plaza  # noqa: E402

from agentplaza.commands import agents as ac  # noqa: E402
from agentplaza.commands import conversations, society  # noqa: E402
from agentplaza.domain.base import Refusal  # noqa: E402
from agentplaza.domain.society import SCORES  # noqa: E402
from agentplaza.projections import society as rm  # noqa: E402
from agentplaza.sim.invariants import reputation_problem  # noqa: E402

AGENTS = 4
index = st.integers(min_value=0, max_value=AGENTS - 1)


class SocietyMachine(RuleBasedStateMachine):
    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-society."))
        self.clock = Clock()
        self.p = Plaza(self.dir, None, self.clock)
        self.cids = ac.spawn(self.p.cmds, self.p.ctx(), "builder", AGENTS).value
        self.tasks = 0
        self.shown: list[tuple] = []  # (time, position, reputation as the live model showed it)

    def teardown(self):
        if hasattr(self, "p"):
            self.p.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def attempt(self, fn, *args):
        before = self.p.store.max_position()
        try:
            return fn(self.p.cmds, *args)
        except Refusal:
            assert self.p.store.max_position() == before, "a refusal changed something"
            return None

    def agent(self, i: int) -> int:
        return self.cids[i]

    @rule(a=index, b=index)
    def talk(self, a, b):
        self.attempt(conversations.send, self.p.ctx(f"agent:{self.agent(a)}"), self.agent(b), "hello")

    @rule(worker=index, reviewer=index, passed=st.booleans())
    def review(self, worker, reviewer, passed):
        self.tasks += 1
        w, r = str(self.agent(worker)), str(self.agent(reviewer))
        ctx = self.p.ctx(f"agent:{r}")
        self.p.cmds.run(lambda unit: society.worked_in(unit, ctx, f"t{self.tasks}", w, r, passed))

    @rule(a=index, b=index, score=st.sampled_from(sorted(SCORES)))
    def rate(self, a, b, score):
        self.attempt(society.rate, self.p.ctx(f"agent:{self.agent(a)}"), self.agent(a), self.agent(b), score)

    @rule(i=index, up=st.booleans())
    def owner_rates(self, i, up):
        self.attempt(society.owner_rates, self.p.ctx(), self.agent(i), up)

    @rule(hours=st.integers(min_value=1, max_value=24 * 40))
    def time_passes(self, hours):
        self.clock.advance(hours=hours)

    @rule()
    def restart(self):
        self.p.close()
        self.p = Plaza(self.dir, None, self.clock)

    @rule()
    def look(self):
        self.p.rm.catch_up()
        self.shown.append((self.clock(), self.p.store.max_position(),
                           rm.reputation_rows(self.p.rm, self.clock())))

    @invariant()
    def reputation_is_0_to_100_or_unrated_until_the_threshold(self):
        if not hasattr(self, "p"):
            return
        self.p.rm.catch_up()
        assert reputation_problem(rm.reputation_rows(self.p.rm, self.clock())) is None

    @invariant()
    def the_read_model_equals_a_fold_from_event_one(self):
        if not hasattr(self, "p"):
            return
        self.p.rm.catch_up()
        assert self.p.rm.live(["society"]) == self.p.rm.replay(names=["society"])

    @invariant()
    def a_replay_at_t_shows_what_the_live_model_showed_at_t(self):
        if not hasattr(self, "p"):
            return
        for at, position, shown in self.shown[-3:]:
            folded = self.p.rm.replay(position, ["society", "agents"])
            again = rm.reputation_from(folded["society"]["rm_society_facts"], folded["agents"]["rm_agents"], at)
            assert again == shown


TestSociety = SocietyMachine.TestCase
TestSociety.settings = settings(max_examples=12, stateful_step_count=25, deadline=None,
                                suppress_health_check=[HealthCheck.too_slow])
