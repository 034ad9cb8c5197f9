"""Random rule changes and tool calls against the hub's law commands.

After every step: the live decision on a call equals the decision of a RuleBook rebuilt from the
stored events alone (and of a model RuleBook driven beside the hub); a forbid always wins; a call
that changes something runs only with a permit (default deny); a refused change records nothing;
and the laws' read models equal a fold from event 1.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import jhrl
from agentplaza.commands import laws as law_commands
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Refusal
from agentplaza.domain.laws import LAWBOOK_ID, draft_change
from agentplaza.events.store import EventStore
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url
from jhrl.catalog import tier_of

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

LAW_IDS = ("o1", "o2", "o3", "o4")
ACTIONS = ("plaza_git", "engine.*", "engine.edit", "mcp.call", "plaza_vault_read", "*", "station_*", "plaza_board_read")
CONDITIONS = (None, "role == builder", "risk == write", "args.n > 3", "mode == ask", "not approved",
              "role in [reviewer, sandbox] or args.n == 1")
ROLES = ("builder", "reviewer", "orchestrator", "sandbox", "breeder")
TOOLS = ("plaza_git", "engine.edit", "engine.read", "mcp.call", "plaza_vault_read", "station_exec",
         "plaza_board_read", "plaza_agent_spawn")
STATUTES = ("S-006a", "S-022", "T-001", "S-001", "C-002a")  # C-002a: refused, constitutional
RULE_IDS = ("R1", "R2", "R3", "R1", "R2", "R4", "o1", "o2", "nope")

law_text = st.builds(
    lambda law_id, effect, enforcement, actions, cond: (
        f'law {law_id} "Owner law {law_id}" {{\n  statement "made up"\n  enforcement {enforcement}\n'
        f'  {effect} {", ".join(actions)}\n' + (f"  when {cond}\n" if cond else "") + "}\n"),
    st.sampled_from(LAW_IDS), st.sampled_from(("permit", "forbid", "ask")),
    st.sampled_from(("preventive", "preventive", "detective")),
    st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=2, unique=True), st.sampled_from(CONDITIONS),
)
valid_sources = st.lists(law_text, min_size=1, max_size=2).map("\n".join)
sources = st.one_of(
    valid_sources, valid_sources, valid_sources, valid_sources,
    law_text.map(lambda s: s.replace("statement", "statment")),  # does not parse
    st.just(""),  # holds no law
)
calls = st.builds(
    lambda role, tool, risk, mode, n, approved: jhrl.Call(
        role=role, action=tool, risk=risk, tier=tier_of(role), mode=mode,
        args={} if n is None else {"n": n}, approved=approved),
    st.sampled_from(ROLES), st.sampled_from(TOOLS), st.sampled_from(("read", "write", "irreversible")),
    st.sampled_from(("autonomous", "ask", "read-only")), st.one_of(st.none(), st.integers(0, 6)), st.booleans(),
)
PROBES = [jhrl.Call(role=r, action=t, risk=k, tier=tier_of(r), args={"n": 4})
          for r in ("builder", "reviewer") for t in TOOLS for k in ("read", "write")]


def rebuilt_from_events(store: EventStore) -> jhrl.RuleBook:
    """A RuleBook made from the stored LawBook events alone, without the aggregate's code."""
    book = jhrl.RuleBook()
    for rec in store.read():
        d, kind = rec.data, rec.kind
        if kind == "LawBook.RuleAdded":
            assert book.add(d["title"], d["source"]).rule_id == d["rule_id"]
        elif kind == "LawBook.RuleReplaced":
            book.replace(d["rule_id"], d["title"], d["source"])
        elif kind == "LawBook.RuleDisabled":
            book.disable_rule(d["rule_id"])
        elif kind == "LawBook.RuleEnabled":
            book.enable_rule(d["rule_id"])
        elif kind == "LawBook.RuleDeleted":
            book.delete_rule(d["rule_id"])
        elif kind == "LawBook.StatuteDisabled":
            book.disable_statute(d["law_id"], rec.reason)
        elif kind == "LawBook.StatuteEnabled":
            book.enable_statute(d["law_id"])
    return book


class LawsMachine(RuleBasedStateMachine):
    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-laws."))
        self.store = EventStore.open(state_dir=self.dir)
        self.rm = ReadModels(make_engine(read_model_url(state_dir=self.dir, database_url=None)), self.store,
                             all_projections())
        self.rm.setup()
        self.now = T0
        self.cmds = Commands(self.store, clock=lambda: self.now)
        self.model = jhrl.RuleBook()  # driven beside the hub with the same changes
        self.decisions: list[jhrl.Decision] = []

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()
            self.rm.engine.dispose()
            shutil.rmtree(self.dir, ignore_errors=True)

    def _change(self, op: str, reason: str | None = None, **fields) -> None:
        self.now += dt.timedelta(seconds=1)
        try:
            expected = draft_change(self.model, op, reason=reason, **fields)
        except Refusal as r:
            expected = r
        before = self.store.max_position()
        try:
            law_commands.change(self.cmds, self.cmds.context("owner", reason), op, **fields)
        except Refusal as r:
            assert isinstance(expected, Refusal), f"hub refused {op} {fields} ({r.code}) but the model saved it"
            assert r.code == expected.code
            assert self.store.max_position() == before  # a refusal changes nothing
            return
        assert not isinstance(expected, Refusal), f"hub saved {op} {fields}; the model refused ({expected.code})"
        self.model.apply(expected)

    @rule(title=st.sampled_from(("a rule", "a rule", "a rule", "", "x" * 201)), source=sources)
    def add(self, title, source):
        self._change("add", title=title, source=source)

    @rule(rule_id=st.sampled_from(RULE_IDS), source=sources)
    def replace(self, rule_id, source):
        self._change("replace", rule_id=rule_id, title="replaced", source=source)

    @rule(op=st.sampled_from(("disable", "enable", "delete")), rule_id=st.sampled_from(RULE_IDS))
    def toggle_rule(self, op, rule_id):
        self._change(op, rule_id=rule_id)

    @rule(op=st.sampled_from(("disable", "enable", "delete")), law_id=st.sampled_from(STATUTES),
          reason=st.sampled_from((None, "", "  ", "testing")))
    def toggle_statute(self, op, law_id, reason):
        self._change(op, reason=reason, rule_id=law_id)

    @rule(call=calls)
    def decide(self, call):
        self.now += dt.timedelta(seconds=1)
        got = law_commands.decide_call(self.cmds, call, "agent-1").value
        assert got.decision == jhrl.decide(self.model.lawset, call)
        self.decisions.append(got.decision)

    @rule()
    def follow(self):
        self.rm.catch_up()

    @rule()
    def rebuild(self):
        self.rm.rebuild("laws")

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def live_law_set_equals_one_rebuilt_from_the_events(self):
        if not hasattr(self, "store"):
            return
        live = law_commands.book_in_force(self.cmds)
        rebuilt = rebuilt_from_events(self.store)
        assert live.disabled_statutes() == rebuilt.disabled_statutes() == self.model.disabled_statutes()
        assert [(r.id, r.enabled, r.source) for r in live.rules()] == [(r.id, r.enabled, r.source) for r in rebuilt.rules()]
        with self.store.fresh():
            fresh = self.store.get(LAWBOOK_ID)
        for call in PROBES:
            d = jhrl.decide(live.lawset, call)
            assert d == jhrl.decide(rebuilt.lawset, call) == jhrl.decide(self.model.lawset, call)
            if fresh is not None:
                assert d == jhrl.decide(fresh.lawset, call)

    @invariant()
    def forbid_wins_and_default_deny(self):
        if not hasattr(self, "store"):
            return
        lawset = law_commands.book_in_force(self.cmds).lawset
        for call in PROBES:
            d = jhrl.decide(lawset, call)
            matched = [lawset.by_id[i].law for i in d.matched]
            if any(law.effect == "forbid" and law.enforcement == "preventive" for law in matched):
                assert d.refused and d.violation and d.forbidding is not None
            if d.allowed and call.risk != "read":
                assert d.permits and any(law.effect == "permit" for law in matched)
            if d.refused and d.reason == "default_deny":  # not misconduct, unless a detective law recorded it
                assert d.violation == bool(d.recorded)
        for d in self.decisions:
            if d.violation:
                assert d.forbidding or d.recorded

    @invariant()
    def read_models_equal_a_replay(self):
        if not hasattr(self, "store"):
            return
        self.rm.catch_up()
        live = self.rm.live(["laws"])
        assert live == self.rm.replay(names=["laws"])
        tables = live["laws"]
        totals = tables["rm_rule_totals"][0] if tables["rm_rule_totals"] else {"calls": 0, "violations": 0, "refused": 0}
        assert totals["calls"] == len(self.decisions)
        assert totals["violations"] == sum(d.violation for d in self.decisions)
        assert totals["refused"] == sum(d.refused for d in self.decisions)
        assert len(tables["rm_infractions"]) == totals["violations"]
        refusals = {}
        for d in self.decisions:
            if d.forbidding:
                refusals[d.forbidding] = refusals.get(d.forbidding, 0) + 1
        assert {r["law_id"]: r["refused"] for r in tables["rm_law_counts"] if r["refused"]} == refusals
        assert len(tables["rm_recent_calls"]) == min(len(self.decisions), 500)


LawsMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLawsMachine = LawsMachine.TestCase
