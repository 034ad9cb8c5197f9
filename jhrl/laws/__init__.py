"""The 80 built-in laws, in three files: the constitution (C-), the statutes (S-) and the tool laws (T-)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from ..ast import Law
from ..compiler import LawSet, compile_laws
from ..errors import JhrlCompileError
from ..grammar import parse

# file, id prefix, law tier, how many laws it holds
BUILTIN_FILES = (
    ("constitution.jhrl", "C-", "constitutional", 9),
    ("statutes.jhrl", "S-", "statute", 58),
    ("tools.jhrl", "T-", "tool", 13),
)
BUILTIN_PREFIXES = tuple(prefix for _, prefix, _, _ in BUILTIN_FILES)
BUILTIN_COUNT = sum(count for *_, count in BUILTIN_FILES)  # 80


def builtin_source(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def builtin_laws() -> tuple[Law, ...]:
    """Parse the three files and check each holds what it should."""
    laws: list[Law] = []
    for name, prefix, tier, count in BUILTIN_FILES:
        found = parse(builtin_source(name))
        for law in found:
            if not law.id.startswith(prefix) or law.tier != tier:
                raise JhrlCompileError(f"{name}: law {law.id} must have an id starting {prefix} and tier {tier}",
                                       law.line, 1)
        if len(found) != count:
            raise JhrlCompileError(f"{name} holds {len(found)} laws, not {count}")
        laws.extend(found)
    return tuple(laws)


def builtin_lawset() -> LawSet:
    return compile_laws(builtin_laws())
