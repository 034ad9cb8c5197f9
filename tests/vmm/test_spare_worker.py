"""A spare QEMU's uid (vmm/spare.py): never one a live process holds; its worker outlives any failure.

A machine that took a spare keeps the spare's uid and outlives the process that made it; once that
process's pid is reused, the new process's range of spare uids holds the running machine's uid. Two
jailed QEMUs under one uid could reach each other's files, so a spare skips every uid in use.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.support.deadline import until
from vmm import spare


def test_a_spare_skips_a_uid_a_live_process_holds(monkeypatch):
    first = spare.SPARE_UID_BASE + os.getpid() * 64 + 5
    monkeypatch.setattr(spare, "_live_uids", lambda: {first, first + 1})
    uid = spare._uid(5)
    try:
        assert uid == first + 2
    finally:
        spare.release_uid(uid)


def test_no_free_uid_is_a_clear_error(monkeypatch):
    base = spare.SPARE_UID_BASE + os.getpid() * 64
    monkeypatch.setattr(spare, "_live_uids", lambda: set(range(base, base + 64)))
    with pytest.raises(OSError, match="no spare uid free"):
        spare._uid(0)


def test_the_live_uids_are_read_from_proc():
    assert os.getuid() in spare._live_uids()


class _Shape:
    """A machine as ``fill`` sees it (``key_of`` is replaced: no jail is needed here)."""


def test_the_worker_goes_on_after_a_failed_making_and_a_failed_turn(monkeypatch, tmp_path):
    """A spare is an optimisation, but the one worker thread of a process makes them all: a making that
    fails, a spare whose RAM file is gone, an end that raises must never stop it, or every later machine
    of the process goes without (what CI once showed: no spare within 60 s). Each failure is noted."""
    monkeypatch.setattr(spare, "last_error", None)
    monkeypatch.setattr(spare, "QUIET_S", 0.0)
    monkeypatch.setattr(spare, "key_of", lambda m: ("shape", id(m)))
    made = []

    def make(m, key, hint):
        made.append(key)
        raise RuntimeError("refused for the test")
    monkeypatch.setattr(spare, "_make", make)
    first, second = _Shape(), _Shape()
    spare.fill(first)
    until("the first making tried", lambda: made and not spare._wanted, 10)
    assert spare.last_error == "refused for the test"

    class Broken:   # a ready spare, unused for long, whose RAM file is gone and whose end raises
        key = ("shape", "broken")
        ram = tmp_path / "gone" / "ram"
        ready_pages = [(0, 4096)]
        made = time.monotonic() - spare.READY_PAGES_S - 1
    monkeypatch.setattr(spare, "end", lambda s: (_ for _ in ()).throw(RuntimeError("end refused")))
    with spare._lock:
        spare._ready[Broken.key] = Broken
    spare.fill(second)                                   # the next turn meets the broken spare too
    until("the second making tried", lambda: len(made) == 2 and not spare._wanted, 10)
    until("the broken spare dropped", lambda: Broken.key not in spare._ready, 10)
    assert spare._worker.is_alive()
    assert spare.last_error and "end refused" in spare.last_error


def test_what_a_gone_process_left_is_told_by_its_name():
    """A spare's folders carry their maker's pid (``<prefix><pid>.<n>``): removed by the next process only
    once that pid is gone, never this process's own, never a name of another shape."""
    from vmm import jail
    gone = 4194303   # above any pid this machine hands out (/proc/sys/kernel/pid_max at most 4194304)
    assert jail.left_by_gone_process(f"{spare.PREFIX}{gone}.3", spare.PREFIX)
    assert not jail.left_by_gone_process(f"{spare.PREFIX}{os.getpid()}.3", spare.PREFIX)
    assert not jail.left_by_gone_process(f"{spare.PREFIX}1.3", spare.PREFIX)          # init: alive
    assert not jail.left_by_gone_process(f"{spare.PREFIX}x1.3", spare.PREFIX)
    assert not jail.left_by_gone_process(f"other.{gone}.3", spare.PREFIX)


def test_a_cold_boot_lets_spares_be_made_once_only_its_guest_is_left_to_boot(monkeypatch):
    # starting() holds spare making back; host_part_done() ends that hold early (a cold boot whose QEMU is
    # up and connected), once only: the context's end does not count it again
    monkeypatch.setattr(spare, "QUIET_S", 0.0)
    before = spare._starts
    with spare.starting() as st:
        assert spare._starts == before + 1
        st.host_part_done()
        st.host_part_done()
        assert spare._starts == before
        spare._wait_quiet()   # returns: no start holds spares back now
    assert spare._starts == before
    with pytest.raises(RuntimeError):
        with spare.starting():
            raise RuntimeError("a start that fails")
    assert spare._starts == before
