"""Explain a decision: why a call is allowed, held or refused, and, for a refusal, why not.

For each candidate permit (a permit whose actions cover the call) the explanation lists the
conditions that failed, with the value the call actually had.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ast
from .call import ASK_LAW, ASK_MODE, DEFAULT_DENY, FORBIDDEN, READ, READ_ONLY_MODE, Call, Decision
from .compiler import LawSet
from .conditions import _MISSING, compile_condition
from .evaluator import decide


@dataclass(frozen=True)
class PermitNote:
    law_id: str
    title: str
    matched: bool
    failed: tuple[str, ...]  # each failed condition, with what the call had


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    summary: str
    forbids: tuple[tuple[str, str], ...]  # (law id, title) of each forbid that matched
    permits: tuple[PermitNote, ...]

    def lines(self) -> list[str]:
        out = [self.summary]
        for law_id, title in self.forbids:
            out.append(f"  forbid {law_id} ({title}) matched")
        for note in self.permits:
            if note.matched:
                out.append(f"  permit {note.law_id} ({note.title}) matched")
            else:
                out.append(f"  permit {note.law_id} ({note.title}) did not match:")
                out.extend(f"    - {why}" for why in note.failed)
        return out


def _actual(cond: ast.Compare, call: Call) -> str:
    if cond.field.startswith(ast.ARG_PREFIX):
        value = call.args.get(cond.field[len(ast.ARG_PREFIX):], _MISSING)
        if value is _MISSING:
            return f"the call has no {cond.field}"
    else:
        value = getattr(call, cond.field)
    shown = ast.print_scalar(value) if isinstance(value, (str, int, bool)) else repr(value)
    return f"the call has {cond.field} = {shown}"


def failed_conditions(cond: ast.Condition | None, call: Call) -> list[str]:
    """The parts of `cond` that are false for `call`; empty when `cond` holds."""
    if cond is None or compile_condition(cond)(call):
        return []
    if isinstance(cond, ast.And):
        return [why for part in cond.operands for why in failed_conditions(part, call)]
    text = ast.print_condition(cond)
    if isinstance(cond, ast.Compare):
        return [f"{text} ({_actual(cond, call)})"]
    if isinstance(cond, ast.Flag):
        return ["approved (the owner has not approved this exact call)"]
    if isinstance(cond, ast.Not):
        return [f"{text} (but {ast.print_condition(cond.operand)} holds)"]
    if isinstance(cond, ast.Or):
        alternatives = "; ".join(w for part in cond.operands for w in failed_conditions(part, call))
        return [f"none of the alternatives holds: {alternatives}"]
    return [text]


def _summary(d: Decision, call: Call, lawset: LawSet) -> str:
    title = lambda law_id: lawset.by_id[law_id].law.title  # noqa: E731
    if d.reason == FORBIDDEN:
        return f"refused: {d.forbidding} ({title(d.forbidding)}) forbids {call.action}; a violation"
    if d.reason == DEFAULT_DENY:
        return f"refused: no law permits {call.action} for this call (default deny, not misconduct)"
    if d.reason == READ_ONLY_MODE:
        return f"refused: the agent is read-only and {call.action} changes something"
    if d.reason == ASK_MODE:
        return f"held for the owner's approval: the agent is in ask mode and {call.action} changes something"
    if d.reason == ASK_LAW:
        return f"held for the owner's approval by {', '.join(d.asks)}"
    if d.reason == READ:
        return f"allowed: {call.action} is a read tool, and no law forbids it"
    return f"allowed by {', '.join(d.permits)}"


def explain(lawset: LawSet, call: Call) -> Explanation:
    d = decide(lawset, call)
    forbids, permits = [], []
    for cl in lawset.candidates(call.action):
        law = cl.law
        if law.effect == "forbid" and law.id in d.matched:
            forbids.append((law.id, law.title))
        elif law.effect == "permit":
            failed = tuple(failed_conditions(law.condition, call))
            permits.append(PermitNote(law.id, law.title, not failed, failed))
    summary = _summary(d, call, lawset)
    if d.recorded:
        summary += f" (recorded by {', '.join(d.recorded)})"
    return Explanation(d, summary, tuple(forbids), tuple(permits))
