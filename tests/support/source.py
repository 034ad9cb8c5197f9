"""Reading the project's own source in tests."""

from __future__ import annotations

import ast
from pathlib import Path

#: Tries of one ``ast.parse`` that CPython 3.11 refuses with "AST constructor recursion depth mismatch": its AST
#: builder keeps one depth count for the interpreter, which another thread building an AST at the same moment
#: upsets (python/cpython#106905; in a test worker, a thread left by an earlier test importing a module that
#: ``anyio`` compiles lazily).  The source is fine: the same parse passes again.
PARSE_TRIES = 3


def parsed(path: Path | str) -> ast.Module:
    """The module at ``path``, parsed."""
    for left in range(PARSE_TRIES - 1, -1, -1):
        try:
            return ast.parse(Path(path).read_text())
        except SystemError as e:
            if left == 0 or "recursion depth mismatch" not in str(e):
                raise
    raise AssertionError("unreachable")
