"""What a command needs: a client for the hub, and how to print."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .client import Client
from .output import emit


@dataclass
class Env:
    args: argparse.Namespace
    make_client: Callable[[], Client]
    _client: Client | None = None
    area: str = ""  # the area being run (its name, for messages)

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = self.make_client()
        return self._client

    def show(self, data: Any, render: Callable[[Any], str]) -> int:
        emit(data, self.args.json, render)
        return 0
