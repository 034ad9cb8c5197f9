"""Random command sequences: the live read models always equal a fold from event 1,
and ``replay --at T`` always equals what the live models showed at T."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.tally import Tally  # noqa: E402

from agentplaza.commands import plaza as plaza_commands  # noqa: E402
from agentplaza.commands.unit import Commands  # noqa: E402
from agentplaza.domain.base import MAX_REASON_CHARS, Refusal  # noqa: E402
from agentplaza.events.store import EventStore  # noqa: E402
from agentplaza.projections.registry import all_projections  # noqa: E402
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url  # noqa: E402

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
reasons = st.one_of(st.none(), st.just(""), st.text(max_size=20), st.text(min_size=MAX_REASON_CHARS + 1, max_size=MAX_REASON_CHARS + 3))


class ReplayMachine(RuleBasedStateMachine):
    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-prop."))
        self.store = EventStore.open(state_dir=self.dir)
        self.rm = ReadModels(make_engine(read_model_url(state_dir=self.dir, database_url=None)), self.store, all_projections())
        self.rm.setup()
        self.now = T0
        self.cmds = Commands(self.store, clock=lambda: self.now)
        plaza_commands.ensure_founded(self.cmds)
        self.held = False
        self.tallies: list = []
        self.seen_at: list[tuple[str, dict]] = []

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()
            self.rm.engine.dispose()
            shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _storable(reason):
        """The log keeps no NUL and no lone surrogate (a reason holding one is refused, never half written)."""
        return reason is None or ("\x00" not in reason and not any(0xD800 <= ord(c) <= 0xDFFF for c in reason))

    def _ok_reason(self, reason):
        """STOP ALL may give no reason (``plaza stop --yes``); one it gives is not blank, not too long and storable."""
        return reason is None or (reason.strip() != "" and len(reason) <= MAX_REASON_CHARS and self._storable(reason))

    @rule(reason=reasons)
    def stop_all(self, reason):
        before = self.store.max_position()
        try:
            plaza_commands.stop_all(self.cmds, self.cmds.context("owner", reason))
        except Refusal:
            assert self.held or not self._ok_reason(reason)
            assert self.store.max_position() == before  # a refusal changes nothing
            return
        assert not self.held and self._ok_reason(reason)
        self.held = True

    @rule(reason=st.one_of(st.none(), st.text(max_size=10)))
    def resume(self, reason):
        before = self.store.max_position()
        try:
            plaza_commands.resume(self.cmds, self.cmds.context("owner", reason))
        except Refusal:
            assert not self.held or not self._storable(reason)
            assert self.store.max_position() == before
            return
        assert self.held and self._storable(reason)
        self.held = False

    @rule(label=st.text(max_size=5))
    def new_tally(self, label):
        t = Tally.start(self.cmds.context("owner"), label=label)
        self.store.commit(t)
        self.tallies.append(t.id)

    @precondition(lambda self: self.tallies)
    @rule(data=st.data(), by=st.integers(-5, 5))
    def count(self, data, by):
        tid = data.draw(st.sampled_from(self.tallies))
        t = self.store.get(tid)
        t.count(self.cmds.context("owner"), by=by)
        self.store.commit(t)

    @rule()
    def follow(self):
        self.rm.catch_up()

    @rule(minutes=st.integers(1, 90))
    def time_passes(self, minutes):
        # Everything so far happened at or before now; what comes next is later.
        self.rm.catch_up()
        self.seen_at.append((self.now.isoformat(), self.rm.live()))
        self.now += dt.timedelta(minutes=minutes)

    @rule(name=st.one_of(st.none(), st.sampled_from(["plaza", "event_counts"])))
    def rebuild(self, name):
        self.rm.rebuild(name)

    @invariant()
    def live_equals_a_fold_from_event_one(self):
        if not hasattr(self, "store"):
            return
        self.rm.catch_up()
        live = self.rm.live()
        assert live == self.rm.replay()
        assert live["plaza"]["rm_plaza"][0]["held"] is self.held

    @invariant()
    def replay_at_equals_what_was_shown_then(self):
        if not hasattr(self, "store"):
            return
        for at, shown in self.seen_at[-3:]:
            assert self.rm.replay(self.store.position_at(at)) == shown

    @invariant()
    def the_chain_verifies(self):
        if hasattr(self, "store"):
            assert self.store.verify().intact


ReplayMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestReplay = ReplayMachine.TestCase
