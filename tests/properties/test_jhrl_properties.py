"""Properties of the law language and its decisions."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jhrl import ast
from jhrl.call import MODES, RISKS, Call
from jhrl.compiler import EMPTY, compile_laws
from jhrl.errors import JhrlSyntaxError
from jhrl.evaluator import decide
from jhrl.grammar import parse

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------ any law the grammar can write

idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
law_ids = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,8}", fullmatch=True)
texts = st.text(max_size=20)
scalars = st.one_of(texts, st.integers(-10**18 + 1, 10**18 - 1), st.booleans(),
                    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:/*-]{0,8}", fullmatch=True))
values = st.one_of(scalars, st.lists(scalars, max_size=4).map(tuple))
fields = st.one_of(st.sampled_from(ast.FIELDS), idents.map(lambda s: "args." + s))
patterns = st.one_of(st.just("*"), st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:-]{0,8}\*?", fullmatch=True))

leaves = st.one_of(
    st.builds(ast.Compare, fields, st.sampled_from(ast.OPERATORS), values),
    st.builds(ast.Flag, fields),
    st.builds(ast.Const, st.booleans()),
)
conditions = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.builds(ast.Not, kids),
        st.builds(ast.And, st.lists(kids, min_size=2, max_size=3).map(tuple)),
        st.builds(ast.Or, st.lists(kids, min_size=2, max_size=3).map(tuple)),
    ),
    max_leaves=8,
)
any_laws = st.builds(
    ast.Law, id=law_ids, title=texts, statement=texts,
    severity=st.sampled_from(ast.SEVERITIES), tier=st.sampled_from(ast.LAW_TIERS),
    enforcement=st.sampled_from(ast.ENFORCEMENTS), effect=st.sampled_from(ast.EFFECTS),
    actions=st.lists(patterns, min_size=1, max_size=3).map(tuple),
    condition=st.one_of(st.none(), conditions),
)


@SETTINGS
@given(st.lists(any_laws, max_size=3))
def test_printing_a_parsed_law_and_parsing_it_again_gives_the_same_law(laws):
    printed = ast.print_laws(laws)
    parsed = parse(printed)
    assert parsed == tuple(laws)
    assert parse(ast.print_laws(parsed)) == parsed


TOKENS = ["law", "x", '"t"', "{", "}", "statement", "severity", "high", "tier", "enforcement", "permit",
          "forbid", "ask", "when", "and", "or", "not", "(", ")", "[", "]", ",", "==", "!=", "<", "in",
          "matches", "role", "args.host", "approved", "true", "1", "-", "*", "engine.*", "#", "\n", '"', "\\"]


def _must_not_crash(text):
    try:
        parse(text)
    except JhrlSyntaxError as err:
        assert err.line >= 1 and err.column >= 1 and err.message
        assert err.line <= text.count("\n") + 1


@SETTINGS
@given(st.text(max_size=200))
def test_random_text_never_crashes_the_parser(text):
    _must_not_crash(text)


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join))
def test_random_token_soup_never_crashes_the_parser(text):
    _must_not_crash(text)


# ------------------------------------------------------------ laws that compile, and calls

ACTIONS = ("a", "a.b", "a.c", "b")
ROLES = ("builder", "reviewer", "orchestrator")
ok_leaves = st.one_of(
    st.builds(ast.Compare, st.just("role"), st.sampled_from(("==", "!=")), st.sampled_from(ROLES)),
    st.builds(ast.Compare, st.just("role"), st.sampled_from(("in", "not in")),
              st.lists(st.sampled_from(ROLES), max_size=2).map(tuple)),
    st.builds(ast.Compare, st.just("risk"), st.just("=="), st.sampled_from(RISKS)),
    st.builds(ast.Compare, st.just("mode"), st.just("=="), st.sampled_from(MODES)),
    st.builds(ast.Compare, st.just("action"), st.just("matches"), st.sampled_from(("a*", "b", "*.c"))),
    st.builds(ast.Compare, st.just("args.n"), st.sampled_from(("<", ">=", "==", "!=")), st.integers(-3, 3)),
    st.builds(ast.Compare, st.just("args.host"), st.just("matches"), st.sampled_from(("*.x", "h", "*"))),
    st.just(ast.Flag("approved")),
)
ok_conditions = st.recursive(
    ok_leaves,
    lambda kids: st.one_of(
        st.builds(ast.Not, kids),
        st.builds(ast.And, st.lists(kids, min_size=2, max_size=3).map(tuple)),
        st.builds(ast.Or, st.lists(kids, min_size=2, max_size=3).map(tuple)),
    ),
    max_leaves=5,
)


def ok_laws(effect=st.sampled_from(ast.EFFECTS)):  # noqa: B008 - a strategy, built once
    return st.builds(
        ast.Law, id=st.just("?"), title=st.just("t"), statement=st.just("s"), severity=st.just("low"),
        tier=st.just("owner"), enforcement=st.sampled_from(ast.ENFORCEMENTS), effect=effect,
        actions=st.lists(st.sampled_from(("*", "a", "a.*", "a.b", "b")), min_size=1, max_size=2).map(tuple),
        condition=st.one_of(st.none(), ok_conditions),
    )


def numbered(laws):
    return [ast.Law(f"L{i}", *(getattr(law, f) for f in ("title", "statement", "severity", "tier",
                                                        "enforcement", "effect", "actions", "condition")))
            for i, law in enumerate(laws)]


calls = st.builds(
    Call, role=st.sampled_from(ROLES), action=st.sampled_from(ACTIONS), risk=st.sampled_from(RISKS),
    mode=st.sampled_from(MODES), approved=st.booleans(),
    args=st.fixed_dictionaries({}, optional={"n": st.integers(-4, 4), "host": st.sampled_from(("h", "a.x", "y"))}),
)


@SETTINGS
@given(st.lists(ok_laws(), max_size=6), ok_laws(st.just("forbid")), st.lists(calls, min_size=1, max_size=5))
def test_adding_a_forbid_never_turns_a_refusal_into_a_permit(laws, forbid, some_calls):
    before, after = compile_laws(numbered(laws)), compile_laws(numbered(laws + [forbid]))
    for call in some_calls:
        b, a = decide(before, call), decide(after, call)
        if b.refused:
            assert a.refused
        if a.allowed:
            assert b.allowed


@SETTINGS
@given(st.lists(ok_laws(), max_size=6), ok_laws(st.just("permit")), st.lists(calls, min_size=1, max_size=5))
def test_adding_a_permit_never_turns_a_permit_into_a_refusal(laws, permit, some_calls):
    before, after = compile_laws(numbered(laws)), compile_laws(numbered(laws + [permit]))
    for call in some_calls:
        if decide(before, call).allowed:
            assert decide(after, call).allowed


@SETTINGS
@given(calls)
def test_with_no_laws_every_non_read_call_is_refused(call):
    d = decide(EMPTY, call)
    if call.risk == "read":
        assert d.allowed
    else:
        assert d.refused and d.default_deny and not d.violation


@SETTINGS
@given(st.lists(ok_laws(), max_size=8), calls)
def test_decisions_are_deterministic(laws, call):
    one, two = compile_laws(numbered(laws)), compile_laws(numbered(laws))
    first = decide(one, call)
    assert decide(one, call) == first == decide(two, call)
    # and a rebuilt call (a fresh args dict) decides the same
    assert decide(two, Call(call.role, call.action, call.risk, call.tier, call.mode, dict(call.args),
                            call.approved)) == first
