"""agentplaza tui: the plaza in the terminal, live (tabs Floor 1 ... Nodes 8, Workspace 0)."""

from __future__ import annotations

import sys

from ..env import Env
from ..output import refuse

NAME = "tui"
HELP = "the terminal screen: the plaza live, a tab for each console area"


def register(sub) -> None:
    sub.add_parser(NAME, help=HELP, description=HELP + ". Keys: 0-8, Tab and Shift+Tab choose a tab; j/k or the "
                   "arrows move; Enter opens an agent's detail; t messages it; a/d approve or deny; s STOP ALL or "
                   "resume; r refresh; q or Esc quit.")


def run(env: Env) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return refuse("agentplaza tui draws on a terminal; run it in one (for a script: agentplaza overview --json)",
                      "not_a_terminal")
    from ..tui.app import Screen  # prompt-toolkit is loaded only for the screen

    return Screen(env.client).run()
