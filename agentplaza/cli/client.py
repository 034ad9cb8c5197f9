"""The command line's only way to the hub: HTTP with httpx (and the live bus over WebSocket)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

from ..config import DEFAULT_HUB, OWNER_TOKEN_FILE, folders

TIMEOUT_S = 30.0


class HubError(Exception):
    def __init__(self, message: str, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


class Unreachable(HubError):
    pass


def local_token(state_dir: Path) -> str | None:
    try:
        return (state_dir / OWNER_TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


class Client:
    def __init__(self, hub: str | None = None, token: str | None = None):
        self.hub = (hub or os.environ.get("APZ_HUB") or DEFAULT_HUB).rstrip("/")
        if "://" not in self.hub:
            self.hub = "http://" + self.hub
        host = urlparse(self.hub).hostname or ""
        self.token = token or os.environ.get("APZ_TOKEN") or (
            local_token(folders().state) if host in ("127.0.0.1", "localhost", "::1") else None
        )
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = httpx.Client(base_url=self.hub, headers=headers, timeout=TIMEOUT_S)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            r = self.http.request(method, path, **kwargs)
        except httpx.TransportError as e:
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
