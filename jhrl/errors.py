"""The one kind of error JHRL raises for a bad source: it names the line, the column and the fault."""

from __future__ import annotations


class JhrlError(Exception):
    """A source that does not parse or compile. `line` and `column` count from 1."""

    code = "jhrl_invalid"

    def __init__(self, message: str, line: int = 1, column: int = 1):
        self.message = message
        self.line = line
        self.column = column
        super().__init__(f"line {line}, column {column}: {message}")


class JhrlSyntaxError(JhrlError):
    code = "jhrl_syntax"


class JhrlCompileError(JhrlError):
    """The source parsed, but the laws cannot stand together (a repeated id, a reserved prefix ...)."""

    code = "jhrl_compile"


def line_col(text: str, index: int) -> tuple[int, int]:
    index = max(0, min(index, len(text)))
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column
