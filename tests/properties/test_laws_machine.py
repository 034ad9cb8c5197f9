"""The hub's law decisions against an evaluator written here from the language's rules.

Random owner rules (permit, forbid and ask; preventive and detective; action patterns with and
without a wildcard; conditions on role, risk, mode, approval and an argument), rule changes
(add, replace, disable, enable, delete) and statute toggles, and random calls.  The evaluator
below is this file's own, from docs/jhrl.md (Semantics) and the guide's Laws chapter: a
preventive forbid always wins and is a violation; a detective forbid lets the call go on and is
recorded (a violation); read tools pass unless forbidden, though a matching ask still holds them;
anything else needs a permit (default deny, not misconduct); read-only mode refuses a change; an
ask law, or ask mode, holds the call unless the owner approved that exact call; an argument the
call does not carry makes every comparison on it false.

Each change is decided by a model of the rule book kept here too (rule ids R1, R2 ... never
reused; a title of 1 to 200 characters; a source that does not parse or holds no law refused;
a statute disabled only with a reason; a constitutional law never; a built-in law never
deleted): what the model allows must be saved, what it forbids refused with its code and nothing
recorded.  After every step the hub's decision on a set of probe calls equals the evaluator's, the
rule set rebuilt from the stored events alone equals the live one, and the laws' read models
equal a fold from event 1 and count every decision made.

Kept small so the evaluator stays exact: the calls use tool names that only the constitution's
C-001, C-002a, C-004a and C-005 and the tool law T-001 cover (checked at the start), so those
five are the only built-in laws it needs to know.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

import jhrl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.model_books import refuse_if  # noqa: E402
from support.model_check import check  # noqa: E402

from agentplaza.commands import laws as law_commands  # noqa: E402
from agentplaza.commands.unit import Commands  # noqa: E402
from agentplaza.domain.laws import LAWBOOK_ID  # noqa: E402
from agentplaza.events.store import EventStore  # noqa: E402
from agentplaza.projections.registry import all_projections  # noqa: E402
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url  # noqa: E402
from jhrl.catalog import tier_of  # noqa: E402

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
#: The tools the calls use (name, risk class of the tool) and the built-in laws that cover them.
TOOLS = ("zz.edit", "zz.read", "zz.run", "yy_tool", "plaza_vault_read", "plaza_agent_spawn", "host.exec")
BUILTINS_COVERING = {"C-001", "C-002a", "C-004a", "C-005", "T-001"}
ACTIONS = ("zz.*", "zz.edit", "zz.run", "plaza_vault_read", "*", "yy_*", "host.exec", "plaza_*")
ROLES = ("builder", "reviewer", "orchestrator", "sandbox", "breeder")
STATUTES = ("T-001", "C-004a", "S-022", "Q-1")  # a tool law, a constitutional law, a statute, none


def arg_n(call: jhrl.Call):
    return call.args.get("n")


#: Each condition the rules use, with what it means, written here (a missing argument: false).
CONDITIONS: dict[str | None, Callable[[jhrl.Call], bool]] = {
    None: lambda c: True,
    "role == builder": lambda c: c.role == "builder",
    "risk == write": lambda c: c.risk == "write",
    "args.n > 3": lambda c: isinstance(arg_n(c), int) and arg_n(c) > 3,
    "args.n != 2": lambda c: isinstance(arg_n(c), int) and arg_n(c) != 2,
    "not args.n == 1": lambda c: not (isinstance(arg_n(c), int) and arg_n(c) == 1),
    "mode == ask": lambda c: c.mode == "ask",
    "not approved": lambda c: not c.approved,
    "role in [reviewer, sandbox] or args.n == 1": lambda c: c.role in ("reviewer", "sandbox") or arg_n(c) == 1,
    "tier == orchestrator and risk != read": lambda c: c.tier == "orchestrator" and c.risk != "read",
}


@dataclass(frozen=True)
class Law:
    id: str
    effect: str  # permit, forbid, ask
    enforcement: str  # preventive, detective
    actions: tuple[str, ...]
    when: Callable[[jhrl.Call], bool]

    def covers(self, action: str) -> bool:
        return any(p == "*" or (p.endswith("*") and action.startswith(p[:-1])) or p == action for p in self.actions)


BUILTIN = {
    "C-001": Law("C-001", "forbid", "preventive", ("host.*",), lambda c: True),
    "C-002a": Law("C-002a", "forbid", "preventive", ("plaza_vault_*", "vault.*", "secret.*", "credential.*"),
                  lambda c: True),
    "C-004a": Law("C-004a", "forbid", "preventive", ("*",), lambda c: c.risk == "irreversible" and not c.approved),
    "C-005": Law("C-005", "forbid", "preventive", ("plaza_agent_spawn",), lambda c: True),
    "T-001": Law("T-001", "forbid", "preventive", ("*",), lambda c: c.role == "sandbox" and c.action != "egress.connect"),
}


@dataclass(frozen=True)
class Verdict:
    effect: str
    reason: str
    forbids: frozenset  # the preventive forbids that matched (the hub names one of them)
    recorded: frozenset
    permits: frozenset
    asks: frozenset


def evaluate(laws: list[Law], call: jhrl.Call) -> Verdict:
    """The decision on ``call`` under ``laws``, by the rules of docs/jhrl.md."""
    hit = [law for law in laws if law.covers(call.action) and law.when(call)]
    forbids = frozenset(x.id for x in hit if x.effect == "forbid" and x.enforcement == "preventive")
    recorded = frozenset(x.id for x in hit if x.effect == "forbid" and x.enforcement != "preventive")
    permits = frozenset(x.id for x in hit if x.effect == "permit")
    asks = frozenset(x.id for x in hit if x.effect == "ask")
    held = bool(asks) and not call.approved
    if forbids:
        effect, reason = "deny", "forbidden"
    elif call.risk == "read":
        effect, reason = ("ask", "ask_law") if held else ("allow", "permitted" if permits else "read")
    elif not permits:
        effect, reason = "deny", "default_deny"
    elif call.mode == "read-only":
        effect, reason = "deny", "read_only_mode"
    elif held:
        effect, reason = "ask", "ask_law"
    elif call.mode == "ask" and not call.approved:
        effect, reason = "ask", "ask_mode"
    else:
        effect, reason = "allow", "permitted"
    return Verdict(effect, reason, forbids, recorded, permits, asks)


def agrees(d: jhrl.Decision, v: Verdict) -> None:
    assert (d.effect, d.reason) == (v.effect, v.reason), (d, v)
    assert (d.forbidding in v.forbids) if v.forbids else d.forbidding is None, (d, v)
    assert set(d.recorded) == v.recorded and set(d.permits) == v.permits and set(d.asks) == v.asks, (d, v)
    assert d.violation == bool(v.forbids or v.recorded), (d, v)
    assert set(d.matched) == v.forbids | v.recorded | v.permits | v.asks, (d, v)


# -- what the rules are made of ---------------------------------------------------------------

law_parts = st.tuples(st.sampled_from(("permit", "forbid", "ask")), st.sampled_from(("preventive", "preventive", "detective")),
                      st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=2, unique=True),
                      st.sampled_from(list(CONDITIONS)))
#: A source: one or two laws, or one that does not parse, or one that holds no law.
valid = st.lists(law_parts, min_size=1, max_size=2)
sources = st.one_of(valid, valid, valid, valid, valid, st.just("typo"), st.just("empty"))
calls = st.builds(
    lambda role, tool, risk, mode, n, approved: jhrl.Call(
        role=role, action=tool, risk=risk, tier=tier_of(role), mode=mode,
        args={} if n is None else {"n": n}, approved=approved),
    st.sampled_from(ROLES), st.sampled_from(TOOLS), st.sampled_from(("read", "write", "irreversible")),
    st.sampled_from(("autonomous", "ask", "read-only")), st.one_of(st.none(), st.integers(0, 4)), st.booleans(),
)
PROBES = [jhrl.Call(role=r, action=t, risk=k, tier=tier_of(r), mode=m, args=a)
          for r in ("builder", "sandbox") for t in TOOLS for k in ("read", "write")
          for m in ("autonomous", "ask") for a in ({}, {"n": 4})]


class LawsMachine(RuleBasedStateMachine):
    def __init__(self, new_database: Callable[[], str | None] = lambda: None):
        super().__init__()
        self.new_database = new_database

    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-laws."))
        self.url = self.new_database()
        self.store = EventStore.open(state_dir=self.dir, database_url=self.url)
        self.rm = ReadModels(make_engine(read_model_url(state_dir=self.dir, database_url=self.url)), self.store,
                             all_projections())
        self.rm.setup()
        self.now = T0
        self.cmds = Commands(self.store, clock=lambda: self.now)
        self.rules: dict[str, tuple[list[Law], bool]] = {}  # R1 -> (its laws, enabled)
        self.next_rule = 1
        self.next_law = 1
        self.disabled: set[str] = set()
        self.decisions: list[jhrl.Decision] = []
        lawset = law_commands.book_in_force(self.cmds).lawset
        for tool in TOOLS:  # the evaluator knows every built-in law that covers these tools
            assert {cl.law.id for cl in lawset.candidates(tool)} <= BUILTINS_COVERING, tool

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()
            self.rm.engine.dispose()
            shutil.rmtree(self.dir, ignore_errors=True)

    def laws(self) -> list[Law]:
        out = [law for i, law in BUILTIN.items() if i not in self.disabled]
        for laws, enabled in self.rules.values():
            if enabled:
                out.extend(laws)
        return out

    # -- the model of the rule book --------------------------------------------------------------

    def compose(self, parts) -> tuple[str, list[Law]]:
        """The JHRL source of ``parts`` (fresh law ids) and the laws it means."""
        if parts in ("typo", "empty"):
            return ('law o0 "x" {\n  statment "s"\n  permit *\n}\n' if parts == "typo" else ""), []
        text, laws = [], []
        for effect, enforcement, actions, cond in parts:
            law_id = f"o{self.next_law + len(laws)}"
            text.append(f'law {law_id} "Owner law {law_id}" {{\n  statement "made up"\n  enforcement {enforcement}\n'
                        f'  {effect} {", ".join(actions)}\n' + (f"  when {cond}\n" if cond else "") + "}\n")
            laws.append(Law(law_id, effect, enforcement, tuple(actions), CONDITIONS[cond]))
        return "\n".join(text), laws

    def model_source(self, title: str, parts, laws: list[Law]) -> None:
        refuse_if(not title.strip() or len(title) > 200, "bad_title")
        refuse_if(parts == "typo", "jhrl_syntax")
        refuse_if(parts == "empty", "jhrl_compile")

    def change(self, model_says, op: str, reason: str | None = None, **fields) -> bool:
        self.now += dt.timedelta(seconds=1)
        done = check(model_says, lambda: law_commands.change(self.cmds, self.cmds.context("owner", reason), op,
                                                              **fields), self.store)
        return done is not None

    @rule(title=st.sampled_from(("a rule", "a rule", "a rule", "a rule", "", "x" * 201)), parts=sources)
    def add(self, title, parts):
        source, laws = self.compose(parts)

        def model():
            self.model_source(title, parts, laws)
            self.rules[f"R{self.next_rule}"] = (laws, True)
            self.next_rule += 1
            self.next_law += len(laws)

        self.change(model, "add", title=title, source=source)

    @rule(i=st.integers(0, 4), parts=sources)
    def replace(self, i, parts):
        rid = f"R{i}"
        source, laws = self.compose(parts)

        def model():
            refuse_if(rid not in self.rules, "rule_not_found")
            self.model_source("replaced", parts, laws)
            self.rules[rid] = (laws, self.rules[rid][1])
            self.next_law += len(laws)

        self.change(model, "replace", rule_id=rid, title="replaced", source=source)

    @rule(op=st.sampled_from(("disable", "enable", "delete")), i=st.integers(0, 4))
    def toggle_rule(self, op, i):
        rid = f"R{i}"

        def model():
            refuse_if(rid not in self.rules, "rule_not_found")
            laws, enabled = self.rules[rid]
            if op == "delete":
                del self.rules[rid]
                return
            refuse_if(op == "disable" and not enabled, "already_disabled")
            refuse_if(op == "enable" and enabled, "already_enabled")
            self.rules[rid] = (laws, op == "enable")

        self.change(model, op, rule_id=rid)

    @rule(op=st.sampled_from(("disable", "disable", "enable", "delete")), law_id=st.sampled_from(STATUTES),
          reason=st.sampled_from((None, "", "  ", "testing", "testing")))
    def toggle_statute(self, op, law_id, reason):
        def model():
            refuse_if(law_id == "Q-1", "rule_not_found")
            if op == "disable":
                refuse_if(law_id.startswith("C-"), "constitutional")
                refuse_if(not (reason or "").strip(), "reason_required")
                self.disabled.add(law_id)
            elif op == "enable":
                refuse_if(law_id not in self.disabled, "already_enabled")
                self.disabled.discard(law_id)
            else:
                refuse_if(True, "builtin_law")

        self.change(model, op, reason=reason, rule_id=law_id)

    @rule(call=calls)
    def decide(self, call):
        self.now += dt.timedelta(seconds=1)
        got = law_commands.decide_call(self.cmds, call, "agent-1").value
        agrees(got.decision, evaluate(self.laws(), call))
        self.decisions.append(got.decision)

    @rule()
    def follow(self):
        self.rm.catch_up()

    @rule()
    def rebuild(self):
        self.rm.rebuild("laws")

    @rule()
    def hub_restarts(self):
        before = self.store.max_position()
        self.store.close()
        self.rm.engine.dispose()
        self.store = EventStore.open(state_dir=self.dir, database_url=self.url)
        self.rm = ReadModels(make_engine(read_model_url(state_dir=self.dir, database_url=self.url)), self.store,
                             all_projections())
        self.rm.setup()
        self.cmds = Commands(self.store, clock=lambda: self.now)
        assert self.store.max_position() == before

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def the_hub_decides_as_the_evaluator(self):
        if not hasattr(self, "store"):
            return
        lawset = law_commands.book_in_force(self.cmds).lawset
        with self.store.fresh():
            fresh = self.store.get(LAWBOOK_ID)
        laws = self.laws()
        for call in PROBES:
            want = evaluate(laws, call)
            agrees(jhrl.decide(lawset, call), want)
            if fresh is not None:
                agrees(jhrl.decide(fresh.lawset, call), want)

    @invariant()
    def the_rule_book_is_the_model(self):
        if not hasattr(self, "store"):
            return
        live = law_commands.book_in_force(self.cmds)
        assert [(r.id, r.enabled, tuple(law.id for law in r.laws)) for r in live.rules()] == [
            (rid, enabled, tuple(x.id for x in laws)) for rid, (laws, enabled) in self.rules.items()]
        assert set(live.disabled_statutes()) == self.disabled

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
        assert totals["refused"] == sum(d.effect == "deny" for d in self.decisions)
        assert len(tables["rm_infractions"]) == totals["violations"]


#: Examples per backend: a few tens of seconds each here; APZ_PROPERTY_EXAMPLES for a longer run.
EXAMPLES = int(os.environ.get("APZ_PROPERTY_EXAMPLES", "10"))
SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_laws_machine(backend, request):
    new_database = (lambda: None) if backend == "sqlite" else request.getfixturevalue("postgres").new_database
    run_state_machine_as_test(lambda: LawsMachine(new_database), settings=SETTINGS)
