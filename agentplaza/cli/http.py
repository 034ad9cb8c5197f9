"""The command line's HTTP: one keep-alive HTTP/1.1 connection to one hub, on the standard library.

A command's whole cost is its start, so the client is the standard library's ``http.client``
(already part of every Python) rather than a library that loads its own async machinery at import.
JSON in, JSON out; an ``https://`` hub is verified as usual, or against the one pinned certificate
(``cli.pin``). Proxy variables are not read: the hub is reached directly.
"""

from __future__ import annotations

import http.client
import json as jsonlib
import ssl
from typing import Any
from urllib.parse import urlencode, urlparse


class ConnectFailed(Exception):
    """No connection was made: nothing was sent."""


class Dropped(Exception):
    """The connection broke after the request began: it may have arrived."""


#: What a connection breaking mid-request raises (a keep-alive connection the hub closed meanwhile too).
BROKEN = (http.client.RemoteDisconnected, http.client.IncompleteRead, http.client.BadStatusLine,
          ConnectionResetError, ConnectionAbortedError, BrokenPipeError)


class Response:
    def __init__(self, status_code: int, content: bytes):
        self.status_code, self.content = status_code, content

    def json(self) -> Any:
        return jsonlib.loads(self.content)


class Http:
    def __init__(self, base_url: str, headers: dict[str, str], timeout: float,
                 ssl_context: ssl.SSLContext | None = None):
        u = urlparse(base_url)
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname or "", u.port
        self.prefix = u.path.rstrip("/")
        self.headers, self.timeout, self.ssl_context = headers, timeout, ssl_context
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self.https:
                ctx = self.ssl_context or ssl.create_default_context()
                self._conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=ctx)
            else:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        if self._conn.sock is None:
            try:
                self._conn.connect()
            except (OSError, ssl.SSLError) as e:
                self.close()
                raise ConnectFailed(str(e)) from None
        return self._conn

    def request(self, method: str, path: str, params: dict | None = None, json: Any = None,
                headers: dict[str, str] | None = None) -> Response:
        target = self.prefix + path + (("?" + urlencode(params, doseq=True)) if params else "")
        body = None if json is None else jsonlib.dumps(json).encode()
        sent = {"Accept": "application/json", **self.headers, **(headers or {})}
        if body is not None:
            sent["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.request(method, target, body=body, headers=sent)
            r = conn.getresponse()
            content = r.read()
        except BROKEN as e:
            self.close()
            raise Dropped(str(e) or type(e).__name__) from None
        except (TimeoutError, OSError) as e:  # a timeout or a network error: the hub may be at it still
            self.close()
            raise ConnectFailed(str(e) or type(e).__name__) from None
        if r.will_close:
            self.close()
        return Response(r.status, content)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
