"""The JHRL grammar, in pyparsing. `parse(text)` gives a tuple of `Law`s or raises `JhrlSyntaxError`.

    source     := law*
    law        := "law" LAW_ID STRING "{" attribute* effect patterns ["when" condition] "}"
    attribute  := "statement" STRING | "severity" WORD | "tier" WORD | "enforcement" WORD
    effect     := "permit" | "forbid" | "ask"
    patterns   := PATTERN ("," PATTERN)*
    condition  := conj ("or" conj)*
    conj       := unary ("and" unary)*
    unary      := "not" unary | "(" condition ")" | "true" | "false" | compare | FIELD
    compare    := FIELD OP value
    value      := STRING | INT | "true" | "false" | BAREWORD | "[" [scalar ("," scalar)*] "]"

`#` starts a comment that runs to the end of the line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyparsing as pp

from . import ast
from .errors import JhrlSyntaxError, line_col

MAX_SOURCE_CHARS = 262_144  # one rule's source; the 80 built-ins together are about 30 KB
MAX_NESTING = 32  # brackets inside one condition

_ESCAPED = {"n": "\n", "r": "\r", "t": "\t"}
_VALUE_RESERVED = frozenset({"and", "or", "not", "in", "matches", "true", "false"})


def _unquote(text: str) -> str:
    out, chars, i = [], text[1:-1], 0
    while i < len(chars):
        ch = chars[i]
        if ch == "\\" and i + 1 < len(chars):
            i += 1
            ch = _ESCAPED.get(chars[i], chars[i])
        out.append(ch)
        i += 1
    return "".join(out)


def _tokens(action: Callable[[pp.ParseResults], Any]) -> Callable[[str, int, pp.ParseResults], Any]:
    """A parse action of the tokens alone, given pyparsing's whole (text, location, tokens).

    pyparsing calls an action that takes fewer arguments by trying it with three, then two, then one, and
    keeps what worked in state shared by every thread, unlocked: two threads parsing for the first time at
    once (two agents' VMs saying hello to a new hub) could leave it calling with none, and every parse of the
    process failed from then on (``missing 1 required positional argument: 't'``).  An action that takes
    all three is called as it is the first time and every time."""
    return lambda s, loc, t: action(t)


def _kw(word: str) -> pp.ParserElement:
    return pp.Keyword(word, ident_chars=pp.identbodychars + "-.")


def _build() -> pp.ParserElement:
    string = pp.Regex(r'"(?:[^"\\\n]|\\.)*"').set_name("a quoted string")
    string.set_parse_action(_tokens(lambda t: _unquote(t[0])))
    integer = pp.Regex(r"-?[0-9]{1,18}(?![A-Za-z0-9_.])").set_name("a whole number")
    integer.set_parse_action(_tokens(lambda t: int(t[0])))
    boolean = (_kw("true") | _kw("false")).set_parse_action(_tokens(lambda t: t[0] == "true"))
    bareword = pp.Regex(r"[A-Za-z_][A-Za-z0-9_.:/*-]*").set_name("a word")

    def check_bare(s, loc, t):
        if t[0] in _VALUE_RESERVED:
            raise pp.ParseException(s, loc, f"{t[0]!r} is a keyword; quote it to use it as a value")

    bareword.add_parse_action(check_bare)
    scalar = string | integer | boolean | bareword
    listing = pp.Suppress("[") + pp.Optional(pp.DelimitedList(scalar)) + pp.Suppress("]")
    listing.set_parse_action(_tokens(lambda t: [tuple(t)])).set_name("a list")
    value = (listing | scalar).set_name("a value")

    field = pp.Regex(r"(?:args\.[A-Za-z_][A-Za-z0-9_]*|role|tier|mode|risk|action|approved)"
                     r"(?![A-Za-z0-9_.-])").set_name("a field (role, tier, mode, risk, action, approved, args.NAME)")
    op = pp.Regex(r"==|!=|<=|>=|<|>|not\s+in\b|in\b|matches\b").set_name("an operator")
    op.set_parse_action(_tokens(lambda t: "not in" if t[0].startswith("not") else t[0]))

    compare = field + op - value
    compare.set_parse_action(_tokens(lambda t: ast.Compare(t[0], t[1], t[2])))
    flag = field.copy().set_parse_action(_tokens(lambda t: ast.Flag(t[0])))
    const = boolean.copy().add_parse_action(_tokens(lambda t: ast.Const(t[0])))

    condition = pp.Forward().set_name("a condition")
    group = pp.Suppress("(") + condition + pp.Suppress(")")
    unary = pp.Forward().set_name("a condition")
    negation = pp.Suppress(_kw("not")) + unary
    negation.set_parse_action(_tokens(lambda t: ast.Not(t[0])))
    unary <<= (negation | group | const | compare | flag).set_name("a condition")
    conj = unary + pp.ZeroOrMore(pp.Suppress(_kw("and")) + unary)
    conj.set_parse_action(_tokens(lambda t: t[0] if len(t) == 1 else ast.And(tuple(t))))
    condition <<= conj + pp.ZeroOrMore(pp.Suppress(_kw("or")) + conj)
    condition.set_parse_action(_tokens(lambda t: t[0] if len(t) == 1 else ast.Or(tuple(t))))
    for element in (negation, conj, compare):
        element.set_name("a condition")

    law_id = pp.Regex(r"[A-Za-z][A-Za-z0-9_-]*").set_name("a law id")
    word = pp.Regex(r"[A-Za-z_][A-Za-z0-9_-]*").set_name("a word")
    attribute = pp.Group(
        (_kw("statement") - string) | (_kw("severity") - word)
        | (_kw("tier") - word) | (_kw("enforcement") - word)
    )
    attribute.set_parse_action(_check_attribute)
    effect = (_kw("permit") | _kw("forbid") | _kw("ask")).set_name("permit, forbid or ask")
    pattern = pp.Regex(r"\*|[A-Za-z_][A-Za-z0-9_.:-]*\*?").set_name("an action (such as engine.* or mcp.call)")
    patterns = pp.Group(pp.DelimitedList(pattern))
    when = pp.Optional(pp.Suppress(_kw("when")) - condition)
    # `-` stops backtracking: a fault inside a law is reported where it is, not at the law's start.
    law = (pp.Suppress(_kw("law")) - law_id - string - pp.Suppress("{")
           - pp.Group(pp.ZeroOrMore(attribute)) - effect - patterns - when - pp.Suppress("}"))
    law.set_parse_action(_make_law)
    source = pp.ZeroOrMore(law) + pp.StringEnd().set_name("the end of the text, or 'law'")
    source.ignore(pp.python_style_comment)
    # Made ready here, once, at import: pyparsing otherwise rearranges the grammar's elements during the first
    # parse, and two threads parsing for the first time at once read them half rearranged (a law that is right
    # was refused: "Expected a law id").  Keep tabs in strings, and count a tab as one column.
    return source.parse_with_tabs().streamline()


_DEFAULTS = {"severity": "medium", "tier": "owner", "enforcement": "preventive"}
_CHOICES = {"severity": ast.SEVERITIES, "tier": ast.LAW_TIERS, "enforcement": ast.ENFORCEMENTS}


def _skip_space(s: str, loc: int) -> int:
    while loc < len(s) and s[loc].isspace():
        loc += 1
    return loc


def _check_attribute(s: str, loc: int, t) -> None:
    name, val = t[0]
    loc = _skip_space(s, loc)
    choices = _CHOICES.get(name)
    if choices and val not in choices:
        raise pp.ParseFatalException(s, loc, f"unknown {name} {val!r} (one of {', '.join(choices)})")


def _make_law(s: str, loc: int, t) -> ast.Law:
    loc = _skip_space(s, loc)
    law_id, title, attributes, effect, patterns = t[:5]
    condition = t[5] if len(t) > 5 else None
    seen: dict[str, str] = {}
    for name, val in attributes:
        if name in seen:
            raise pp.ParseFatalException(s, loc, f"law {law_id}: {name} is given twice")
        seen[name] = val
    if "statement" not in seen:
        raise pp.ParseFatalException(s, loc, f"law {law_id} needs a statement")
    line = line_col(s, loc)[0]
    return ast.Law(
        id=law_id, title=title, statement=seen["statement"],
        severity=seen.get("severity", _DEFAULTS["severity"]),
        tier=seen.get("tier", _DEFAULTS["tier"]),
        enforcement=seen.get("enforcement", _DEFAULTS["enforcement"]),
        effect=effect, actions=tuple(patterns), condition=condition, line=line,
    )


_SOURCE = _build()


def parse(text: str) -> tuple[ast.Law, ...]:
    """Parse JHRL source into laws. Any fault is a JhrlSyntaxError with line and column."""
    if not isinstance(text, str):
        raise TypeError("JHRL source must be text")
    if len(text) > MAX_SOURCE_CHARS:
        raise JhrlSyntaxError(f"source is longer than {MAX_SOURCE_CHARS} characters", 1, 1)
    too_deep = _nesting_fault(text)
    if too_deep is not None:
        raise JhrlSyntaxError(f"conditions nest deeper than {MAX_NESTING} brackets", *line_col(text, too_deep))
    try:
        return tuple(_SOURCE.parse_string(text, parse_all=True))
    except pp.ParseBaseException as exc:
        raise JhrlSyntaxError(_message(exc), *line_col(text, exc.loc)) from None


def parse_law(text: str) -> ast.Law:
    laws = parse(text)
    if len(laws) != 1:
        raise JhrlSyntaxError(f"expected exactly one law, found {len(laws)}", 1, 1)
    return laws[0]


def _message(exc: pp.ParseBaseException) -> str:
    msg = exc.msg
    found = exc.found if exc.loc < len(exc.pstr) else "the end of the text"
    if not msg.startswith("Expected") or "found" in msg:  # our own message, already specific
        return msg
    return f"{msg}, found {found}"


def _nesting_fault(text: str) -> int | None:
    """Index of the first bracket nested past MAX_NESTING, outside strings and comments."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] not in '"\n':
                i += 2 if text[i] == "\\" else 1
        elif ch == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif ch in "([":
            depth += 1
            if depth > MAX_NESTING:
                return i
        elif ch in ")]":
            depth = max(0, depth - 1)
        i += 1
    return None
