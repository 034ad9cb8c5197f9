"""The command line's shape: the global flags anywhere on every command, ``--help`` after any
subcommand, ``--version``, a quiet end on a closed pipe or Ctrl-C, and what a command loads."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import subprocess
import sys

import pytest

from agentplaza.cli import main as cli_main
from agentplaza.cli.commands import AREAS

GLOBAL_DESTS = ("json", "hub", "token", "pin")


def sample(action: argparse.Action) -> list[str]:
    """A value argparse takes for this argument."""
    if action.choices:
        return [str(next(iter(action.choices)))]
    if action.nargs in ("*", "+") or isinstance(action.nargs, int):
        return ["1"] * (action.nargs if isinstance(action.nargs, int) else 1)
    return ["1"]


def lines(parser: argparse.ArgumentParser, words: list[str]):
    """Every command line the parser has, as the words of a minimal valid one (its required arguments filled)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    own = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction) or a.dest in GLOBAL_DESTS or a.dest == "help":
            continue
        if not a.option_strings and a.nargs not in ("?", "*"):
            own += sample(a)
        elif a.option_strings and a.required:
            own += [a.option_strings[0], *sample(a)]
    if not subs:
        yield words + own
        return
    yield words + own  # the area (or action) alone, where it has a default
    for name, child in subs[0].choices.items():
        yield from lines(child, words + own + [name])


def every_line():
    out = []
    for name in AREAS:
        parser = cli_main.build_parser([name])
        area = parser._subparsers._group_actions[0].choices[name]
        out += list(lines(area, [name]))
    return out


def parse(words: list[str]) -> argparse.Namespace | None:
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return cli_main.parse(words)[1]
    except SystemExit:
        return None


def test_every_command_takes_the_global_flags_before_and_after():
    checked = 0
    for words in every_line():
        plain = parse(words)
        if plain is None:  # an area that needs an action named: it is tried with each of them
            continue
        flags = ["--json", "--hub", "http://h:1", "--token", "t", "--pin", "ab" * 32]
        front, back = parse(flags + words), parse(words + flags)
        assert front is not None and back is not None, words
        assert vars(front) == vars(back), words
        assert (front.json, front.hub, front.token, front.pin) == (True, "http://h:1", "t", "ab" * 32), words
        assert (plain.json, plain.hub, plain.token, plain.pin) == (False, None, None, None), words
        checked += 1
    assert checked > 100  # every action of every area


def test_help_after_any_subcommand_lists_its_options():
    for words in every_line():
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
                pytest.raises(SystemExit) as done:
            cli_main.parse(words + ["--help"])
        assert done.value.code == 0, words
        assert "--json" in out.getvalue() and "--hub" in out.getvalue(), words


def test_plaza_stop_takes_no_reason():
    args = cli_main.parse(["plaza", "stop", "--yes"])[1]
    assert args.reason is None and args.yes


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentplaza.cli.main", *args], capture_output=True, text=True,
                          timeout=60, check=False, **kw)


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("agentplaza ") and r.stdout.split()[1][0].isdigit()


def test_a_closed_pipe_ends_quietly_with_141(folders):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte (``| head`` that already quit)
    try:
        r = subprocess.run([sys.executable, "-m", "agentplaza.cli.main", "hub", "list"], stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    finally:
        os.close(write)
    assert r.returncode == cli_main.BROKEN_PIPE_EXIT == 141
    assert r.stderr == ""


def test_ctrl_c_ends_quietly_with_130(folders):
    # No hub: the stream waits to reconnect. The CLI starts with SIGINT as a shell at a terminal gives it: a
    # program started with SIGINT ignored (a background job, ``nohup``; or a test process that inherited
    # it, as once on CI: the CLI kept its loop, rightly, and this test waited 30 s) keeps ignoring it.
    # PYTHONFAULTHANDLER: where it was, should it ever hang again.
    env = dict(os.environ, APZ_HUB="http://127.0.0.1:9", PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen([sys.executable, "-m", "agentplaza.cli.main", "events"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stderr.readline()  # it is in its loop: waiting before the next try
        assert "reconnecting in" in first
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)   # the fault handler prints every thread's stack
            _out, err = proc.communicate(timeout=30)
            pytest.fail(f"Ctrl-C did not end the stream within 60 s; where it was:\n{err[-4000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == cli_main.INTERRUPTED_EXIT == 130
    assert "Traceback" not in err and out == ""


#: What a command that talks to a hub must not load: the store, the read models, the server, HTTP libraries
#: with their async machinery, the microVM monitor.
HEAVY = ("sqlalchemy", "eventsourcing", "psycopg", "pydantic", "starlette", "hypercorn", "trio", "anyio", "httpx",
         "httpcore", "websockets", "prompt_toolkit", "agentplaza.events", "agentplaza.projections",
         "agentplaza.domain", "agentplaza.api", "agentplaza.vault", "vmm")

PROBE = """
import os, sys
from agentplaza.cli import main
try:
    main.main(sys.argv[1:])
except SystemExit:
    pass
# A None entry marks a module absent, not loaded (agentplaza/__init__.py so marks httpx._main).
heavy = sorted({m.split('.')[0] if not m.startswith('agentplaza') else '.'.join(m.split('.')[:2])
                for m, mod in list(sys.modules.items())
                if mod is not None and m.startswith(tuple(os.environ['HEAVY'].split()))})
print('LOADED', ' '.join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("words", [["--help"], ["overview", "--json"], ["tasks", "list", "--json"],
                                   ["hub", "list"], ["audit", "verify", "--json"], ["acp", "sessions", "--json"]])
def test_a_command_loads_only_what_it_needs(folders, words):
    env = dict(os.environ, APZ_HUB="http://127.0.0.1:9", HEAVY=" ".join(HEAVY))
    r = subprocess.run([sys.executable, "-c", PROBE, *words], env=env, capture_output=True, text=True, timeout=60)
    loaded = r.stderr.rsplit("LOADED", 1)[1].split()
    if words[0] == "audit":  # no hub answers: it reads the store itself, and only then loads it
        assert "agentplaza.events" in loaded
    else:
        assert loaded == [], loaded


def test_events_all_asks_for_the_console_lines():
    args = cli_main.parse(["events", "--all", "--kinds", "agent"])[1]
    assert args.all and args.kinds == "agent"


def test_docs_cli_lists_every_command_a_line_each():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    missing = []
    for n, area in AREAS.items():
        actions = getattr(area, "actions", None)
        if actions is None:  # an area module of its own shape: its name alone
            names = [n]
        else:
            names = [n if (a.default and len(actions) == 1) else f"{n} {a.name}" for a in actions]
        missing += [f"| `agentplaza {name}` | ... |" for name in names if f"| `agentplaza {name}` |" not in doc]
    assert not missing, "add these lines to docs/cli.md, 'Every command':\n" + "\n".join(missing)
