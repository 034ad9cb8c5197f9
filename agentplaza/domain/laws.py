"""The plaza's laws as events: the owner's rule changes, and a decision on every tool call.

``LawBook`` (one per plaza) records each change the owner makes to the rules: a rule added with its
title and JHRL source, replaced, disabled, enabled or deleted, and a built-in statute disabled (with
the reason, kept as the event's reason) or enabled again.  Replaying these events rebuilds a
``jhrl.RuleBook``; a change whose source does not compile is refused with the JHRL line, column and
message, and nothing is recorded.

``ToolCall`` is one decided tool call: its ``CallDecided`` event holds the call's digest, the agent,
role, tool and risk, the arguments ``rules check`` needs to replay it (never a secret value), the
decision, the laws that matched, the forbidding law, the violation flag and the enforcement mode.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import jhrl
from jhrl import ast as jast
from jhrl.catalog import TOOLS

from .base import Context, PlazaAggregate, Refusal, _validator_for, fixed_id
from .names import check_cid, role_name

LAWBOOK_ID = fixed_id("lawbook")

#: The longest argument value a decision event keeps for replays; longer ones are dropped.
MAX_RECORDED_ARG_CHARS = 256
#: The most arguments a decision event keeps.
MAX_RECORDED_ARGS = 32
#: Arguments the hub itself puts in a call for the built-in laws (docs/jhrl.md), always kept.
FACT_ARGS = frozenset({
    "own", "owner_asked", "leased", "access", "role_allowed", "card_allows", "rule_matches",
    "host", "port", "path", "budget", "bonus", "amount", "server", "tool", "hour",
})
#: Argument names that may carry a secret: never kept, whatever a law says.
SECRET_ARG = re.compile(r"secret|token|passw|passphrase|credential|api_?key|private|auth|cookie|session|bearer",
                        re.IGNORECASE)

class JhrlRefusal(Refusal):
    """A rule whose source does not parse or compile: the JHRL line, column and message."""

    def __init__(self, err: jhrl.JhrlError):
        super().__init__(err.code, f"line {err.line}, column {err.column}: {err.message}")
        self.line, self.column, self.jhrl_message = err.line, err.column, err.message


def rule_refusal(err: jhrl.RuleError) -> Refusal:
    return Refusal(err.code, err.message)


class _Book(jhrl.RuleBook):
    """A RuleBook whose copy is cheap: everything below its top-level attributes is immutable
    (drafts, compiled law sets, tuples), so a shallow copy is as good as a deep one.  The store
    copies cached aggregates; this keeps that copy from re-copying 80 compiled laws."""

    def __deepcopy__(self, memo: dict) -> _Book:
        return copy.copy(self)


def new_book() -> _Book:
    return _Book(known_tools=TOOLS)


def _changed(fn):
    """Run a rule-book step, turning its errors into refusals."""
    try:
        return fn()
    except jhrl.JhrlError as e:
        raise JhrlRefusal(e) from None
    except jhrl.RuleError as e:
        raise rule_refusal(e) from None


def warnings_of(draft: jhrl.Draft) -> list[dict]:
    """A saved or checked change's warnings: a shadowed permit or ask, a law that matches no known tool."""
    return [{"rule": w.rule_id, "law": w.law_id, "code": w.code, "message": w.message} for w in draft.warnings]


def owner_rule_of(b: jhrl.RuleBook, law_or_rule_id: str) -> str | None:
    """The owner rule an id names: a rule id (R3), or the id of one of its laws."""
    for rule in b.rules():
        if rule.id == law_or_rule_id or any(law.id == law_or_rule_id for law in rule.laws):
            return rule.id
    return None


def all_laws(b: jhrl.RuleBook) -> Iterable[jast.Law]:
    yield from b.builtins()
    for rule in b.rules():
        yield from rule.laws


def draft_change(b: jhrl.RuleBook, op: str, *, rule_id: str | None = None, title: str | None = None,
                 source: str | None = None, reason: str | None = None) -> jhrl.Draft:
    """The rule book as it would be after one change, compiled; refuses what cannot be saved.

    ``op`` is add (title, source), replace (rule_id, title, source), disable (rule_id; a built-in
    statute needs ``reason``), enable or delete (rule_id).  ``rule_id`` may name an owner rule (R3),
    one of its laws, or a built-in law.  Nothing is recorded.
    """
    if op == "add":
        return _changed(lambda: b.draft_add(title or "", source or ""))
    target = rule_id or ""
    rid = owner_rule_of(b, target)
    if op == "replace":
        if rid is None:
            raise Refusal("rule_not_found", f"no owner rule {target!r}")
        return _changed(lambda: b.draft_replace(rid, title or "", source or ""))
    if op not in ("disable", "enable", "delete"):
        raise Refusal("invalid_change", f"unknown change {op!r}")
    if rid is not None:
        rule = b.rule(rid)
        if op == "disable":
            if not rule.enabled:
                raise Refusal("already_disabled", f"rule {rid} is already disabled")
            return _changed(lambda: b.draft_disable_rule(rid))
        if op == "enable":
            if rule.enabled:
                raise Refusal("already_enabled", f"rule {rid} is already enabled")
            return _changed(lambda: b.draft_enable_rule(rid))
        return _changed(lambda: b.draft_delete_rule(rid))
    if not any(law.id == target for law in b.builtins()):
        raise Refusal("rule_not_found", f"no law or owner rule {target!r}")
    if op == "disable":
        return _changed(lambda: b.draft_disable_statute(target, reason or ""))
    if op == "enable":
        if target not in b.disabled_statutes():
            raise Refusal("already_enabled", f"{target} is not disabled")
        return _changed(lambda: b.draft_enable_statute(target))
    raise Refusal("builtin_law", f"{target} is a built-in law and cannot be deleted"
                  + ("; disable it instead" if target.startswith(("S-", "T-")) else ""))


class LawBook(PlazaAggregate):
    """The owner's rules and the disabled statutes; rebuilds the rule book from its events."""

    family = "rules"

    class Created(PlazaAggregate.Created):
        pass

    class RuleAdded(PlazaAggregate.Event):
        rule_id: str
        title: str
        source: str

        def apply(self, book: LawBook) -> None:
            draft = book.book.apply(book.book.draft_add(self.title, self.source))
            assert draft.rule_id == self.rule_id, (draft.rule_id, self.rule_id)

    class RuleReplaced(PlazaAggregate.Event):
        rule_id: str
        title: str
        source: str

        def apply(self, book: LawBook) -> None:
            book.book.replace(self.rule_id, self.title, self.source)

    class RuleDisabled(PlazaAggregate.Event):
        rule_id: str

        def apply(self, book: LawBook) -> None:
            book.book.disable_rule(self.rule_id)

    class RuleEnabled(PlazaAggregate.Event):
        rule_id: str

        def apply(self, book: LawBook) -> None:
            book.book.enable_rule(self.rule_id)

    class RuleDeleted(PlazaAggregate.Event):
        rule_id: str

        def apply(self, book: LawBook) -> None:
            book.book.delete_rule(self.rule_id)

    class StatuteDisabled(PlazaAggregate.Event):
        """The owner's reason for disabling the statute is the event's ``reason``."""

        law_id: str

        def apply(self, book: LawBook) -> None:
            book.book.disable_statute(self.law_id, self.reason or "")

    class StatuteEnabled(PlazaAggregate.Event):
        law_id: str

        def apply(self, book: LawBook) -> None:
            book.book.enable_statute(self.law_id)

    def __init__(self) -> None:
        self.book = new_book()

    @classmethod
    def open(cls, ctx: Context) -> LawBook:
        return cls.start(ctx, id=LAWBOOK_ID)

    # -- reading -------------------------------------------------------------------

    @property
    def lawset(self) -> jhrl.LawSet:
        return self.book.lawset

    def owner_law_rule(self, law_or_rule_id: str) -> str | None:
        return owner_rule_of(self.book, law_or_rule_id)

    def all_laws(self) -> Iterable[jast.Law]:
        return all_laws(self.book)

    def draft(self, op: str, **fields: Any) -> jhrl.Draft:
        return draft_change(self.book, op, **fields)

    # -- changes (recorded) ---------------------------------------------------------------

    def change(self, ctx: Context, op: str, *, rule_id: str | None = None, title: str | None = None,
               source: str | None = None) -> jhrl.Draft:
        """Make one change; the statute's reason for ``disable`` is ``ctx.reason``.  Returns the draft
        (with its save warnings).  Refuses, recording nothing, when the change cannot be saved."""
        draft = self.draft(op, rule_id=rule_id, title=title, source=source, reason=ctx.reason)
        target = rule_id or ""
        if op == "add":
            self.record(self.RuleAdded, ctx, rule_id=draft.rule_id, title=(title or "").strip(), source=source)
        elif op == "replace":
            self.record(self.RuleReplaced, ctx, rule_id=draft.rule_id, title=(title or "").strip(), source=source)
        elif self.owner_law_rule(target) is not None:
            rid = self.owner_law_rule(target)
            event = {"disable": self.RuleDisabled, "enable": self.RuleEnabled, "delete": self.RuleDeleted}[op]
            self.record(event, ctx, rule_id=rid)
        else:
            event = {"disable": self.StatuteDisabled, "enable": self.StatuteEnabled}[op]
            self.record(event, ctx, law_id=target)
        return draft


# ---------------------------------------------------------------- decisions


def law_arg_names(laws: Iterable[jast.Law]) -> set[str]:
    """Every argument name (``args.NAME``) the laws' conditions mention."""
    names: set[str] = set()

    def walk(cond: Any) -> None:
        if isinstance(cond, jast.Compare):
            if cond.field.startswith(jast.ARG_PREFIX):
                names.add(cond.field[len(jast.ARG_PREFIX):])
        elif isinstance(cond, jast.Not):
            walk(cond.operand)
        elif isinstance(cond, (jast.And, jast.Or)):
            for part in cond.operands:
                walk(part)

    for law in laws:
        if law.condition is not None:
            walk(law.condition)
    return names


def recorded_args(args: Mapping[str, Any], law_args: set[str]) -> dict[str, str | int | bool]:
    """The arguments a decision event keeps so that ``rules check`` can replay the call.

    Only arguments a law could read (one that some law mentions, or a fact the hub puts in
    every call), only plain values (true/false, whole numbers, short strings), and never one
    whose name says it may hold a secret.  The call's digest still covers every argument.
    """
    kept: dict[str, str | int | bool] = {}
    for name in sorted(args):
        if len(kept) >= MAX_RECORDED_ARGS:
            break
        value = args[name]
        if SECRET_ARG.search(name) or (name not in law_args and name not in FACT_ARGS):
            continue
        if isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2**63):
            kept[name] = value
        elif isinstance(value, str) and len(value) <= MAX_RECORDED_ARG_CHARS:
            kept[name] = value
    return kept


def enforcement_of(decision: jhrl.Decision, lawset: jhrl.LawSet) -> str | None:
    """How the law that made this a violation is enforced: preventive, detective or judgment."""
    if decision.forbidding:
        return lawset.by_id[decision.forbidding].law.enforcement
    if decision.recorded:
        return lawset.by_id[decision.recorded[0]].law.enforcement
    return None


def severity_of(decision: jhrl.Decision, lawset: jhrl.LawSet) -> str | None:
    law_id = decision.forbidding or (decision.recorded[0] if decision.recorded else None)
    return lawset.by_id[law_id].law.severity if law_id else None


class ToolCall(PlazaAggregate):
    """One tool call and the laws' decision on it."""

    family = "rules"

    class CallDecided(PlazaAggregate.Created):
        digest: str
        agent: str
        role: str
        tier: str
        mode: str
        tool: str
        risk: str
        args: dict[str, str | int | bool]
        approved: bool
        decision: str  # allow, deny, ask
        why: str  # jhrl's reason code: forbidden, default_deny, read_only_mode, ask_mode, ask_law, permitted, read
        matched: list[str]
        forbidding: str | None
        recorded: list[str]
        violation: bool
        enforcement: str | None  # of the law that made it a violation
        severity: str | None
        lawbook_version: int

        def apply(self, call: ToolCall) -> None:
            call.agent, call.tool, call.decision = self.agent, self.tool, self.decision

    def __init__(self) -> None:
        self.agent = self.tool = self.decision = ""

    @classmethod
    def decided(cls, ctx: Context, *, id: uuid.UUID, agent: str, call: jhrl.Call, decision: jhrl.Decision,
                lawset: jhrl.LawSet, law_args: set[str], lawbook_version: int) -> ToolCall:
        agent = check_cid(agent)
        role_name(call.role)  # a law may name any role, so a decision may be for any (``rules check``)
        payload = dict(
            digest=call.digest(), agent=agent, role=call.role, tier=call.tier, mode=call.mode, tool=call.action,
            risk=call.risk, args=recorded_args(call.args, law_args), approved=call.approved,
            decision=decision.effect, why=decision.reason, matched=list(decision.matched),
            forbidding=decision.forbidding, recorded=list(decision.recorded), violation=decision.violation,
            enforcement=enforcement_of(decision, lawset), severity=severity_of(decision, lawset),
            lawbook_version=lawbook_version,
        )
        payload.update(actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
        _validator_for(cls.CallDecided)(payload)
        return cls._create(cls.CallDecided, id=id, timestamp=ctx.at, **payload)


def call_from_event(data: Mapping[str, Any]) -> jhrl.Call:
    """The call a decision event recorded, as ``rules check`` replays it."""
    return jhrl.Call(role=data["role"], action=data["tool"], risk=data["risk"], tier=data["tier"],
                     mode=data["mode"], args=dict(data.get("args") or {}), approved=bool(data.get("approved")))
