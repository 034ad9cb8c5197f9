"""The language: parsing, printing, errors with line and column, compile faults."""

import pytest

from jhrl import ast
from jhrl.ast import print_laws
from jhrl.compiler import compile_laws, compile_source
from jhrl.errors import JhrlCompileError, JhrlError, JhrlSyntaxError
from jhrl.grammar import MAX_NESTING, parse, parse_law
from jhrl.laws import builtin_laws

EXAMPLE = '''
# Payments over the threshold wait for me.
law big-pay "Big payments wait" {
  statement "A hire bonus over 500 credits waits for the owner."
  severity medium
  ask plaza_hire
  when args.bonus > 500 and role not in [orchestrator]
}
'''


def test_a_law_parses_with_defaults():
    law = parse_law(EXAMPLE)
    assert law.id == "big-pay" and law.title == "Big payments wait"
    assert (law.severity, law.tier, law.enforcement, law.effect) == ("medium", "owner", "preventive", "ask")
    assert law.actions == ("plaza_hire",)
    assert law.condition == ast.And((ast.Compare("args.bonus", ">", 500),
                                     ast.Compare("role", "not in", ("orchestrator",))))
    assert law.line == 3


def test_attributes_come_in_any_order():
    a = parse_law('law x "t" { enforcement detective statement "s" tier owner forbid a }')
    assert a.enforcement == "detective" and a.statement == "s"


def test_built_in_files_round_trip_through_the_printer():
    laws = builtin_laws()
    assert parse(print_laws(laws)) == laws


def test_precedence_and_brackets_survive_printing():
    src = 'law x "t" { statement "s" permit a when (role == b or role == c) and not (mode == ask) or approved }'
    law = parse_law(src)
    assert isinstance(law.condition, ast.Or)
    assert parse_law(ast.print_law(law)) == law
    nested = 'law x "t" { statement "s" permit a when (role == b and role == c) and risk == read }'
    law = parse_law(nested)
    assert isinstance(law.condition.operands[0], ast.And)  # the brackets kept the tree's shape
    assert parse_law(ast.print_law(law)) == law


def test_strings_escape_and_keywords_are_quoted_as_values():
    law = parse_law('law x "a \\"quoted\\" \\\\ title" { statement "line\\nbreak" permit a when role == "and" }')
    assert law.title == 'a "quoted" \\ title' and law.statement == "line\nbreak"
    assert law.condition == ast.Compare("role", "==", "and")
    assert parse_law(ast.print_law(law)) == law


@pytest.mark.parametrize("text, line, column, words", [
    ('law x "t" {\n  statement "s"\n  permit a\n  when role ==\n}', 5, 1, "Expected a value"),
    ('law x "t" {\n  statement "s"\n  severity huge\n  permit a\n}', 3, 3, "unknown severity 'huge'"),
    ('law x "t" {\n  statement "s"\n}', 3, 1, "Expected permit, forbid or ask"),
    ('law x "t" { permit a }', 1, 1, "needs a statement"),
    ('hello', 1, 1, "Expected the end of the text, or 'law'"),
    ('law x "t" { statement "s" permit a }\nlaw', 2, 4, "Expected a law id"),
    ('law x "t" { statement "s" permit a when rolex == 1 }', 1, 41, "Expected a condition"),
    ('law x "t" { statement "s" tier owner tier owner permit a }', 1, 1, "tier is given twice"),
])
def test_syntax_errors_name_line_column_and_fault(text, line, column, words):
    with pytest.raises(JhrlSyntaxError) as err:
        parse(text)
    assert (err.value.line, err.value.column) == (line, column)
    assert words in err.value.message


def test_deep_nesting_is_an_error_not_a_crash():
    text = 'law x "t" { statement "s" permit a when ' + "(" * (MAX_NESTING + 5) + "approved" + ")" * (MAX_NESTING + 5) + " }"
    with pytest.raises(JhrlSyntaxError, match="nest deeper"):
        parse(text)


@pytest.mark.parametrize("condition, fault", [
    ("role > 3", "role is a name"),
    ("args.amount > big", "compares numbers"),
    ("risk == irreversable", "unknown risk 'irreversable'"),
    ("mode == manual", "unknown mode"),
    ("role in builder", "needs a list"),
    ("role", "not true or false"),
    ("approved == 1", "approved is true or false"),
    ("args.host matches 3", "matches takes a glob"),
])
def test_meaningless_conditions_do_not_compile(condition, fault):
    with pytest.raises(JhrlCompileError, match=fault) as err:
        compile_source(f'law x "t" {{\n statement "s"\n permit a\n when {condition}\n}}')
    assert err.value.line == 1


def test_a_repeated_id_does_not_compile():
    laws = parse('law x "t" { statement "s" permit a }\nlaw x "u" { statement "s" forbid b }')
    with pytest.raises(JhrlCompileError, match="defined twice") as err:
        compile_laws(laws)
    assert err.value.line == 2


def test_errors_share_one_base_with_a_code():
    with pytest.raises(JhrlError) as err:
        parse("law")
    assert err.value.code == "jhrl_syntax" and "line 1, column 4" in str(err.value)


def test_wildcard_index_picks_only_covering_laws():
    ls = compile_source('''
law a "t" { statement "s" permit engine.* }
law b "t" { statement "s" permit engine.read }
law c "t" { statement "s" permit * }
law d "t" { statement "s" permit mcp.call }
law e "t" { statement "s" permit eng* }
''')
    assert [cl.id for cl in ls.candidates("engine.read")] == ["a", "b", "c", "e"]
    assert [cl.id for cl in ls.candidates("mcp.call")] == ["c", "d"]
    assert [cl.id for cl in ls.candidates("engine")] == ["c", "e"]
