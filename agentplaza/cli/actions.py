"""Each area of the command line as a table of actions.

An action is one row: its name and help, its arguments, the hub route it calls (method and path,
filled from the arguments), the query or body it sends, how its answer is printed, and the question
it asks first (skipped with ``--yes``). An action that needs more than one call, or reads a file or
a password, gives ``run`` instead of a route. An area module holds ``AREA = Area(...)``::

    AREA = Area("log", "events in the log that cannot be read back, and voiding one", (
        Action("unreadable", "every stored event that cannot be read back", "GET", "/v1/log/unreadable",
               render=render_list, default=True),
        Action("void", "record that an unreadable event is seen", "POST", "/v1/log/void",
               args=(arg("position", type=int), arg("--reason", required=True)),
               body=lambda a: {"position": a.position, "reason": a.reason},
               confirm=lambda a: f"Void the unreadable event at position {a.position}?", render=render_voided),
    ))
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .env import Env
from .output import refuse

Args = argparse.Namespace


@dataclass(frozen=True)
class Arg:
    flags: tuple[str, ...]
    options: dict[str, Any]


def arg(*flags: str, **options: Any) -> Arg:
    """An argument as ``argparse.add_argument`` takes it."""
    return Arg(flags, options)


@dataclass(frozen=True)
class OneOf:
    """Arguments of which at most one may be given (argparse's mutually exclusive group)."""
    args: tuple[Arg, ...]


def one_of(*args: Arg) -> OneOf:
    return OneOf(args)


def _add(parser: Any, a: Arg | OneOf) -> None:
    if isinstance(a, OneOf):
        group = parser.add_mutually_exclusive_group()
        for x in a.args:
            group.add_argument(*x.flags, **x.options)
    else:
        parser.add_argument(*a.flags, **a.options)


#: The flag that answers an action's question in advance.
YES = arg("--yes", action="store_true", help="do not ask to confirm")


def confirm(question: str) -> bool:
    """Ask on the terminal; no terminal (a script, a pipe) is a no."""
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


@dataclass(frozen=True)
class Action:
    name: str
    help: str
    method: str | None = None  # the route it calls: GET, POST, PUT, PATCH, DELETE
    path: str | None = None  # formatted with the arguments: "/v1/approvals/{id}"
    args: tuple[Arg | OneOf, ...] = ()
    query: Callable[[Args], dict] | None = None  # a GET's parameters (None values are left out)
    body: Callable[[Args], dict] | None = None  # a write's JSON body
    render: Callable[[Any], str] = str
    confirm: Callable[[Args], str] | None = None  # the question asked first; --yes skips it
    run: Callable[[Env], int] | None = None  # an action that is more than one call
    default: bool = False  # what the area does when no action is given
    aliases: tuple[str, ...] = ()

    def call(self, env: Env) -> int:
        args = env.args
        if self.confirm is not None and not getattr(args, "yes", False) and not confirm(self.confirm(args)):
            return refuse(f"{env.area} {self.name} not confirmed; pass --yes to skip the question", "not_confirmed")
        if self.run is not None:
            return self.run(env)
        assert self.method is not None and self.path is not None, f"action {self.name} has no route"
        path = self.path.format(**vars(args))
        if self.method == "GET":
            params = self.query(args) if self.query else {}
            data = env.client.get(path, **params)
        else:
            data = env.client.request(self.method, path, json=self.body(args) if self.body else {})
        return env.show(data, self.render)


@dataclass(frozen=True)
class Area:
    name: str
    help: str
    actions: tuple[Action, ...]
    top: tuple[Arg, ...] = field(default=())  # arguments of the area itself, before any action

    @property
    def NAME(self) -> str:  # noqa: N802 - the registry's name for an area
        return self.name

    def register(self, sub: Any) -> None:
        p = sub.add_parser(self.name, help=self.help)
        for a in self.top:
            p.add_argument(*a.flags, **a.options)
        s = p.add_subparsers(dest="action", metavar="ACTION")
        for action in self.actions:
            ap = s.add_parser(action.name, help=action.help, aliases=list(action.aliases))
            for a in action.args:
                _add(ap, a)
            if action.confirm is not None and "--yes" not in ap._option_string_actions:
                ap.add_argument(*YES.flags, **YES.options)

    def action(self, name: str | None) -> Action:
        for a in self.actions:
            if name == a.name or name in a.aliases or (name is None and a.default):
                return a
        raise LookupError(f"{self.name} has no action {name!r}")

    def run(self, env: Env) -> int:
        env.area = self.name
        return self.action(getattr(env.args, "action", None)).call(env)
