"""A spare QEMU's uid (vmm/spare.py): never one a live process holds.

A machine that took a spare keeps the spare's uid and outlives the process that made it; once that
process's pid is reused, the new process's range of spare uids holds the running machine's uid. Two
jailed QEMUs under one uid could reach each other's files, so a spare skips every uid in use.
"""

from __future__ import annotations

import os

import pytest

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
