"""The sweep of RAM folders no process uses (vmm/ram_sweep.py): a machine whose process died left its
guest's RAM in the tmpfs for good; the sweep removes such a folder, and never one in use or just made."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import time

from vmm import ram_sweep

OLD = time.time() - ram_sweep.ORPHAN_AGE_S - 60


def _folder(root, name, size=1 << 16, old=True):
    d = root / name
    d.mkdir()
    with open(d / "ram", "wb") as f:
        f.truncate(size)
    if old:
        os.utime(d, (OLD, OLD))
    return d


def test_only_old_folders_no_process_maps_or_holds_are_removed(tmp_path):
    left = _folder(tmp_path, "apz-vm-agent-4-69534052-darx1fuh")
    spare = _folder(tmp_path, "apz-vm-spare.1.2-abc")
    young = _folder(tmp_path, "apz-vm-agent-5-00000000-new", old=False)
    other = _folder(tmp_path, "someone-else")
    mapped = _folder(tmp_path, "apz-vm-agent-6-11111111-mapped")
    held = _folder(tmp_path, "apz-vm-agent-7-22222222-held")
    with open(mapped / "ram", "r+b") as f:          # mapped, its descriptor closed: as a running QEMU
        m = mmap.mmap(f.fileno(), 0)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=open(held / "ram", "ab"))
    try:
        os.utime(held, (OLD, OLD))
        gone = ram_sweep.sweep(tmp_path)
        assert sorted(gone) == sorted([left, spare])
        assert not left.exists() and not spare.exists()
        assert young.exists() and other.exists() and mapped.exists() and held.exists()
    finally:
        m.close()
        child.communicate(b"")
    assert sorted(ram_sweep.sweep(tmp_path)) == sorted([mapped, held])   # unused now; young is not old yet


def test_a_folder_made_before_a_process_that_cannot_be_read_started_is_kept(tmp_path, monkeypatch):
    """Such a process could be a QEMU that maps it; one that started before the folder was made cannot."""
    left = _folder(tmp_path, "apz-vm-agent-4-69534052-x")
    monkeypatch.setattr(ram_sweep, "files_in_use", lambda: (set(), OLD + 1))
    assert ram_sweep.sweep(tmp_path) == []
    assert left.exists()
    monkeypatch.setattr(ram_sweep, "files_in_use", lambda: (set(), OLD - 1))
    assert ram_sweep.sweep(tmp_path) == [left]


def test_the_files_in_use_include_this_process_maps():
    with open(sys.executable, "rb") as f:
        st = os.fstat(f.fileno())
    used, newest_unknown = ram_sweep.files_in_use()
    assert (st.st_dev, st.st_ino) in used
    assert newest_unknown < time.time()
