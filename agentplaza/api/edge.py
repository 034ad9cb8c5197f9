"""The hub's front door: every request and WebSocket upgrade passes here before any route runs.

A browser is a hostile client.  A page on any web site, opened in the owner's browser on the hub's
machine, can make the browser send requests to 127.0.0.1 without asking anyone; loopback trust
would let them through.  So, before authentication and before any route:

1. **Only the hub's own names.**  The ``Host`` must be one of the hub's own: an IP address it can
   be reached at (loopback, or the address it binds), ``localhost``, or a name the owner configured
   (``apid --public-url`` / ``--allow-host``).  A DNS-rebinding page arrives with its own name in
   ``Host`` and is refused 421.
2. **Only the hub's own pages.**  A request carrying an ``Origin`` that is not the hub's own origin
   (the origin of the very ``Host`` it was sent to, or one the owner configured), or a
   ``Sec-Fetch-Site`` other than ``same-origin``/``none``, is refused 403, for every method and for
   the WebSocket upgrade (answered with the HTTP status itself).  No CORS header is ever sent, so no other
   origin can read an answer; the one exception is ``/mcp``, whose door names in CORS an origin the owner
   added for MCP (and only that one, never ``*``).
3. **No simple requests.**  A request that changes something (``POST``, ``PUT``, ``PATCH``, and a
   ``DELETE`` with a body) must be ``Content-Type: application/json``, else 415.  A browser cannot
   send that type cross-site without a preflight, and the preflight is refused by rule 2.

Every answer also carries ``X-Content-Type-Options: nosniff``, ``Cache-Control: no-store``,
``Referrer-Policy: no-referrer``, and a Content-Security-Policy that forbids framing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..wire import MCP_PATH
from .errors import DRAIN_LIMIT_BYTES, error_response

#: Names a hub always answers to, besides IP addresses it can be reached at.
ALWAYS_NAMES = frozenset({"localhost"})
#: Methods that can change something; they must carry a JSON body type.
CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: The one body type the hub reads.
JSON_TYPE = "application/json"
#: git's smart HTTP requests (routes/git.py) are not JSON; a browser cannot send these types across sites
#: without a CORS preflight, which the hub never grants.
GIT_PATH = "/git/"
GIT_RPC_TYPES = frozenset({"application/x-git-upload-pack-request", "application/x-git-receive-pack-request"})
#: The E2B SDK's uploads of a COPY step's files (``runtime/e2bfiles.py``).
E2B_UPLOAD_PATH = re.compile(r"/e2b/templates/[A-Za-z0-9_-]{1,64}/files/[0-9a-f]{64}")
#: Sec-Fetch-Site values a browser sends for the hub's own pages, or for an address typed by the owner.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})
#: Default ports, so "http://localhost" and "http://localhost:80" are one origin.
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}

#: Headers on every answer.  The CSP forbids everything to a JSON answer; the console's pages, when
#: they exist, get their own strict policy, but never a frame.
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)
API_CSP = b"default-src 'none'; frame-ancestors 'none'"
NO_STORE = b"no-store"


def _split_host(host: str) -> tuple[str, int | None]:
    """'Example.COM:7700' -> ('example.com', 7700); '[::1]:7700' -> ('::1', 7700)."""
    host = host.strip().lower()
    port: int | None = None
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return "", None
        name, rest = host[1:end], host[end + 1:]
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        elif rest:
            return "", None
        return name, port
    if host.count(":") == 1:
        name, _, p = host.partition(":")
        if not p.isdigit():
            return "", None
        return name, int(p)
    return host, None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True)
class HubNames:
    """The names and origins that are the hub's own.

    ``bound`` is the address apid listens on (None: loopback only, as in tests).  A wildcard bind
    (0.0.0.0, ::) makes every IP address of the machine the hub's own: a ``Host`` that is an IP
    literal cannot be a rebinding name, since the browser connected to that very address.
    """

    bound: str | None = None
    names: frozenset[str] = field(default_factory=frozenset)
    origins: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def make(cls, bound: str | None = None, names: Iterable[str] = (), public_urls: Iterable[str] = ()) -> HubNames:
        all_names = {n.strip().lower().strip("[]") for n in names if n.strip()}
        origins = set()
        for url in public_urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"a public URL is http(s)://HOST[:PORT], not {url!r}")
            all_names.add(parts.hostname.lower())
            origins.add(_origin_key(parts.scheme, parts.hostname, parts.port))
        return cls(bound.strip("[]").lower() if bound else None, frozenset(all_names), frozenset(origins))

    def host_ok(self, host: str) -> bool:
        name, _ = _split_host(host)
        if not name:
            return False
        if name in ALWAYS_NAMES or name in self.names:
            return True
        ip = _ip(name)
        if ip is None:
            return False
        if ip.is_loopback:
            return True
        bound = _ip(self.bound) if self.bound else None
        return bound is not None and (bound.is_unspecified or bound == ip)

    def origin_ok(self, origin: str, host: str, scheme: str) -> bool:
        """Same origin as the Host the request was sent to, or one the owner configured."""
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False  # "null", file:, extensions ... are nobody's own origin
        try:
            key = _origin_key(parts.scheme, parts.hostname, parts.port)
        except ValueError:
            return False
        if key in self.origins:
            return True
        name, port = _split_host(host)
        page_scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
        return self.host_ok(host) and key == _origin_key(page_scheme, name, port)


def _origin_key(scheme: str, host: str, port: int | None) -> str:
    scheme = scheme.lower()
    return f"{scheme}://{host.lower().strip('[]')}:{port or DEFAULT_PORTS.get(scheme, 0)}"


class Edge:
    """ASGI middleware, outermost: the three checks above, then the security headers."""

    def __init__(self, app: ASGIApp, names: HubNames):
        self.app, self.names = app, names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = edge_headers(scope)
        refusal = self.refusal(scope, headers)
        if refusal is not None:
            status, code, message = refusal
            response = error_response(status, code, message)
            if scope["type"] == "websocket":
                if "websocket.http.response" in (scope.get("extensions") or {}):
                    # The upgrade is answered with this HTTP status (Starlette sends it as the denial response).
                    await response(scope, receive, with_security_headers(send, prefix="websocket."))
                else:
                    await send({"type": "websocket.close", "code": 4000 + status, "reason": message[:120]})
                return
            await _drain(receive)
            await response(scope, receive, with_security_headers(send))
            return
        keep_cors = scope.get("path") == MCP_PATH  # the MCP door's own CORS, for origins the owner added alone
        await self.app(scope, receive, with_security_headers(send, keep_cors=keep_cors) if scope["type"] == "http" else send)

    def refusal(self, scope: Scope, headers: dict[bytes, list[bytes]]) -> tuple[int, str, str] | None:
        host = _one(headers, b"host")
        if host is None or not self.names.host_ok(host):
            return 421, "wrong_host", (f"this hub does not answer to the name {host!r}; use its own address "
                                       "(or add the name with apid --allow-host)")
        origin = _one(headers, b"origin")
        # /mcp applies the same rule itself, with the origins the owner added for MCP (api/mcp_door.py).
        if origin is not None and scope.get("path") != MCP_PATH and not self.names.origin_ok(
                origin, host, scope.get("scheme", "http")):
            return 403, "foreign_origin", f"requests from other web pages are refused (Origin {origin[:200]!r})"
        site = _one(headers, b"sec-fetch-site")
        if site is not None and site.lower() not in OWN_FETCH_SITES and origin is None:
            return 403, "foreign_origin", f"requests from other web pages are refused (Sec-Fetch-Site {site[:40]!r})"
        if scope["type"] == "http" and _changes_something(scope, headers):
            ctype = (_one(headers, b"content-type") or "").split(";", 1)[0].strip().lower()
            if ctype != JSON_TYPE and not (scope.get("path", "").startswith(GIT_PATH) and ctype in GIT_RPC_TYPES) \
                    and not _e2b_upload(scope):
                return 415, "json_only", f"a request that changes something must be Content-Type: {JSON_TYPE}"
        return None


async def _drain(receive: Receive) -> None:
    """Read and drop a refused request's body (up to DRAIN_LIMIT_BYTES), so the client sees the answer
    instead of a connection cut mid-send."""
    size = 0
    while size <= DRAIN_LIMIT_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _e2b_upload(scope: Scope) -> bool:
    """The E2B SDK's upload of a COPY step's archive: a ``PUT`` (never a simple request, so a browser
    must preflight it, and rule 2 refuses the preflight) to a link with a capability of the hub's
    (``runtime/e2bfiles.py``), with whatever type the SDK gives it."""
    return scope.get("method") == "PUT" and bool(E2B_UPLOAD_PATH.fullmatch(scope.get("path", "")))


def _changes_something(scope: Scope, headers: dict[bytes, list[bytes]]) -> bool:
    method = scope.get("method", "GET").upper()
    if method in CHANGING_METHODS:
        return True
    if method == "DELETE":  # a bodiless DELETE cannot be sent cross-site without a preflight anyway
        length = _one(headers, b"content-length")
        return bool(_one(headers, b"transfer-encoding")) or (length is not None and length.strip() not in ("", "0"))
    return False


def edge_headers(scope: Scope) -> dict[bytes, list[bytes]]:
    """The request's headers by lowercase name, each name's values in order (for ``Edge.refusal``)."""
    out: dict[bytes, list[bytes]] = {}
    for k, v in scope.get("headers") or []:
        out.setdefault(k.lower(), []).append(v)
    return out


def _one(headers: dict[bytes, list[bytes]], name: bytes) -> str | None:
    """A header that must appear at most once: repeated is as bad as wrong, so it reads as ''."""
    values = headers.get(name)
    if not values:
        return None
    if len(values) > 1:
        return ""
    return values[0].decode("latin-1")


def with_security_headers(send: Send, prefix: str = "", keep_cors: bool = False) -> Send:
    """``send`` with the edge's headers added to the answer's start (and any CORS header dropped)."""
    async def sending(message: Message) -> None:
        if message["type"] == prefix + "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", [])
                       if keep_cors or not k.lower().startswith(b"access-control-")]
            have = {k.lower() for k, _ in headers}
            headers.extend(h for h in SECURITY_HEADERS if h[0] not in have)
            if b"cache-control" not in have:
                headers.append((b"cache-control", NO_STORE))
            if b"content-security-policy" not in have:
                headers.append((b"content-security-policy", API_CSP))
            message = {**message, "headers": headers}
        await send(message)

    return sending
