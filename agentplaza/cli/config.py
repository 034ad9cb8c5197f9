"""``cli.json``: the hubs saved with ``agentplaza hub login``, in the config folder.

The file holds each saved hub's address, its owner token and its certificate pin, and which one
is in use. It is written whole and atomically, readable only by its owner (0600), in a folder only
its owner may enter (0700). A token read from it is never printed back.

Which hub a command talks to, first match wins: ``--hub`` (an address, or a saved hub's name),
``APZ_HUB``, the saved hub in use, the local hub. The token: ``--token``, ``APZ_TOKEN``, the saved
hub's, then for a hub on this machine the ``owner-token`` file (read by ``cli.client``). The pin:
``--pin``, ``APZ_PIN``, the saved hub's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..config import DEFAULT_HUB, folders
from .errors import HubError

CLI_FILE = "cli.json"
FILE_MODE = 0o600
FOLDER_MODE = 0o700
#: A saved hub's name: what ``--hub NAME`` and ``hub use NAME`` take.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")


@dataclass
class SavedHub:
    name: str
    url: str
    token: str | None = None
    pin: str | None = None

    def public(self, current: str | None) -> dict:
        """What may be shown of it: never the token, only whether one is saved."""
        return {"name": self.name, "url": self.url, "token": "saved" if self.token else None, "pin": self.pin,
                "current": self.name == current}


@dataclass
class Saved:
    current: str | None = None
    hubs: dict[str, SavedHub] = field(default_factory=dict)

    def by_url(self, url: str) -> SavedHub | None:
        return next((h for h in self.hubs.values() if h.url == url), None)

    def named(self, name: str) -> SavedHub:
        if name not in self.hubs:
            raise HubError(f"no saved hub named {name!r} (agentplaza hub list shows them)", "unknown_hub")
        return self.hubs[name]


@dataclass(frozen=True)
class Target:
    """The hub a command talks to, and how."""

    url: str
    token: str | None
    pin: str | None
    name: str | None  # the saved hub's name, when it is one


def cli_file(env: Mapping[str, str] = os.environ) -> Path:
    return folders(env).config / CLI_FILE


def normal_url(text: str) -> str:
    url = text.strip().rstrip("/")
    return url if "://" in url else "http://" + url


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise HubError(f"a saved hub's name is letters, digits and . _ : - (at most 64), not {name!r}",
                       "invalid_hub_name")
    return name


def load(path: Path | None = None) -> Saved:
    path = path or cli_file()
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return Saved()
    except OSError as e:
        raise HubError(f"cannot read {path}: {e}", "cli_file_unreadable") from None
    try:
        data = json.loads(raw)
        hubs = {n: SavedHub(name=n, url=h["url"], token=h.get("token"), pin=h.get("pin"))
                for n, h in data.get("hubs", {}).items()}
        return Saved(current=data.get("current"), hubs=hubs)
    except (ValueError, TypeError, KeyError, AttributeError):
        raise HubError(f"{path} is not a saved-hubs file; move it away and log in again",
                       "cli_file_unreadable") from None


def store(saved: Saved, path: Path | None = None) -> Path:
    """Write the file whole: a private temporary file beside it, then one rename."""
    path = path or cli_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    data = {"current": saved.current,
            "hubs": {n: {k: v for k, v in asdict(h).items() if k != "name"} for n, h in saved.hubs.items()}}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def resolve(hub: str | None, token: str | None, pin: str | None, env: Mapping[str, str] = os.environ) -> Target:
    """The hub, token and pin a command uses, from its flags, the environment and cli.json."""
    hub = hub or env.get("APZ_HUB") or None
    saved = load(cli_file(env))
    entry: SavedHub | None = None
    if hub is not None and "://" not in hub and hub in saved.hubs:
        entry = saved.hubs[hub]
        url = entry.url
    elif hub is not None:
        url = normal_url(hub)
        entry = saved.by_url(url)
    elif saved.current is not None and saved.current in saved.hubs:
        entry = saved.hubs[saved.current]
        url = entry.url
    else:
        url = DEFAULT_HUB
    return Target(
        url=url,
        token=token or env.get("APZ_TOKEN") or (entry.token if entry else None),
        pin=pin or env.get("APZ_PIN") or (entry.pin if entry else None),
        name=entry.name if entry else None,
    )
