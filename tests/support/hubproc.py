"""Run a real apid process for black-box tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: How many ports ``HubProcess.start`` tries when another process takes the one it picked first.
PORT_TRIES = 3


class PortTaken(Exception):
    """The port picked for apid was taken before apid could bind it."""


#: Every hub started and not yet stopped: a test that forgets one (or one that a kill -9 test restarts)
#: must not leave it polling the log for the rest of the run; ``stop_left_over`` ends them.
_LIVE: set[HubProcess] = set()


def stop_left_over() -> int:
    """Stop every hub a test left running; how many there were."""
    left = [h for h in _LIVE if h.proc is not None and h.proc.poll() is None]
    for h in left:
        h.stop()
    _LIVE.clear()
    return len(left)


def failed(request) -> bool:
    """Whether the test that ``request`` belongs to failed (``tests/conftest.py`` keeps each phase's report)."""
    rep = getattr(request.node, "rep_call", None)
    return rep is not None and rep.failed


def program(checkout: Path) -> str:
    """The module apid runs as in ``checkout`` (one older than ``agentplaza/apid.py`` ran ``api.main``)."""
    return "agentplaza.apid" if (checkout / "agentplaza" / "apid.py").exists() else "agentplaza.api.main"


class HubProcess:
    def __init__(self, folders, database_url: str | None = None, port: int | None = None, args: tuple = (),
                 host: str = "127.0.0.1", umask: int = -1, code: Path | None = None):
        self.folders = folders
        # Another checkout to run apid from (a git worktree: bench/console.py --against). It is the
        # working directory as well as first on the path, since ``python -m`` puts the working directory
        # before PYTHONPATH: a hub started from this checkout's folder would run this checkout's code.
        self.code = code
        self.args = tuple(args)  # more apid flags
        self.host = host  # a loopback address the test owns (127.0.0.2 ...): with --https, a hosted hub
        self.umask = umask  # the umask apid starts under (-1: the test's own)
        self.chosen_port = port is None  # picked here: another may be picked when someone takes it first
        self.env = dict(os.environ)
        self.env.update(
            APZ_STATE_DIR=str(folders.state), APZ_CONFIG_DIR=str(folders.config), APZ_DATA_DIR=str(folders.data),
            PYTHONPATH=str(ROOT / "tests") + os.pathsep + self.env.get("PYTHONPATH", ""),
        )
        self._listen_on(port or free_port())
        if code is not None:
            self.env["PYTHONPATH"] = str(code) + os.pathsep + self.env["PYTHONPATH"]
        self.env.pop("APZ_DATABASE_URL", None)
        if database_url:
            self.env["APZ_DATABASE_URL"] = database_url
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []  # all it printed, as it prints it (a thread reads the pipe)
        self._reader: threading.Thread | None = None

    def _listen_on(self, port: int) -> None:
        self.port = port
        self.url = f"{'https' if '--https' in self.args else 'http'}://{self.host}:{self.port}"
        self.env["APZ_HUB"] = self.url

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def start(self, timeout: float = 90) -> HubProcess:
        """Start apid and wait until it listens. A port ``free_port`` picked can be taken by another test's
        process before apid binds it (the workers run side by side): apid then says it cannot listen, and
        it is started again on another port, up to ``PORT_TRIES`` times."""
        for _ in range(PORT_TRIES - 1):
            try:
                return self._start(timeout)
            except PortTaken:
                self._listen_on(free_port())
        return self._start(timeout)

    def _start(self, timeout: float) -> HubProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", program(self.code or ROOT), "--bind", f"{self.host}:{self.port}", *self.args],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, umask=self.umask,
            cwd=self.code,
        )
        _LIVE.add(self)
        self.lines = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    if self.chosen_port and f"apid: cannot listen on {self.host}:{self.port}: [Errno 98]" in self.output:
                        _LIVE.discard(self)
                        raise PortTaken(self.port)
                    raise RuntimeError("apid exited: " + self.output)
                continue
            self.lines.append(line)
            if "apid: listening on" in line:
                # Read on from here for as long as it runs: a pipe nobody reads fills (64 KiB) and the
                # hub's next print blocks it, mid-request, until the test stops it.
                self._reader = threading.Thread(target=self._read_on, args=(self.proc,), daemon=True)
                self._reader.start()
                return self
        raise RuntimeError("apid did not start: " + self.output)

    def _read_on(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.lines.append(line)

    def printed_all(self, timeout: float = 10) -> None:
        """Wait until everything an exited hub printed has been read."""
        if self._reader is not None:
            self._reader.join(timeout=timeout)

    def stacks(self, timeout: float = 5) -> str:
        """Every thread's stack in the running hub, as apid writes them on its ``STACKS_SIGNAL`` (SIGUSR1): what each
        thread waits for, to put beside a test that timed out waiting for the hub. "" if none came."""
        from agentplaza.api.main import STACKS_SIGNAL  # (here: most tests never need apid's module)

        if self.proc is None or self.proc.poll() is not None:
            return ""
        before = len(self.lines)
        self.proc.send_signal(STACKS_SIGNAL)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            time.sleep(0.2)
            new = self.lines[before:]
            if any(line.startswith("Current thread") for line in new):  # faulthandler writes it last
                time.sleep(0.2)  # the rest of its frames
                return "".join(self.lines[before:])
        return "".join(self.lines[before:])

    def said_last(self, chars: int = 6000) -> str:
        """The end of what the hub printed (with its threads' stacks, after ``stacks``), then of what its node
        and each guest wrote (the node's log, each machine's console and harness log): for a test that failed
        waiting on an agent."""
        out = ["--- the hub's output, its end ---\n" + self.output[-4 * chars:]]
        vms = Path(self.folders.data) / "vms"
        logs = [Path(self.folders.state) / "noded.log", *sorted(vms.rglob("console.log")),
                *sorted(vms.rglob("harness.log"))]
        out += [f"--- {log}, its end ---\n" + log.read_text(errors="replace")[-chars:] for log in logs if log.exists()]
        return "\n".join(out)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        _LIVE.discard(self)

    def stop(self, timeout: float = 15) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.printed_all()
        _LIVE.discard(self)


def cli(h: HubProcess, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run the agentplaza command against this hub, as a person would."""
    extra = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([sys.executable, "-m", "agentplaza.cli.main", *args], env=h.env,
                          capture_output=True, text=True, timeout=60, check=False, **extra)


def ok(r):
    """The JSON of a 200 answer (and the answer's text when it is not 200)."""
    assert r.status_code == 200, r.text
    return r.json()
