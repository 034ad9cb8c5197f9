"""The JHRL syntax tree: frozen dataclasses, and a printer whose output parses back to the same tree.

A law reads like this (see docs/jhrl.md for the full grammar):

    law C-004a "Irreversible acts need the owner" {
      statement "An irreversible action is refused unless the owner approved that exact call."
      severity critical
      tier constitutional
      enforcement preventive
      forbid *
      when risk == irreversible and not approved
    }
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SEVERITIES = ("info", "low", "medium", "high", "critical")
LAW_TIERS = ("constitutional", "statute", "tool", "owner")
ENFORCEMENTS = ("preventive", "detective", "judgment")
EFFECTS = ("permit", "forbid", "ask")

# Facts about a call that a condition may name. `args.NAME` names one argument of the call.
FIELDS = ("role", "tier", "mode", "risk", "action", "approved")
ARG_PREFIX = "args."
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in", "matches")

KEYWORDS = frozenset(
    {"law", "statement", "severity", "tier", "enforcement", "when", "and", "or", "not",
     "in", "matches", "true", "false", "permit", "forbid", "ask"}
)
BAREWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/*-]*\Z")
LAW_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
ACTION_PATTERN = re.compile(r"(\*|[A-Za-z_][A-Za-z0-9_.:-]*\*?)\Z")

Scalar = str | int | bool
Value = Scalar | tuple  # a tuple holds scalars only (a list literal)


@dataclass(frozen=True)
class Compare:
    """`field op value`, for example `role in [builder, reviewer]` or `args.amount > 500`."""

    field: str
    op: str
    value: Value


@dataclass(frozen=True)
class Flag:
    """A boolean field on its own: `approved`."""

    field: str


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Not:
    operand: Condition


@dataclass(frozen=True)
class And:
    operands: tuple[Condition, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Condition, ...]


Condition = Compare | Flag | Const | Not | And | Or


@dataclass(frozen=True)
class Law:
    id: str
    title: str
    statement: str
    severity: str
    tier: str
    enforcement: str
    effect: str
    actions: tuple[str, ...]
    condition: Condition | None = None
    # Where the law starts in its source; not part of the law's meaning.
    line: int = field(default=1, compare=False)


# ---------------------------------------------------------------- printer


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}


def quote(text: str) -> str:
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in text) + '"'


def print_scalar(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if BAREWORD.match(value) and value not in KEYWORDS:
        return value
    return quote(value)


def print_value(value: Value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(print_scalar(v) for v in value) + "]"
    return print_scalar(value)


_PRECEDENCE = {Or: 1, And: 2, Not: 3}


def print_condition(cond: Condition, parent: int = 0) -> str:
    if isinstance(cond, Compare):
        return f"{cond.field} {cond.op} {print_value(cond.value)}"
    if isinstance(cond, Flag):
        return cond.field
    if isinstance(cond, Const):
        return "true" if cond.value else "false"
    mine = _PRECEDENCE[type(cond)]
    if isinstance(cond, Not):  # prefix and binds tightest: never needs brackets of its own
        return "not " + print_condition(cond.operand, mine)
    word = " and " if isinstance(cond, And) else " or "
    # A child at the same level is bracketed, so the tree's shape survives a reparse.
    text = word.join(print_condition(c, mine) for c in cond.operands)
    return f"({text})" if parent >= mine else text


def print_law(law: Law) -> str:
    lines = [
        f"law {law.id} {quote(law.title)} {{",
        f"  statement {quote(law.statement)}",
        f"  severity {law.severity}",
        f"  tier {law.tier}",
        f"  enforcement {law.enforcement}",
        f"  {law.effect} " + ", ".join(law.actions),
    ]
    if law.condition is not None:
        lines.append("  when " + print_condition(law.condition))
    lines.append("}")
    return "\n".join(lines)


def print_laws(laws) -> str:
    return "\n\n".join(print_law(law) for law in laws) + "\n"
