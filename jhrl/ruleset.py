"""The owner's rules at runtime, beside the built-in laws. Pure and in memory: the hub records each
change as an event and rebuilds a RuleBook by replaying them.

Every change is made in two steps. A `draft_*` method compiles the whole law set as it would be
after the change and returns a Draft (or raises JhrlError with the line and message, changing
nothing). `apply(draft)` swaps the draft's law set in with one assignment. The one-step methods
(`add`, `disable_rule`, ...) do both. `check` replays recorded calls against a draft's law set and
shows which decisions would change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from . import ast
from .call import Call, Decision
from .compiler import LawSet, compile_laws, pattern_covers
from .errors import JhrlCompileError
from .evaluator import decide
from .grammar import parse
from .laws import BUILTIN_PREFIXES, builtin_laws

CHECK_WINDOW = 500  # recent calls `check` replays; `check_all` replays a whole history
MAX_OWNER_RULES = 1000
MAX_TITLE_CHARS = 200
MAX_REASON_CHARS = 1000
DISABLEABLE_PREFIXES = ("S-", "T-")  # statutes and tool laws; the constitution cannot be disabled
RULE_ID_PREFIX = "R"


class RuleError(Exception):
    """A refused change to the rule book. Nothing changed."""

    def __init__(self, code: str, message: str):
        self.code, self.message = code, message
        super().__init__(message)


@dataclass(frozen=True)
class OwnerRule:
    id: str
    title: str
    source: str
    laws: tuple[ast.Law, ...]
    enabled: bool = True


@dataclass(frozen=True)
class RuleWarning:
    rule_id: str
    law_id: str
    code: str  # "shadowed" or "no_known_tool"
    message: str


@dataclass(frozen=True)
class Draft:
    """A rule book as it would be after one change, already compiled."""

    base_version: int
    rules: tuple[OwnerRule, ...]
    disabled: tuple[tuple[str, str], ...]  # (statute id, reason)
    next_rule: int
    lawset: LawSet
    warnings: tuple[RuleWarning, ...] = ()
    rule_id: str | None = None  # the rule the change made or touched


@dataclass(frozen=True)
class Change:
    index: int  # position in the calls given to check
    call: Call
    before: Decision
    after: Decision


@dataclass(frozen=True)
class CheckReport:
    replayed: int
    changes: tuple[Change, ...] = field(default=())

    @property
    def newly_refused(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.after.refused and not c.before.refused)

    @property
    def newly_allowed(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.after.allowed and not c.before.allowed)


def _conjuncts(cond: ast.Condition | None) -> frozenset:
    if cond is None:
        return frozenset()
    if isinstance(cond, ast.And):
        return frozenset(cond.operands)
    return frozenset({cond})


def _pattern_within(inner: str, outer: str) -> bool:
    """Every action `inner` covers is covered by `outer`."""
    if outer.endswith("*"):
        return inner.startswith(outer[:-1])
    return inner == outer


def shadowing_forbid(law: ast.Law, lawset: LawSet) -> ast.Law | None:
    """A preventive forbid that matches every call `law` (a permit or ask) could match, if there is one.

    Sound but not complete: the forbid's actions must cover the law's, and each part of the forbid's
    condition must appear in the law's own condition (so whenever the law holds, the forbid does).
    """
    mine = _conjuncts(law.condition)
    for cl in lawset.laws:
        f = cl.law
        if f.effect != "forbid" or f.enforcement != "preventive" or f.id == law.id:
            continue
        if all(any(_pattern_within(p, q) for q in f.actions) for p in law.actions) and _conjuncts(f.condition) <= mine:
            return f
    return None


class RuleBook:
    def __init__(self, builtins: Sequence[ast.Law] | None = None, known_tools: Iterable[str] | None = None):
        self._builtins = tuple(builtin_laws() if builtins is None else builtins)
        self._builtin_ids = {law.id for law in self._builtins}
        self.known_tools = None if known_tools is None else tuple(known_tools)
        self._state = Draft(0, (), (), 1, compile_laws(self._builtins))
        self._version = 0

    # ------------------------------------------------------------ reading

    @property
    def version(self) -> int:
        return self._version

    @property
    def lawset(self) -> LawSet:
        return self._state.lawset

    def rules(self) -> tuple[OwnerRule, ...]:
        return self._state.rules

    def rule(self, rule_id: str) -> OwnerRule:
        for rule in self._state.rules:
            if rule.id == rule_id:
                return rule
        raise RuleError("rule_not_found", f"no owner rule {rule_id}")

    def disabled_statutes(self) -> dict[str, str]:
        return dict(self._state.disabled)

    def builtins(self) -> tuple[ast.Law, ...]:
        return self._builtins

    # ------------------------------------------------------------ drafts

    def _draft(self, rules, disabled, next_rule, rule_id=None, known_tools=None) -> Draft:
        off = dict(disabled)
        laws = [law for law in self._builtins if law.id not in off]
        for rule in rules:
            if rule.enabled:
                laws.extend(rule.laws)
        lawset = compile_laws(laws)
        warnings = ()
        if rule_id is not None:
            rule = next(r for r in rules if r.id == rule_id)
            warnings = tuple(self._warnings(rule, lawset, known_tools))
        return Draft(self._version, tuple(rules), tuple(sorted(off.items())), next_rule, lawset, warnings, rule_id)

    def _warnings(self, rule: OwnerRule, lawset: LawSet, known_tools) -> Iterable[RuleWarning]:
        tools = self.known_tools if known_tools is None else tuple(known_tools)
        for law in rule.laws if rule.enabled else ():
            if law.effect in ("permit", "ask"):
                f = shadowing_forbid(law, lawset)
                if f is not None:
                    yield RuleWarning(rule.id, law.id, "shadowed",
                                      f"{law.id} can never take effect: {f.id} ({f.title}) forbids every call it covers")
            if tools is not None and not any(pattern_covers(p, t) for p in law.actions for t in tools):
                yield RuleWarning(rule.id, law.id, "no_known_tool",
                                  f"{law.id} matches no known tool ({', '.join(law.actions)})")

    def _parse_rule(self, title: str, source: str) -> tuple[ast.Law, ...]:
        if not title.strip() or len(title) > MAX_TITLE_CHARS:
            raise RuleError("bad_title", f"a rule needs a title of 1 to {MAX_TITLE_CHARS} characters")
        laws = parse(source)
        if not laws:
            raise JhrlCompileError("the rule holds no law", 1, 1)
        for law in laws:
            if law.id.startswith(BUILTIN_PREFIXES):
                raise JhrlCompileError(
                    f"law {law.id}: ids starting {', '.join(BUILTIN_PREFIXES)} belong to the built-in laws", law.line, 1)
        return laws

    def draft_add(self, title: str, source: str, known_tools: Iterable[str] | None = None) -> Draft:
        s = self._state
        if len(s.rules) >= MAX_OWNER_RULES:
            raise RuleError("too_many_rules", f"the plaza keeps at most {MAX_OWNER_RULES} owner rules")
        rule = OwnerRule(f"{RULE_ID_PREFIX}{s.next_rule}", title.strip(), source, self._parse_rule(title, source))
        return self._draft(s.rules + (rule,), s.disabled, s.next_rule + 1, rule.id, known_tools)

    def draft_replace(self, rule_id: str, title: str, source: str,
                      known_tools: Iterable[str] | None = None) -> Draft:
        old = self.rule(rule_id)
        new = OwnerRule(rule_id, title.strip(), source, self._parse_rule(title, source), old.enabled)
        rules = tuple(new if r.id == rule_id else r for r in self._state.rules)
        return self._draft(rules, self._state.disabled, self._state.next_rule, rule_id, known_tools)

    def _draft_toggle(self, rule_id: str, enabled: bool) -> Draft:
        old = self.rule(rule_id)
        rules = tuple(OwnerRule(r.id, r.title, r.source, r.laws, enabled) if r is old else r
                      for r in self._state.rules)
        return self._draft(rules, self._state.disabled, self._state.next_rule, rule_id)

    def draft_disable_rule(self, rule_id: str) -> Draft:
        return self._draft_toggle(rule_id, False)

    def draft_enable_rule(self, rule_id: str) -> Draft:
        return self._draft_toggle(rule_id, True)

    def draft_delete_rule(self, rule_id: str) -> Draft:
        self.rule(rule_id)
        rules = tuple(r for r in self._state.rules if r.id != rule_id)
        return self._draft(rules, self._state.disabled, self._state.next_rule)

    def _statute(self, law_id: str) -> None:
        if law_id not in self._builtin_ids:
            raise RuleError("law_not_found", f"no built-in law {law_id}")
        if not law_id.startswith(DISABLEABLE_PREFIXES):
            raise RuleError("constitutional", f"{law_id} is constitutional and cannot be disabled")

    def draft_disable_statute(self, law_id: str, reason: str) -> Draft:
        self._statute(law_id)
        reason = (reason or "").strip()
        if not reason:
            raise RuleError("reason_required", f"give a reason to disable {law_id}")
        if len(reason) > MAX_REASON_CHARS:
            raise RuleError("reason_too_long", f"a reason has at most {MAX_REASON_CHARS} characters")
        disabled = dict(self._state.disabled)
        disabled[law_id] = reason
        return self._draft(self._state.rules, disabled.items(), self._state.next_rule)

    def draft_enable_statute(self, law_id: str) -> Draft:
        self._statute(law_id)
        disabled = {k: v for k, v in self._state.disabled if k != law_id}
        return self._draft(self._state.rules, disabled.items(), self._state.next_rule)

    # ------------------------------------------------------------ applying

    def apply(self, draft: Draft) -> Draft:
        """Swap the draft in. A draft made before another change landed is refused."""
        if draft.base_version != self._version:
            raise RuleError("stale_draft", "the rules changed since this draft was made; make it again")
        self._version += 1
        self._state = draft  # one assignment: readers see the old set or the new, never a mix
        return draft

    def add(self, title: str, source: str, known_tools: Iterable[str] | None = None) -> Draft:
        return self.apply(self.draft_add(title, source, known_tools))

    def replace(self, rule_id: str, title: str, source: str) -> Draft:
        return self.apply(self.draft_replace(rule_id, title, source))

    def disable_rule(self, rule_id: str) -> Draft:
        return self.apply(self.draft_disable_rule(rule_id))

    def enable_rule(self, rule_id: str) -> Draft:
        return self.apply(self.draft_enable_rule(rule_id))

    def delete_rule(self, rule_id: str) -> Draft:
        return self.apply(self.draft_delete_rule(rule_id))

    def disable_statute(self, law_id: str, reason: str) -> Draft:
        return self.apply(self.draft_disable_statute(law_id, reason))

    def enable_statute(self, law_id: str) -> Draft:
        return self.apply(self.draft_enable_statute(law_id))

    # ------------------------------------------------------------ checking

    def check(self, changed: LawSet | Draft, last_calls: Sequence[Call], limit: int = CHECK_WINDOW) -> CheckReport:
        """Replay the last `limit` calls (500 by default) and show which decisions would change."""
        calls = list(last_calls)[-limit:] if limit > 0 else []
        return self.check_all(changed, calls)

    def check_all(self, changed: LawSet | Draft, history: Iterable[Call]) -> CheckReport:
        """Replay every call in `history` (`rules check --all`)."""
        after_set = changed.lawset if isinstance(changed, Draft) else changed
        return check_calls(self.lawset, after_set, history)


def check_calls(before_set: LawSet, after_set: LawSet, calls: Iterable[Call]) -> CheckReport:
    changes, n = [], 0
    for n, call in enumerate(calls, 1):
        before, after = decide(before_set, call), decide(after_set, call)
        if (before.effect, before.violation) != (after.effect, after.violation):
            changes.append(Change(n - 1, call, before, after))
    return CheckReport(n, tuple(changes))


def laws_overview(book: RuleBook) -> list[Mapping[str, object]]:
    """One row per law, built-in and owner, for the Rules screen (the hub adds refusal counts)."""
    off = book.disabled_statutes()
    rows = [{"id": law.id, "title": law.title, "origin": "builtin", "tier": law.tier, "severity": law.severity,
             "effect": law.effect, "enabled": law.id not in off, "reason": off.get(law.id)}
            for law in book.builtins()]
    for rule in book.rules():
        rows.extend({"id": law.id, "title": law.title, "origin": rule.id, "tier": law.tier, "severity": law.severity,
                     "effect": law.effect, "enabled": rule.enabled, "reason": None} for law in rule.laws)
    return rows
