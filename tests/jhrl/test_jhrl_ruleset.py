"""The owner's rules at runtime: add, check, save atomically or not at all, disable, enable, delete."""

import pytest

from jhrl.call import Call
from jhrl.catalog import TOOLS
from jhrl.errors import JhrlCompileError, JhrlError, JhrlSyntaxError
from jhrl.evaluator import decide
from jhrl.ruleset import CHECK_WINDOW, RuleBook, RuleError, laws_overview

NO_TELEGRAM = 'law no-telegram "No telegram" {\n  statement "Nobody sends telegrams."\n  severity low\n  forbid telegram_*\n}'
SEND = Call(role="builder", action="telegram_send", risk="write", args={"role_allowed": True})
SHELL = Call(role="builder", action="vm.shell", risk="write")


@pytest.fixture
def book():
    return RuleBook(known_tools=TOOLS)


def test_a_fresh_book_holds_the_eighty_built_ins(book):
    assert len(book.lawset) == 80 and book.rules() == () and book.version == 0


def test_add_compiles_the_whole_set_and_swaps_it_in(book):
    assert decide(book.lawset, SEND).allowed
    before = book.lawset
    draft = book.add("Quiet", NO_TELEGRAM)
    assert draft.rule_id == "R1" and book.rule("R1").title == "Quiet"
    assert book.lawset is draft.lawset and book.lawset is not before
    assert decide(book.lawset, SEND).forbidding == "no-telegram"
    assert decide(before, SEND).allowed  # a set already handed out never changes


@pytest.mark.parametrize("source, line, words", [
    ('law x "t" {\n  statement "s"\n  permit a\n  when role ==\n}', 5, "Expected a value"),
    ('law x "t" {\n  statement "s"\n  permit a\n  when risk == huge\n}', 1, "unknown risk"),
    ('\n\nlaw S-001 "mine" { statement "s" permit a }', 3, "belong to the built-in laws"),
    ('# only a comment\n', 1, "holds no law"),
])
def test_a_rule_that_does_not_compile_changes_nothing(book, source, line, words):
    lawset, version = book.lawset, book.version
    with pytest.raises(JhrlError) as err:
        book.add("Broken", source)
    assert err.value.line == line and words in err.value.message
    assert book.lawset is lawset and book.version == version and book.rules() == ()


def test_an_id_already_taken_by_another_rule_is_refused_with_its_line(book):
    book.add("One", NO_TELEGRAM)
    with pytest.raises(JhrlCompileError, match="defined twice") as err:
        book.add("Two", 'law other "t" { statement "s" permit a }\n' + NO_TELEGRAM)
    assert err.value.line == 2 and len(book.rules()) == 1


def test_check_shows_which_recent_decisions_would_change(book):
    draft = book.draft_add("Quiet", NO_TELEGRAM)
    report = book.check(draft, [SHELL, SEND, SHELL, SEND])
    assert report.replayed == 4
    assert [c.index for c in report.changes] == [1, 3]
    assert [c.index for c in report.newly_refused] == [1, 3] and report.newly_allowed == ()
    assert report.changes[0].before.allowed and report.changes[0].after.forbidding == "no-telegram"
    assert book.rules() == ()  # checking saves nothing


def test_check_replays_only_the_last_500_calls_and_check_all_replays_everything(book):
    draft = book.draft_add("Quiet", NO_TELEGRAM)
    history = [SEND] * 700
    assert CHECK_WINDOW == 500
    report = book.check(draft, history)
    assert report.replayed == 500 and len(report.changes) == 500 and report.changes[0].index == 0
    assert book.check_all(draft, history).replayed == 700
    assert book.check(draft.lawset, history, limit=10).replayed == 10


def test_disable_enable_and_delete_an_owner_rule(book):
    book.add("Quiet", NO_TELEGRAM)
    book.disable_rule("R1")
    assert not book.rule("R1").enabled and "no-telegram" not in book.lawset
    assert decide(book.lawset, SEND).allowed
    book.enable_rule("R1")
    assert decide(book.lawset, SEND).refused
    book.delete_rule("R1")
    assert book.rules() == () and decide(book.lawset, SEND).allowed
    with pytest.raises(RuleError) as err:
        book.delete_rule("R1")
    assert err.value.code == "rule_not_found"
    assert book.add("Again", NO_TELEGRAM).rule_id == "R2"  # ids are never reused


def test_replace_a_rule_keeps_its_id(book):
    book.add("Quiet", NO_TELEGRAM)
    book.replace("R1", "Quieter", NO_TELEGRAM.replace("telegram_*", "telegram_send, replicate_*"))
    assert book.rule("R1").title == "Quieter"
    assert decide(book.lawset, Call(role="builder", action="replicate_predict", risk="write",
                                    args={"role_allowed": True})).refused


def test_a_statute_is_disabled_only_with_a_reason_which_is_kept(book):
    shell = Call(role="builder", action="vm.fetch", risk="read", args={"host": "example.com", "port": 8080})
    assert decide(book.lawset, shell).forbidding == "S-006c"
    for reason in ("", "   ", None):
        with pytest.raises(RuleError) as err:
            book.disable_statute("S-006c", reason)
        assert err.value.code == "reason_required"
    book.disable_statute("S-006c", "Our build cache listens on 8080")
    assert book.disabled_statutes() == {"S-006c": "Our build cache listens on 8080"}
    assert decide(book.lawset, shell).allowed
    row = next(r for r in laws_overview(book) if r["id"] == "S-006c")
    assert row["enabled"] is False and row["reason"] == "Our build cache listens on 8080"
    book.enable_statute("S-006c")
    assert book.disabled_statutes() == {} and decide(book.lawset, shell).refused


def test_the_constitution_cannot_be_disabled(book):
    with pytest.raises(RuleError) as err:
        book.disable_statute("C-002a", "I want to")
    assert err.value.code == "constitutional"
    with pytest.raises(RuleError) as err:
        book.disable_statute("X-1", "no such law")
    assert err.value.code == "law_not_found"


def test_tool_laws_can_be_disabled_too(book):
    book.disable_statute("T-005", "Let the orchestrator edit its plan")
    d = decide(book.lawset, Call(role="orchestrator", tier="orchestrator", action="engine.edit", risk="write"))
    assert d.forbidding is None


def test_save_warns_about_a_shadowed_rule_and_a_rule_that_matches_no_tool(book):
    book.add("Quiet", NO_TELEGRAM)
    draft = book.add("Loud", '''
law loud "Builders send telegrams" { statement "s" permit telegram_send when role == builder }
law typo "A typo" { statement "s" permit telegram.send }
law vault "Vault for finance" { statement "s" permit plaza_vault_read when role == finance }
law fine "Fine" { statement "s" permit telegram_send when role == builder and args.x == 1 }''')
    codes = {(w.law_id, w.code) for w in draft.warnings}
    assert codes == {("loud", "shadowed"), ("typo", "no_known_tool"), ("vault", "shadowed"), ("fine", "shadowed")}
    assert "C-002a" in next(w.message for w in draft.warnings if w.law_id == "vault")


def test_a_conditional_forbid_shadows_only_rules_inside_its_condition(book):
    draft = book.draft_add("Pay", 'law pay "Pay" { statement "s" permit plaza_hire when role == builder }\n'
                                  'law big "Big" { statement "s" permit plaza_hire when args.contact_role == orchestrator }')
    assert [(w.law_id, w.code) for w in draft.warnings] == [("big", "shadowed")]  # S-013 forbids hiring the orchestrator


def test_without_a_known_tool_list_there_is_no_tool_warning():
    book = RuleBook()
    assert book.add("x", 'law x "t" { statement "s" permit made.up }').warnings == ()


def test_a_stale_draft_is_refused(book):
    first, second = book.draft_add("A", NO_TELEGRAM), book.draft_add("B", NO_TELEGRAM.replace("no-telegram", "nt2"))
    book.apply(first)
    with pytest.raises(RuleError) as err:
        book.apply(second)
    assert err.value.code == "stale_draft" and len(book.rules()) == 1


def test_a_rule_needs_a_title(book):
    with pytest.raises(RuleError) as err:
        book.add("  ", NO_TELEGRAM)
    assert err.value.code == "bad_title"


def test_syntax_errors_from_a_rule_are_syntax_errors(book):
    with pytest.raises(JhrlSyntaxError):
        book.add("x", "law")
