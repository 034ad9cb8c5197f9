"""Compile laws into a LawSet: each law's condition becomes a closure, and laws are indexed by action.

A decision looks up only the laws whose action patterns cover the call's action: an exact name
(`mcp.call`), a prefix wildcard (`engine.*` covers `engine.read`), or `*`. The candidates for each
action name are worked out once and cached, so a decision touches a handful of laws.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import ast
from .conditions import ConditionFault, compile_condition, compile_maybe
from .errors import JhrlCompileError
from .grammar import parse

MAX_CACHED_ACTIONS = 4096  # distinct action names whose candidate laws a LawSet remembers


@dataclass(frozen=True, eq=False)
class CompiledLaw:
    law: ast.Law
    order: int  # position in the law set; decisions list laws in this order
    test: Callable[[Any], bool]
    maybe: Callable[[Any], bool | None]

    @property
    def id(self) -> str:
        return self.law.id

    @property
    def effect(self) -> str:
        return self.law.effect

    @property
    def preventive(self) -> bool:
        return self.law.enforcement == "preventive"


def pattern_covers(pattern: str, action: str) -> bool:
    if pattern.endswith("*"):
        return action.startswith(pattern[:-1])
    return action == pattern


class LawSet:
    """An immutable, compiled set of laws. Build one with `compile_laws` or `compile_source`."""

    def __init__(self, laws: tuple[CompiledLaw, ...]):
        self.laws = laws
        self.by_id = {cl.id: cl for cl in laws}
        exact: dict[str, list[CompiledLaw]] = {}
        prefixes: dict[str, list[CompiledLaw]] = {}
        for cl in laws:
            for pattern in cl.law.actions:
                if pattern.endswith("*"):
                    prefixes.setdefault(pattern[:-1], []).append(cl)
                else:
                    exact.setdefault(pattern, []).append(cl)
        self._exact = {k: tuple(v) for k, v in exact.items()}
        self._prefixes = {k: tuple(v) for k, v in prefixes.items()}
        self._prefix_lengths = tuple(sorted({len(p) for p in prefixes}))
        self._cache: dict[str, tuple[CompiledLaw, ...]] = {}

    def __len__(self) -> int:
        return len(self.laws)

    def __iter__(self):
        return iter(self.laws)

    def __contains__(self, law_id: str) -> bool:
        return law_id in self.by_id

    def source_laws(self) -> tuple[ast.Law, ...]:
        return tuple(cl.law for cl in self.laws)

    def candidates(self, action: str) -> tuple[CompiledLaw, ...]:
        """The laws whose action patterns cover `action`, in law order."""
        found = self._cache.get(action)
        if found is not None:
            return found
        hits = list(self._exact.get(action, ()))
        for length in self._prefix_lengths:
            if length > len(action):
                break
            hits.extend(self._prefixes.get(action[:length], ()))
        unique = {cl.order: cl for cl in hits}
        found = tuple(unique[k] for k in sorted(unique))
        if len(self._cache) < MAX_CACHED_ACTIONS:
            self._cache[action] = found
        return found


def compile_law(law: ast.Law, order: int = 0) -> CompiledLaw:
    for pattern in law.actions:
        if not ast.ACTION_PATTERN.match(pattern):
            raise JhrlCompileError(f"law {law.id}: bad action pattern {pattern!r}", law.line, 1)
    if not law.actions:
        raise JhrlCompileError(f"law {law.id} names no action", law.line, 1)
    try:
        return CompiledLaw(law, order, compile_condition(law.condition), compile_maybe(law.condition))
    except ConditionFault as fault:
        raise JhrlCompileError(f"law {law.id}: {fault}", law.line, 1) from None


def compile_laws(laws: Iterable[ast.Law]) -> LawSet:
    """Compile the whole set at once; a repeated id or a meaningless condition raises JhrlCompileError."""
    compiled: list[CompiledLaw] = []
    seen: set[str] = set()
    for law in laws:
        if law.id in seen:
            raise JhrlCompileError(f"law {law.id} is defined twice", law.line, 1)
        seen.add(law.id)
        compiled.append(compile_law(law, len(compiled)))
    return LawSet(tuple(compiled))


def compile_source(text: str) -> LawSet:
    return compile_laws(parse(text))


EMPTY = LawSet(())
