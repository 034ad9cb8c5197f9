"""Conditions compiled to Python closures: `test(call) -> bool`, and `maybe(call) -> True/False/None`.

`maybe` is for questions asked before a call exists (which tools to offer): the arguments are
unknown there, so a comparison on `args.*` is None (unknown) and the logic is three-valued.

Comparing with an argument the call does not carry is false, whatever the operator.
Text comparisons are exact, except `matches`, whose shell-style globs ignore case.
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable
from typing import Any

from . import ast
from .call import AGENT_TIERS, MODES, RISKS

_MISSING = object()
TEXT_FIELDS = ("role", "tier", "mode", "risk", "action")
_KNOWN_VALUES = {"tier": AGENT_TIERS, "mode": MODES, "risk": RISKS}


class ConditionFault(Exception):
    """A condition that cannot mean anything (`role > 3`, `risk == irreversable`)."""


def _getter(name: str) -> Callable[[Any], Any]:
    if name.startswith(ast.ARG_PREFIX):
        key = name[len(ast.ARG_PREFIX):]
        return lambda c: c.args.get(key, _MISSING)
    if name not in ast.FIELDS:
        raise ConditionFault(f"unknown field {name!r}")
    return lambda c: getattr(c, name)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(x: Any, v: Any) -> bool:
    """Equality that never mixes kinds: true is not 1, "1" is not 1."""
    if isinstance(v, bool) or isinstance(x, bool):
        return x is v
    if isinstance(v, int):
        return _is_number(x) and x == v
    return x == v


def _check_value(cmp: ast.Compare) -> None:
    name, op, v = cmp.field, cmp.op, cmp.value
    items = v if isinstance(v, tuple) else (v,)
    if op in ("in", "not in") and not isinstance(v, tuple):
        raise ConditionFault(f"{op} needs a list, as in {name} {op} [a, b]")
    if op not in ("in", "not in") and isinstance(v, tuple) and op != "matches":
        raise ConditionFault(f"{op} takes one value, not a list")
    if op in ("<", "<=", ">", ">=") and not _is_number(v):
        raise ConditionFault(f"{op} compares numbers; {ast.print_value(v)} is not a number")
    if op == "matches" and not all(isinstance(x, str) for x in items):
        raise ConditionFault("matches takes a glob in quotes, or a list of them")
    if name == "approved":
        if op not in ("==", "!=") or not isinstance(v, bool):
            raise ConditionFault("approved is true or false: write `approved` or `not approved`")
    elif name in TEXT_FIELDS:
        if not all(isinstance(x, str) for x in items) or op in ("<", "<=", ">", ">="):
            raise ConditionFault(f"{name} is a name; compare it with ==, !=, in or matches")
        known = _KNOWN_VALUES.get(name)
        if known and op != "matches":
            for x in items:
                if x not in known:
                    raise ConditionFault(f"unknown {name} {x!r} (one of {', '.join(known)})")


def compile_compare(cmp: ast.Compare) -> Callable[[Any], bool]:
    _check_value(cmp)
    get, op, v = _getter(cmp.field), cmp.op, cmp.value
    if op == "==":
        if isinstance(v, str):
            return lambda c: get(c) == v
        return lambda c: _same(get(c), v)
    if op == "!=":
        return lambda c: (x := get(c)) is not _MISSING and not _same(x, v)
    if op in ("in", "not in"):
        texts = frozenset(x for x in v if isinstance(x, str))
        others = tuple(x for x in v if not isinstance(x, str))

        def member(x: Any) -> bool:
            if isinstance(x, str):
                return x in texts
            return any(_same(x, o) for o in others)

        if op == "in":
            return lambda c: member(get(c))
        return lambda c: (x := get(c)) is not _MISSING and not member(x)
    if op == "matches":
        globs = v if isinstance(v, tuple) else (v,)
        if not globs:
            return lambda c: False
        rx = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs), re.IGNORECASE | re.DOTALL)
        return lambda c: isinstance(x := get(c), str) and rx.match(x) is not None
    order = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[op]
    return lambda c: _is_number(x := get(c)) and order(x, v)


def compile_condition(cond: ast.Condition | None) -> Callable[[Any], bool]:
    if cond is None:
        return lambda c: True
    if isinstance(cond, ast.Compare):
        return compile_compare(cond)
    if isinstance(cond, ast.Flag):
        if cond.field != "approved":
            raise ConditionFault(f"{cond.field} is not true or false; compare it, as in {cond.field} == x")
        return lambda c: c.approved is True
    if isinstance(cond, ast.Const):
        value = cond.value
        return lambda c: value
    if isinstance(cond, ast.Not):
        inner = compile_condition(cond.operand)
        return lambda c: not inner(c)
    parts = tuple(compile_condition(x) for x in cond.operands)
    if isinstance(cond, ast.And):
        return lambda c: all(p(c) for p in parts)
    return lambda c: any(p(c) for p in parts)


def _uses_args(cond: ast.Condition) -> bool:
    if isinstance(cond, ast.Compare):
        return cond.field.startswith(ast.ARG_PREFIX)
    if isinstance(cond, ast.Not):
        return _uses_args(cond.operand)
    if isinstance(cond, (ast.And, ast.Or)):
        return any(_uses_args(x) for x in cond.operands)
    return False


def compile_maybe(cond: ast.Condition | None) -> Callable[[Any], bool | None]:
    """Three-valued: None where the answer depends on the call's arguments."""
    if cond is None or not _uses_args(cond):
        test = compile_condition(cond)
        return lambda c: test(c)
    if isinstance(cond, ast.Compare):
        return lambda c: None
    if isinstance(cond, ast.Not):
        inner = compile_maybe(cond.operand)
        return lambda c: None if (r := inner(c)) is None else not r
    parts = tuple(compile_maybe(x) for x in cond.operands)
    stop = isinstance(cond, ast.Or)  # an or stops at the first true, an and at the first false

    def three_valued(c: Any) -> bool | None:
        unknown = False
        for p in parts:
            r = p(c)
            if r is None:
                unknown = True
            elif r is stop:
                return stop
        return None if unknown else not stop

    return three_valued
