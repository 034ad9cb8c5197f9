"""What a command needs: the hub it talks to, a client for it, and how to print."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .config import Target, resolve
from .output import emit

if TYPE_CHECKING:  # the client loads HTTP: only a command that talks to a hub makes one
    from .client import Client


@dataclass
class Env:
    args: argparse.Namespace
    make_client: Callable[[], Client]
    _client: Client | None = None
    area: str = ""  # the area being run (its name, for messages)
    _target: Target | None = None

    @property
    def target(self) -> Target:
        """The hub this command talks to (flags, environment, cli.json), worked out once."""
        if self._target is None:
            a = self.args
            self._target = resolve(getattr(a, "hub", None), getattr(a, "token", None), getattr(a, "pin", None))
        return self._target

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = self.make_client()
        return self._client

    def show(self, data: Any, render: Callable[[Any], str]) -> int:
        emit(data, self.args.json, render)
        return 0
