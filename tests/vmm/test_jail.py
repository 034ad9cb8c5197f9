"""The jail's own promises, with a tiny jailed program instead of QEMU (no guest, no image)."""
import os
import signal
import time
from pathlib import Path

import pytest

from vmm import jail

BUSYBOX = "/bin/busybox"
pytestmark = pytest.mark.skipif(not jail.available()[0] or not os.path.exists(BUSYBOX),
                                reason="the jail needs root and busybox-static (CI has both)")


def _children(pid: int) -> list:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait(pred, seconds: float = 20.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_the_jailed_program_dies_with_its_helper_even_after_it_changed_uid(tmp_path):
    """The helper maps root to an unprivileged uid and the child takes it with setresuid, which clears
    the parent-death signal; a SIGKILLed helper (a crashed node, a test's crash) once left QEMU behind."""
    root = tmp_path / "root"
    root.mkdir()
    helper = jail.spawn([BUSYBOX, "sleep", "600"],
                        jail.JailSpec(root=str(root), uid=64000 + os.getpid() % 1000, ro={BUSYBOX: BUSYBOX}))
    try:
        assert _wait(lambda: bool(_children(helper.pid))), "the helper never started its child"
        (child,) = _children(helper.pid)
        assert _wait(lambda: Path(f"/proc/{child}/cmdline").read_bytes().startswith(BUSYBOX.encode()))
        assert Path(f"/proc/{child}/status").read_text().count(str(64000 + os.getpid() % 1000)) >= 1
        os.kill(helper.pid, signal.SIGKILL)
        helper.wait(timeout=20)
        assert _wait(lambda: _gone(child)), "the jailed program outlived its helper"
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
