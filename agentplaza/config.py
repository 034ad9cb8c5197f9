"""Where the plaza keeps its files, and which database holds its store.

The guide's Linux defaults are the XDG folders; ``APZ_STATE_DIR``,
``APZ_CONFIG_DIR`` and ``APZ_DATA_DIR`` override each one (tests always do).
Without ``APZ_DATABASE_URL`` the store is SQLite in the state folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BIND = "127.0.0.1:7700"
DEFAULT_HUB = "http://127.0.0.1:7700"
STORE_FILE = "plaza.sqlite"
READ_MODELS_FILE = "read-models.sqlite"
OWNER_TOKEN_FILE = "owner-token"
HUB_RECORD_FILE = "hub.json"


@dataclass(frozen=True)
class Folders:
    state: Path
    config: Path
    data: Path

    def make(self) -> Folders:
        for folder in (self.state, self.config, self.data):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self


def folders(env: Mapping[str, str] = os.environ) -> Folders:
    home = Path(env.get("HOME") or Path.home())

    def pick(var: str, xdg: str, fallback: str) -> Path:
        if env.get(var):
            return Path(env[var])
        base = Path(env[xdg]) if env.get(xdg) else home / fallback
        return base / "agentplaza"

    return Folders(
        state=pick("APZ_STATE_DIR", "XDG_STATE_HOME", ".local/state"),
        config=pick("APZ_CONFIG_DIR", "XDG_CONFIG_HOME", ".config"),
        data=pick("APZ_DATA_DIR", "XDG_DATA_HOME", ".local/share"),
    )


def database_url(env: Mapping[str, str] = os.environ) -> str | None:
    url = (env.get("APZ_DATABASE_URL") or "").strip()
    return url or None
