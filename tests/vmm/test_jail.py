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


PERL = next((p for p in ("/usr/bin/perl", "/bin/perl") if os.access(p, os.X_OK)), None)
needs_perl = pytest.mark.skipif(PERL is None, reason="the helper waits as perl only where perl is (Debian: always)")


def _spec(tmp_path, n: int = 0) -> jail.JailSpec:
    root = tmp_path / f"root{n}"
    root.mkdir()
    return jail.JailSpec(root=str(root), uid=65000 + (os.getpid() + n) % 500, ro={BUSYBOX: BUSYBOX})


def _status(pid: int) -> dict:
    return {ln.split(":")[0]: ln.split(":", 1)[1].strip()
            for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in ln}


def _waiting_as_perl(helper) -> bool:
    return _children(helper.pid) != [] and _status(helper.pid)["Name"] == "perl"


@needs_perl
def test_the_helper_waits_as_a_small_perl_process_passing_on_signals_and_the_status(tmp_path):
    """Once its program runs the helper has only to wait: it becomes a few lines of perl (0.45-0.7 MiB of
    its own, where the Python helper held 4.7 MiB for a VM's whole life). A SIGTERM to it still reaches the
    program (QEMU's way to stop cleanly), and the helper ends with the program's status."""
    helper = jail.spawn([BUSYBOX, "sh", "-c", "trap 'exit 3' TERM; sleep 600 & wait"], _spec(tmp_path))
    try:
        assert _wait(lambda: _waiting_as_perl(helper)), "the helper did not become the perl waiter"
        anon_kib = int(_status(helper.pid)["RssAnon"].split()[0])
        assert anon_kib < 2048, f"the waiter holds {anon_kib} KiB of its own"
        (child,) = _children(helper.pid)
        # Until the shell's trap is set it ignores SIGTERM (the init of its PID namespace): sent again till
        # it is taken, each passed on by the waiter.
        end = time.monotonic() + 20
        while helper.poll() is None and time.monotonic() < end:
            os.kill(helper.pid, signal.SIGTERM)
            _wait(lambda: helper.poll() is not None, 0.2)
        assert helper.wait(timeout=5) == 3                       # the program's own status, passed on
        assert _wait(lambda: _gone(child))
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
    quick = jail.spawn([BUSYBOX, "sh", "-c", "exit 7"], _spec(tmp_path, 1))   # ended before the waiter began
    assert quick.wait(timeout=20) == 7
    killed = jail.spawn([BUSYBOX, "sleep", "600"], _spec(tmp_path, 2))
    try:
        assert _wait(lambda: _waiting_as_perl(killed))
        os.kill(_children(killed.pid)[0], signal.SIGKILL)     # (QEMU killed, as a crash would end it)
        assert killed.wait(timeout=20) == 128 + signal.SIGKILL
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait()


SPARE_STARTER = """
import os, subprocess, sys, time
from pathlib import Path
from vmm import jail
spec = jail.JailSpec(root=sys.argv[1], uid=int(sys.argv[2]), ro={sys.argv[3]: sys.argv[3]})
p = jail.spawn([sys.argv[3], "sleep", "600"], spec, spare_of=os.getpid(), stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
end = time.monotonic() + 20
while time.monotonic() < end and not (Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
                                      and "perl" in Path(f"/proc/{p.pid}/status").read_text().split("\\n")[0]):
    time.sleep(0.05)
if sys.argv[4] == "keep":
    os.kill(p.pid, jail.KEEP_SIGNAL)
    time.sleep(0.5)
print(p.pid, flush=True)
os._exit(0)
"""


@needs_perl
@pytest.mark.parametrize("kept", [True, False], ids=["kept", "not-kept"])
def test_a_spare_helper_waiting_as_perl_dies_with_its_starter_until_kept(tmp_path, kept):
    """A spare's helper (``spawn(spare_of=...)``) has its starter's death signal; ``KEEP_SIGNAL`` (a
    machine took it) clears it. Both hold once it waits as perl: blocked across the exec, not lost."""
    import subprocess
    import sys
    spec = _spec(tmp_path)
    out = subprocess.run([sys.executable, "-c", SPARE_STARTER, spec.root, str(spec.uid), BUSYBOX,
                          "keep" if kept else "no"], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    pid = int(out.stdout.split()[0])
    try:
        if kept:
            time.sleep(1.0)
            assert not _gone(pid) and _status(pid)["Name"] == "perl", "a kept spare's helper died with its starter"
        else:
            assert _wait(lambda: _gone(pid)), "a spare's helper outlived its starter"
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
