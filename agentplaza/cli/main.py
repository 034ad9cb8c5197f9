"""agentplaza: the plaza's command line.  It talks to the hub over HTTP only
(``audit`` and ``replay`` can also read the store directly, read-only)."""

from __future__ import annotations

import argparse
import sys

from .client import Client, HubError
from .commands import AREAS
from .env import Env
from .output import refuse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentplaza", description="Run your AgentPlaza from the command line.")
    p.add_argument("--hub", help="the hub's address (APZ_HUB)")
    p.add_argument("--token", help="the owner token for that hub (APZ_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the hub's JSON instead of tables")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for area in AREAS.values():
        area.register(sub)
    _json_anywhere(p)
    return p


def _json_anywhere(parser: argparse.ArgumentParser) -> None:
    """``--json`` is taken after any command too (``agentplaza audit verify --json``), as the guide writes it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if "--json" not in child._option_string_actions:
                    child.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                                       help="print the hub's JSON instead of tables")
                _json_anywhere(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    env = Env(args, lambda: Client(args.hub, args.token))
    try:
        return AREAS[args.command].run(env)
    except HubError as e:
        return refuse(e.message, e.code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
