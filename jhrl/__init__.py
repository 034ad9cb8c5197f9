"""JHRL: the plaza's law language. Standalone: it imports nothing of agentplaza or vmm.

The hub's entry points:

    book = RuleBook(known_tools=...)          # the 80 built-ins, plus the owner's rules
    decide(book.lawset, Call(...)) -> Decision
    explain(book.lawset, Call(...)) -> Explanation
    offered_tools(book.lawset, role, tier, mode, {tool: risk}) -> [tool, ...]
"""

from .ast import Law, print_law, print_laws
from .call import Call, Decision
from .compiler import EMPTY, LawSet, compile_laws, compile_source
from .errors import JhrlCompileError, JhrlError, JhrlSyntaxError
from .evaluator import could_run, decide, offered_tools
from .explain import Explanation, PermitNote, explain
from .grammar import parse, parse_law
from .laws import builtin_laws, builtin_lawset
from .ruleset import CHECK_WINDOW, CheckReport, Draft, OwnerRule, RuleBook, RuleError, RuleWarning, laws_overview

__all__ = [
    "CHECK_WINDOW", "Call", "CheckReport", "Decision", "Draft", "EMPTY", "Explanation", "JhrlCompileError",
    "JhrlError", "JhrlSyntaxError", "Law", "LawSet", "OwnerRule", "PermitNote", "RuleBook", "RuleError",
    "RuleWarning", "builtin_laws", "builtin_lawset", "compile_laws", "compile_source", "could_run", "decide",
    "explain", "laws_overview", "offered_tools", "parse", "parse_law", "print_law", "print_laws",
]
