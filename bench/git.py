"""The git server's speed: a push of a 10 MB change and a clone of a 100-commit repository through the
hub (a real apid, git's smart HTTP, the push recorded in the log), against plain ``git`` over
``file://`` on the same machine, in the same run.

    python bench/git.py

Each figure is the best of ``ROUNDS``; the ratio is hub time / file:// time. The last line is the headline.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

#: The push's size, the clone's commits, and how many times each is timed.
PUSH_BYTES, COMMITS, ROUNDS = 10 << 20, 100, 3


def git(cwd: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_TERMINAL_PROMPT": "0"}
    out = subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args], cwd=cwd,
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {out.stderr.strip()[-600:]}")


def best(fn) -> float:
    times = []
    for i in range(ROUNDS):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return min(times)


def history(work: Path) -> None:
    for i in range(COMMITS):
        (work / f"f{i % 10}.txt").write_text(f"line {i}\n" * (i + 1))
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"commit {i}")


def main() -> int:
    from support.hubproc import HubProcess

    from agentplaza.config import Folders

    tmp = Path(tempfile.mkdtemp(prefix="apz-bench-git-"))
    atexit.register(shutil.rmtree, tmp, True)  # the run's store and folders go with it
    folders = Folders(tmp / "state", tmp / "config", tmp / "data").make()
    os.environ.update(APZ_STATE_DIR=str(folders.state), APZ_CONFIG_DIR=str(folders.config),
                      APZ_DATA_DIR=str(folders.data))
    os.environ.pop("APZ_DATABASE_URL", None)
    hub = HubProcess(folders).start()
    try:
        with hub.client() as c:
            for name in ("hist", "big"):
                c.post("/v1/git/repos", json={"name": name}).raise_for_status()
        bare = tmp / "plain"
        git(tmp, "init", "-q", "--bare", str(bare / "hist.git"))
        git(tmp, "init", "-q", "--bare", str(bare / "big.git"))

        src = tmp / "src"
        git(tmp, "clone", "-q", f"{hub.url}/git/hist.git", str(src))
        history(src)
        git(src, "push", "-q", "origin", "HEAD:refs/heads/history")
        git(src, "push", "-q", f"file://{bare}/hist.git", "HEAD:refs/heads/main")
        clone_hub = best(lambda i: git(tmp, "clone", "-q", "--branch", "history", f"{hub.url}/git/hist.git",
                                       str(tmp / f"ch{i}")))
        clone_file = best(lambda i: git(tmp, "clone", "-q", f"file://{bare}/hist.git", str(tmp / f"cf{i}")))

        big = tmp / "bigsrc"
        git(tmp, "clone", "-q", f"{hub.url}/git/big.git", str(big))

        def push(i: int, remote: str) -> None:
            git(big, "checkout", "-q", "-B", f"b{remote[:4]}{i}", "main")
            (big / "blob.bin").write_bytes(os.urandom(PUSH_BYTES))
            git(big, "add", "blob.bin")
            git(big, "commit", "-q", "-m", f"10 MB {i}")
            t = time.perf_counter()
            git(big, "push", "-q", remote, f"HEAD:refs/heads/b{i}")
            return time.perf_counter() - t

        push_hub = min(push(i, "origin") for i in range(ROUNDS))
        push_file = min(push(i, f"file://{bare}/big.git") for i in range(ROUNDS))
    finally:
        hub.stop()
    print(f"clone of {COMMITS} commits: hub {clone_hub * 1000:.0f} ms, file:// {clone_file * 1000:.0f} ms "
          f"({clone_hub / clone_file:.1f}x)")
    print(f"push of a {PUSH_BYTES >> 20} MB change: hub {push_hub * 1000:.0f} ms, file:// {push_file * 1000:.0f} ms "
          f"({push_hub / push_file:.1f}x)")
    print(f"git through the hub: clone {clone_hub / clone_file:.1f}x, push {push_hub / push_file:.1f}x plain file://")
    return 0


if __name__ == "__main__":
    sys.exit(main())
