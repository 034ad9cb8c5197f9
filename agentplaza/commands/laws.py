"""The laws' commands: change the owner's rules, and decide a tool call (recording the decision).

``decide_call`` is the one entry the agent harness calls for every tool call: it evaluates the call
against the current law set and records a ``ToolCall.CallDecided`` event.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from dataclasses import dataclass

import jhrl

from ..domain.base import Context
from ..domain.laws import (
    LAWBOOK_ID,
    LawBook,
    ToolCall,
    all_laws,
    draft_change,
    law_arg_names,
    new_book,
)
from .unit import Commands, Done, Unit

_CALL_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "agentplaza:call")


@dataclass(frozen=True)
class Current:
    """The law set in force, and what a decision event needs from it."""

    version: int  # the LawBook aggregate's version (0: no change ever made)
    book: jhrl.RuleBook
    law_args: frozenset[str]


class _Laws:
    """The hub's view of the law book, kept current for decisions.

    A decision must never use an outdated law set, even when another hub process on the same
    Postgres changed the rules: each decision asks the store for the LawBook's latest version
    (one indexed read) and reloads the aggregate only when it moved.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: Current | None = None


_VIEWS: weakref.WeakKeyDictionary[object, _Laws] = weakref.WeakKeyDictionary()  # one per store
_VIEWS_LOCK = threading.Lock()
_DEFAULT: Current | None = None


def _default() -> Current:
    global _DEFAULT
    if _DEFAULT is None:
        book = new_book()
        _DEFAULT = Current(0, book, frozenset(law_arg_names(all_laws(book))))
    return _DEFAULT


def latest_version(cmds: Commands) -> int:
    """The LawBook's version in the database (0 when the owner never changed a rule)."""
    events = cmds.store.app.recorder.select_events(LAWBOOK_ID, desc=True, limit=1)
    return events[0].originator_version if events else 0


def load(cmds: Commands) -> LawBook | None:
    return cmds.store.get(LAWBOOK_ID)


def current(cmds: Commands) -> Current:
    """The law set in force now."""
    with _VIEWS_LOCK:
        view = _VIEWS.setdefault(cmds.store, _Laws())
    version = latest_version(cmds)
    if version == 0:
        return _default()
    cur = view.current
    if cur is not None and cur.version == version:
        return cur
    with view.lock:
        cur = view.current
        if cur is not None and cur.version >= version:
            return cur
        book = load(cmds)
        if book is None or book.version < version:
            with cmds.store.fresh():
                book = load(cmds)
        cur = Current(book.version, book.book, frozenset(law_arg_names(all_laws(book.book))))
        view.current = cur
        return cur


def change(cmds: Commands, ctx: Context, op: str, **fields) -> Done[jhrl.Draft]:
    """One change to the owner's rules (add, replace, disable, enable, delete); the saved draft
    (with its warnings).  Refuses, changing nothing, when the change does not compile.  A built-in
    statute's reason to be disabled is ``ctx.reason``."""

    def decide(unit: Unit) -> jhrl.Draft:
        book = unit.get(LAWBOOK_ID) or LawBook.open(ctx)
        draft = book.change(ctx, op, **fields)
        unit.add(book)
        return draft

    return cmds.run(decide)


def book_in_force(cmds: Commands) -> jhrl.RuleBook:
    """The rule book in force now (its laws, rules and disabled statutes)."""
    return current(cmds).book


def draft(cmds: Commands, op: str, **fields) -> tuple[jhrl.RuleBook, jhrl.Draft]:
    """The rule book in force and a change as it would be, compiled; records nothing."""
    book = book_in_force(cmds)
    return book, draft_change(book, op, **fields)


@dataclass(frozen=True)
class Decided:
    decision: jhrl.Decision
    digest: str
    call_id: str
    lawbook_version: int


def decide_call_in(unit: Unit, cmds: Commands, call: jhrl.Call, agent: str, ctx: Context,
                   call_id: uuid.UUID) -> Decided:
    """The decision on one tool call, recorded in ``unit`` (a tool call's whole check is one commit)."""
    cur = current(cmds)
    decision = jhrl.decide(cur.book.lawset, call)
    unit.add(ToolCall.decided(ctx, id=call_id, agent=agent, call=call, decision=decision,
                              lawset=cur.book.lawset, law_args=set(cur.law_args), lawbook_version=cur.version))
    return Decided(decision, call.digest(), call_id.hex, cur.version)


def new_call_id(cmds: Commands) -> uuid.UUID:
    return uuid.uuid5(_CALL_NAMESPACE, cmds.new_id())


def decide_call(cmds: Commands, call: jhrl.Call, agent: str, ctx: Context | None = None) -> Done[Decided]:
    """Decide one tool call against the laws in force, and record the decision as an event.

    This is what the agent harness has decided before every tool call runs.  ``agent`` is the
    agent's CID; ``call.role`` is the role the hub gave it (never what the guest claims).
    """
    ctx = ctx or cmds.context(f"agent:{agent}")
    call_id = new_call_id(cmds)
    return cmds.run(lambda unit: decide_call_in(unit, cmds, call, agent, ctx, call_id))


def decide_in(unit: Unit, cmds: Commands, call: jhrl.Call, agent: str, ctx: Context) -> Decided:
    """``decide_call``'s decision with a new call id, its record added to ``unit`` (the harness's check
    of a tool call composes it into its own unit)."""
    return decide_call_in(unit, cmds, call, agent, ctx, new_call_id(cmds))

