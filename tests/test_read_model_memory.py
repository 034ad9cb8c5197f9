"""A hub's memory grows with its live entities, never with the log: the rows a read model keeps
in memory do not grow with tasks that ended or journal entries that are old (``evictable`` and
``append_only`` tables in ``projections.framework``).  Nothing here is timed: rows are counted."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid

import pytest

from agentplaza.commands import plaza as plaza_commands
from agentplaza.commands.unit import Commands
from agentplaza.domain import treasury as t
from agentplaza.domain.base import Context
from agentplaza.domain.tasks import Task
from agentplaza.events.store import EventStore
from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url
from agentplaza.projections.work import task_rows

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
WORKERS = ("101", "102", "103")
REVIEWER = "100"


class Plaza:
    """A store with read models, and a few live agents' wallets; writes ended tasks and entries."""

    def __init__(self, folders, database_url):
        self.store = EventStore.open(state_dir=folders.state, database_url=database_url)
        engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
        self.rm = ReadModels(engine, self.store, all_projections())
        self.rm.setup()
        self.seconds = itertools.count()
        self.numbers = itertools.count(1)
        self.cmds = Commands(self.store, clock=self.now)
        plaza_commands.ensure_founded(self.cmds)
        owner = self.ctx()
        self.wallets = {cid: t.open_wallet(owner, None, cid, f"agent {cid}", "builder") for cid in WORKERS}
        self.store.commit_direct(*self.wallets.values())
        self.budget = self.store.get(t.account_id(t.BUDGET))

    def now(self) -> dt.datetime:
        return T0 + dt.timedelta(minutes=next(self.seconds))

    def ctx(self, actor: str = "owner") -> Context:
        return Context(actor=actor, at=self.now(), correlation_id=uuid.uuid4().hex)

    def open_tasks(self, n: int) -> list[Task]:
        made = [Task.create(self.ctx(), f"T{next(self.numbers)}", title="a task", acceptance="it works", budget=10)
                for _ in range(n)]
        self.store.commit_direct(*made)
        return made

    def end(self, tasks: list[Task]) -> None:
        """Each task through its whole life to done: claimed, reported, reviewed, passed."""
        for i, task in enumerate(tasks):
            worker = WORKERS[i % len(WORKERS)]
            task.claim(self.ctx("hub"), worker, None, "assigned")
            task.report_done(self.ctx(f"agent:{worker}"), worker, "done", ["a.py"], "tests pass")
            task.take_review(self.ctx("hub"), REVIEWER, "reviewer", "assigned")
            task.verdict(self.ctx(f"agent:{REVIEWER}"), REVIEWER, True, "good")
        self.store.commit_direct(*tasks)

    def entries(self, n: int) -> None:
        for i in range(n):
            cid = WORKERS[i % len(WORKERS)]
            books = t.Books(self.ctx(), {t.BUDGET: self.budget, t.wallet_key(cid): self.wallets[cid]})
            books.post(t.TRANSFER, "pay", {t.BUDGET: -1, t.wallet_key(cid): 1}, agents=[cid])
            self.store.commit_direct(*books.changed())

    def rows_in_memory(self) -> dict[str, int]:
        return {name: sum(len(rows) for rows in st.rows.data.values()) for name, st in self.rm.states.items()}

    def close(self) -> None:
        self.store.close()
        self.rm.engine.dispose()


@pytest.fixture
def plaza(folders, database_url):
    p = Plaza(folders, database_url)
    yield p
    p.close()


def a_round(plaza: Plaza, tasks: int, entries: int) -> None:
    """Tasks opened (folded), then ended in a later catch-up (their rows read back from SQL), and entries."""
    opened = plaza.open_tasks(tasks)
    plaza.rm.catch_up()
    plaza.end(opened)
    plaza.entries(entries)
    plaza.rm.catch_up()


def test_rows_kept_in_memory_do_not_grow_with_ended_tasks_or_old_entries(plaza):
    a_round(plaza, tasks=5, entries=5)
    kept = plaza.rows_in_memory()
    a_round(plaza, tasks=60, entries=60)
    a_round(plaza, tasks=60, entries=60)
    assert plaza.rows_in_memory() == kept
    # ... and every ended task is still there to read, from SQL
    assert len(task_rows(plaza.rm, "done", None, None, 1000)) == 125
    assert plaza.rm.live(["work", "treasury"]) == plaza.rm.replay(names=["work", "treasury"])


def test_a_rebuild_keeps_no_more_rows_than_the_live_hub(plaza):
    a_round(plaza, tasks=40, entries=40)
    live = plaza.rm.live()
    kept = plaza.rows_in_memory()
    plaza.rm.rebuild()
    assert plaza.rows_in_memory() == kept
    assert plaza.rm.live() == live


def test_live_entities_are_what_memory_grows_with(plaza):
    """Open tasks are live: their rows are in SQL, read back when they move; wallets stay in memory."""
    a_round(plaza, tasks=5, entries=5)
    before = plaza.rows_in_memory()
    opened = plaza.open_tasks(30)
    plaza.rm.catch_up()
    assert plaza.rows_in_memory()["work"] == before["work"]
    assert len(task_rows(plaza.rm, "open", None, None, 1000)) == 30
    plaza.end(opened)
    plaza.rm.catch_up()
    assert len(task_rows(plaza.rm, "done", None, None, 1000)) == 35


def test_the_overview_counts_tasks_by_state_from_a_row_a_state_equal_to_counting_every_task(plaza):
    """The overview's task counts are kept as tasks move (``rm_task_counts``), so reading them does not
    count every task that ever was; they equal such a count, live and after a rebuild."""
    import sqlalchemy as sa

    from agentplaza.projections.work import task_counts, tasks, tasks_overview

    def counted() -> dict[str, int]:
        with plaza.rm.engine.connect() as conn:
            found = dict(conn.execute(sa.select(tasks.c.state, sa.func.count()).group_by(tasks.c.state)).all())
        return {s: found.get(s, 0) for s in tasks_overview(plaza.rm)}

    a_round(plaza, tasks=7, entries=0)
    plaza.open_tasks(3)
    claimed = plaza.open_tasks(2)
    for task in claimed:
        task.claim(plaza.ctx("hub"), WORKERS[0], None, "assigned")
    plaza.store.commit_direct(*claimed)
    plaza.rm.catch_up()
    assert tasks_overview(plaza.rm) == counted()
    assert (tasks_overview(plaza.rm)["done"], tasks_overview(plaza.rm)["open"], tasks_overview(plaza.rm)["claimed"]) == (7, 3, 2)
    assert len(plaza.rm.rows(task_counts)) <= len(tasks_overview(plaza.rm))  # a row a state, never a row a task
    plaza.rm.rebuild()
    assert tasks_overview(plaza.rm) == counted()


def test_a_catch_up_without_most_hands_back_only_the_newest_records_and_folds_them_all(plaza, monkeypatch):
    from agentplaza.projections import runner

    monkeypatch.setattr(runner, "SEEN_MAX", 5)
    plaza.rm.catch_up()
    plaza.entries(12)  # more events than SEEN_MAX
    last = list(plaza.store.read(0, 100_000))[-1].position
    seen = plaza.rm.catch_up()
    assert len(seen) == 5 and seen[-1].position == last  # the newest, in order
    assert [r.position for r in seen] == sorted(r.position for r in seen)
    assert plaza.rm.position() == last  # every one folded
    assert len(plaza.rm.catch_up(most=1_000)) == 0  # nothing left behind


@pytest.fixture
def small_pages(monkeypatch):
    """Pages of a few events, so a backlog of many pages is quick to write (the rules do not depend on the sizes),
    and no written rows kept (``EVICTED_KEPT``: a fixed number, which a backlog this short would only be filling;
    ``test_the_rows_kept_after_their_write_are_a_fixed_number`` holds it)."""
    from agentplaza.projections import framework, runner

    monkeypatch.setattr(framework, "EVICTED_KEPT", 0)
    monkeypatch.setattr(runner, "CATCH_UP_BATCH", 20)
    monkeypatch.setattr(runner, "REBUILD_PAGE", 60)
    monkeypatch.setattr(runner, "SEEN_MAX", 20)
    return runner


def a_backlog(plaza: Plaza, rounds: int) -> None:
    """``rounds`` times: five tasks opened and ended, five journal entries (about 40 events), not folded."""
    for _ in range(rounds):
        plaza.end(plaza.open_tasks(5))
        for i in range(5):  # written in one commit: the catch-up reads them the same way
            cid = WORKERS[i % len(WORKERS)]
            books = t.Books(plaza.ctx(), {t.BUDGET: plaza.budget, t.wallet_key(cid): plaza.wallets[cid]})
            books.post(t.TRANSFER, "pay", {t.BUDGET: -1, t.wallet_key(cid): 1}, agents=[cid])
        plaza.store.commit_direct(plaza.budget, *plaza.wallets.values())


def peak_of_a_catch_up(plaza: Plaza, most: int | None = None) -> int:
    """The most memory (bytes Python allocated, tracemalloc's count: no clock) held at once while the read
    models catch up with the whole backlog, in one call or, with ``most``, in rounds of that many."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        while plaza.rm.position() < plaza.store.max_position():
            plaza.rm.catch_up(most)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_a_catch_up_far_behind_holds_a_page_at_a_time_not_the_backlog(plaza, small_pages):
    """What a catch-up holds at once (the page it folds, the records it hands back) is bounded by its page and
    ``SEEN_MAX``, not by how far behind the log it is: a first start over a long log, or the price fetch while
    the follower is still catching up, holds no more than a short catch-up does."""
    a_backlog(plaza, 2)
    plaza.rm.catch_up()  # every statement the fold uses compiled once, before anything is counted
    a_backlog(plaza, 8)  # about 330 events: a few full pages already
    near = peak_of_a_catch_up(plaza)
    a_backlog(plaza, 32)  # four times the backlog
    far = peak_of_a_catch_up(plaza)
    assert far < 1.5 * near, (near, far)
    a_backlog(plaza, 32)  # the follower's rounds too
    assert peak_of_a_catch_up(plaza, most=50) < 1.5 * near
    assert plaza.rm.live(["work", "treasury"]) == plaza.rm.replay(names=["work", "treasury"])


def test_the_rows_kept_after_their_write_are_a_fixed_number(plaza, monkeypatch):
    """An evictable table's rows last written stay at hand (``Rows.recent``) so a handler reading one back
    a page later does not go to SQL; there are never more than ``EVICTED_KEPT`` of them a table, and what
    the read models show is what a replay from event 1 shows."""
    from agentplaza.projections import framework

    monkeypatch.setattr(framework, "EVICTED_KEPT", 3)
    loads = []
    loader = plaza.rm._loader

    def counting(conn=None):
        load = loader(conn)
        return lambda table, key: loads.append(table.name) or load(table, key)

    monkeypatch.setattr(plaza.rm, "_loader", counting)
    for st in plaza.rm.states.values():
        st.rows.load = counting()
    for _ in range(3):
        a_round(plaza, tasks=6, entries=4)
        for st in plaza.rm.states.values():
            assert all(len(kept) <= 3 for kept in st.rows.recent.values())
    assert any(st.rows.recent.get("rm_tasks") for st in plaza.rm.states.values())
    # each round's tasks were written when opened and read back when they ended: the last three from
    # what was kept, the rest from SQL
    assert loads.count("rm_tasks") == 3 * (6 - 3)
    assert plaza.rm.live(["work", "treasury"]) == plaza.rm.replay(names=["work", "treasury"])


def test_a_catch_up_with_most_never_holds_more_than_most_and_hands_on_every_event_once(plaza, small_pages):
    """The follower's batch: each round hands back at most ``most`` records (none read past it), and the
    rounds together hand on every event after the start exactly once, in order (the bus misses none)."""
    plaza.rm.catch_up()
    start = plaza.rm.position()
    a_backlog(plaza, 6)
    rounds = []
    while batch := plaza.rm.catch_up(most=50):
        rounds.append([r.position for r in batch])
    assert len(rounds) > 3 and all(len(r) <= 50 for r in rounds)
    handed = [p for r in rounds for p in r]
    assert handed == [r.position for r in plaza.store.read(start)]
    assert plaza.rm.position() == plaza.store.max_position()


def test_a_catch_up_without_most_keeps_no_more_records_than_a_page_near_the_head():
    """The records a catch-up without ``most`` keeps from the pages it folded before (``SEEN_MAX``) are no
    more than one page near the head: such callers (routes, the price fetch) do not read them, and a first
    start's price fetch kept 50,000 of them (about 80 MB of a 1M-event start's peak)."""
    from agentplaza.projections import runner

    assert runner.SEEN_MAX <= runner.CATCH_UP_BATCH < runner.REBUILD_PAGE


#: The keyed tables with a row for each thing that ever was (not for each live one): the hub keeps their
#: rows in SQL only (``evictable``), or writes and forgets them (``append_only``).
GROWS_WITH_THE_LOG = {
    "rm_tasks", "rm_task_bids", "rm_approvals", "rm_treasury_hours", "rm_treasury_payments", "rm_usage_hourly",
    "rm_board_posts", "rm_board_replies", "rm_conversations", "rm_git_prs", "rm_git_notes", "rm_library_items",
    "rm_hires", "rm_memory_notes", "rm_projects", "rm_motions", "rm_cases", "rm_incidents", "rm_e2b_sandboxes",
    "rm_e2b_snapshots", "rm_shared_files",
}


def test_every_table_that_grows_with_the_log_is_kept_out_of_memory():
    marked = {t.name for p in all_projections() for t in p.tables if t.info.get("evictable") or t.info.get("append_only")}
    assert GROWS_WITH_THE_LOG <= marked, sorted(GROWS_WITH_THE_LOG - marked)


def test_shared_files_and_conversations_that_pile_up_keep_no_rows_in_memory(plaza):
    """Shared files (shared, then deleted) and messages between ever more pairs of agents: read back from SQL."""
    from agentplaza.domain.conversations import Conversation
    from agentplaza.domain.files import SharedFile
    from agentplaza.projections.conversations import conversations
    from agentplaza.projections.files import shared_files

    numbers = itertools.count(1)

    def pile(n: int) -> None:
        made = []
        for _ in range(n):
            i = next(numbers)
            f = SharedFile.share(plaza.ctx(f"agent:{i}"), f"f{i}", owner=i, path=f"/workspace/{i}.txt",
                                 filename=f"{i}.txt", media_type="text/plain", size=3, sha256="0" * 64,
                                 storage="local", key=f"k{i}", agents=None)
            c = Conversation.open(plaza.ctx(), str(i), str(i + 1))
            c.send(plaza.ctx(f"agent:{i}"), str(i), str(i + 1), "hello", None, None)
            made += [f, c]
        plaza.store.commit_direct(*made)
        plaza.rm.catch_up()
        for f in made[::2][: n // 2]:  # half the files deleted again
            f.record(SharedFile.Deleted, plaza.ctx("owner"), number=f.number)
        plaza.store.commit_direct(*made[::2][: n // 2])
        plaza.rm.catch_up()

    pile(4)
    kept = plaza.rows_in_memory()
    pile(40)
    pile(40)
    assert plaza.rows_in_memory() == kept
    assert len(plaza.rm.rows(shared_files)) == 84 - 42 and len(plaza.rm.rows(conversations)) == 84
    assert plaza.rm.live(["files", "conversations"]) == plaza.rm.replay(names=["files", "conversations"])
