"""The command line's only way to the hub: HTTP (and the live bus over WebSocket).

It is the standard library's HTTP (``cli.http``): a command starts fast.

Every write (POST, PUT, PATCH, DELETE) carries an ``Idempotency-Key``: one
random prefix per invocation and the request's number within it, so two
writes of one command never share a key.  A request whose connection drops
is sent once more, with the same key, so the hub does it once (see
docs/operations.md, "Retries and Idempotency-Key").
"""

from __future__ import annotations

import ipaddress
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..config import DEFAULT_HUB, OWNER_TOKEN_FILE, folders
from .errors import HubError, Unreachable
from .http import ConnectFailed, Dropped, Http
from .pin import local_pin, pinned_context

__all__ = ["Client", "HubError", "Unreachable", "local_token"]

TIMEOUT_S = 30.0
#: A request whose connection dropped is sent again this many times, with the same Idempotency-Key.
RETRIES = 1
#: The pause before that retry.
RETRY_PAUSE_S = 0.5
IDEMPOTENCY_HEADER = "Idempotency-Key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def local_token(state_dir: Path) -> str | None:
    try:
        return (state_dir / OWNER_TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


#: The hosts that are this machine: a hub there is the local one, whose owner-token file the command reads.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def on_this_machine(host: str) -> bool:
    """localhost, or a loopback address (all of 127.0.0.0/8 and ::1 are this machine)."""
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Client:
    """A hub's address, its token and, with ``pin``, the one certificate it must present
    (``cli.config.resolve`` says which hub, token and pin a command uses)."""

    def __init__(self, hub: str | None = None, token: str | None = None, *, pin: str | None = None):
        self.hub = (hub or DEFAULT_HUB).rstrip("/")
        if "://" not in self.hub:
            self.hub = "http://" + self.hub
        host = urlparse(self.hub).hostname or ""
        self.token = token or (local_token(folders().state) if host in LOOPBACK else None)
        if pin is None and self.hub.startswith("https://") and on_this_machine(host):
            pin = local_pin(folders().state)  # the hub on this machine: the certificate it made for itself
        #: The TLS context of a pinned hub (checked before anything is sent), for HTTP and the live bus.
        self.ssl_context = pinned_context(self.hub, pin) if pin else None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = Http(self.hub, headers, TIMEOUT_S, self.ssl_context)
        self.invocation = uuid.uuid4().hex
        self.writes = 0

    def idempotency_key(self) -> str:
        """A new key for the next write of this invocation."""
        self.writes += 1
        return f"apz-cli-{self.invocation}-{self.writes}"

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request. A connection dropped mid-request (``http.Dropped``) is sent again with the same key;
        a refused connection is not (nothing was sent, and the offline paths wait for no one), nor a
        timeout (the hub may still be working on it)."""
        if method.upper() in WRITE_METHODS:
            kwargs["headers"] = {IDEMPOTENCY_HEADER: self.idempotency_key(), **(kwargs.get("headers") or {})}
        for attempt in range(RETRIES + 1):
            try:
                r = self.http.request(method, path, **kwargs)
                break
            except Dropped as e:
                if attempt == RETRIES:
                    raise Unreachable(f"cannot reach the hub at {self.hub}: {e}") from None
                time.sleep(RETRY_PAUSE_S)
            except ConnectFailed as e:
                raise Unreachable(f"cannot reach the hub at {self.hub}: {e}") from None
        try:
            data = r.json()
        except ValueError:
            data = None
        if r.status_code >= 400:
            err = (data or {}).get("error", {}) if isinstance(data, dict) else {}
            raise HubError(err.get("message") or f"the hub answered {r.status_code}", err.get("code"), r.status_code)
        return data

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: dict | None = None) -> Any:
        return self.request("POST", path, json=body or {})

    def ws_url(self, path: str) -> str:
        return self.hub.replace("https://", "wss://").replace("http://", "ws://") + path
