"""agentplaza: the plaza's command line.  It talks to the hub over HTTP only
(``audit`` and ``replay`` can also read the store directly, read-only).

The global flags (``--json``, ``--hub``, ``--token``, ``--pin``) are taken anywhere: before the
command, after it, after its arguments. Only the command named on the line is built in full, so
a command loads what it needs and no more: HTTP when it talks to a hub, the store only for the
offline paths (``cli.offline``).

Exit status: 0 done, 1 refused (one line on stderr), 2 a malformed command line, 130 stopped with
Ctrl-C (128 + SIGINT), 141 the reader of its output went away (128 + SIGPIPE), as the shell reports
a program those signals end.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .commands import AREAS
from .env import Env
from .errors import HubError
from .output import refuse

#: Ctrl-C and a closed pipe end the command quietly, with the status a shell gives those signals.
INTERRUPTED_EXIT = 128 + 2
BROKEN_PIPE_EXIT = 128 + 13
USAGE_EXIT = 2

#: The flags every command takes, anywhere on its line: (flags, argparse options).
GLOBALS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--json",), {"action": "store_true", "help": "print the hub's JSON instead of tables"}),
    (("--hub",), {"metavar": "URL|NAME", "help": "the hub's address, or a saved hub's name (APZ_HUB)"}),
    (("--token",), {"help": "the owner token for that hub (APZ_TOKEN)"}),
    (("--pin",), {"metavar": "SHA256", "help": "the SHA-256 fingerprint of the hub's own certificate (APZ_PIN)"}),
)
GLOBAL_DEFAULTS = {"json": False, "hub": None, "token": None, "pin": None}
#: The global flags that take a value (skipped when looking for the command's name).
VALUED = frozenset(f for flags, o in GLOBALS if o.get("action") != "store_true" for f in flags)


class Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("agentplaza")
        except PackageNotFoundError:
            v = "unknown"
        print(f"agentplaza {v}")
        parser.exit()


def command_named(argv: list[str]) -> str | None:
    """The area named on the line: the first word that is not a global flag or its value."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--":
            return None
        elif word in VALUED:
            skip = True
        elif not word.startswith("-"):
            return word if word in AREAS else None
    return None


def _globals_everywhere(parser: argparse.ArgumentParser) -> None:
    """Each global flag after any command and subcommand too (``agentplaza treasury balances --json``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                for flags, options in GLOBALS:
                    if flags[0] not in child._option_string_actions:
                        child.add_argument(*flags, **options, default=argparse.SUPPRESS)
                _globals_everywhere(child)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv``, only the command it names is built in full (the others are named
    with their help, for ``--help``)."""
    p = argparse.ArgumentParser(prog="agentplaza", description="Run your AgentPlaza from the command line.")
    p.add_argument("--version", action=Version, help="print the version and exit")
    for flags, options in GLOBALS:
        p.add_argument(*flags, **options, default=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    named = command_named(argv) if argv is not None else None
    for name, area in AREAS.items():
        if argv is None or name == named:
            area.register(sub)
        else:
            sub.add_parser(name, help=getattr(area, "help", None) or getattr(area, "HELP", None))
    _globals_everywhere(p)
    return p


def parse(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    for k, v in GLOBAL_DEFAULTS.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    return parser, args


def make_client(env: Env):
    from .client import Client

    t = env.target
    return Client(t.url, t.token, pin=t.pin)


def run(argv: list[str]) -> int:
    parser, args = parse(argv)
    if args.command is None:
        parser.print_help()
        return USAGE_EXIT
    env = Env(args, lambda: make_client(env))
    try:
        return AREAS[args.command].run(env)
    except HubError as e:
        return refuse(e.message, e.code)


def main(argv: list[str] | None = None) -> int:
    try:
        code = run(sys.argv[1:] if argv is None else list(argv))
        sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        # The reader went away (``| head``): say nothing more, and let nothing else try to write.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
