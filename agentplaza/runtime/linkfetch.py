"""The hub fetching a plain link for its preview card (``agentplaza unfurl URL``), safely.

A hub that fetches any URL it is handed is a door into the network it sits on (SSRF). So a preview
fetch obeys the same host rules as an agent's fetch (``runtime/egress.py``): the web ports only
(80 and 443, plus ``APZ_PREVIEW_PORTS``), the owner's fetch blocklist, never a cloud metadata
service, and every address the name resolves to must be public (loopback, private, link-local,
unique-local ... are refused) unless ``APZ_PREVIEW_PRIVATE=on`` lets a hub on a private network
preview its own pages (never metadata). The address checked is the address dialled (no second
lookup, so a name cannot be re-pointed between the check and the connection). Each redirect is
checked again, http and https only, at most ``MAX_REDIRECTS``. The page is read for at most
``FETCH_TIMEOUT_S`` in all and ``MAX_PAGE_BYTES``; only its title and description are kept. No
cookie, no credential and nothing of the caller's request goes with it.
"""

from __future__ import annotations

import html
import ipaddress
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx

from .egress import DEFAULT_PORTS, HOST_RE, METADATA_HOSTS, address_refusal, blocked_by, parse_ports, system_resolver

#: The whole fetch, redirects included, takes at most this long.
FETCH_TIMEOUT_S = 5.0
#: The most bytes of a page read (its head is enough for a title).
MAX_PAGE_BYTES = 256 * 1024
#: Redirects followed, each checked as the first address was.
MAX_REDIRECTS = 3
SCHEMES = ("http", "https")
#: The longest title and excerpt a card keeps.
MAX_TITLE_CHARS = 300
MAX_EXCERPT_CHARS = 500
#: The environment variables that widen the rules for a hub on a private network.
PRIVATE_ENV, PORTS_ENV = "APZ_PREVIEW_PRIVATE", "APZ_PREVIEW_PORTS"
USER_AGENT = "AgentPlaza-preview/1"

Resolver = Callable[[str, int], list]


@dataclass(frozen=True)
class Rules:
    ports: frozenset = DEFAULT_PORTS
    allow_private: bool = False

    @classmethod
    def from_env(cls, environ: dict | None = None) -> Rules:
        env = os.environ if environ is None else environ
        try:
            ports = parse_ports(env.get(PORTS_ENV) or "")
        except ValueError:
            ports = DEFAULT_PORTS
        return cls(ports, (env.get(PRIVATE_ENV) or "").lower() in ("1", "on", "yes", "true"))


@dataclass
class Page:
    reachable: bool
    url: str
    title: str | None = None
    excerpt: str | None = None
    status: int | None = None
    why: str | None = None  # why it was not reachable


class NotReachable(Exception):
    pass


class _Head(HTMLParser):
    """The page's <title>, and its og:title / og:description / description."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: str | None = None
        self.meta: dict[str, str] = {}
        self._in_title = False
        self._buf: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k.lower(): (v or "") for k, v in attrs}
        if tag == "title" and self.title is None:
            self._in_title = True
        elif tag == "meta":
            name = (a.get("property") or a.get("name") or "").lower()
            if name in ("og:title", "og:description", "description") and name not in self.meta:
                self.meta[name] = a.get("content", "")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._buf.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title = False
            self.title = "".join(self._buf)


def _short(text: str | None, limit: int) -> str | None:
    if not text:
        return None
    t = " ".join(html.unescape(text).split())
    return (t if len(t) <= limit else t[: limit - 1] + "…") or None


def read_head(body: bytes, charset: str | None) -> tuple[str | None, str | None]:
    """The title and the excerpt of a page's first bytes."""
    p = _Head()
    try:
        p.feed(body.decode(charset or "utf-8", "replace"))
    except (LookupError, ValueError):
        p.feed(body.decode("utf-8", "replace"))
    title = p.meta.get("og:title") or p.title
    return _short(title, MAX_TITLE_CHARS), _short(p.meta.get("og:description") or p.meta.get("description"),
                                                  MAX_EXCERPT_CHARS)


def check(url: str, rules: Rules, blocklist: Iterable[str], resolver: Resolver = system_resolver) -> tuple[str, int, str]:
    """The scheme, port and address to dial for ``url``; ``NotReachable`` says why not."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise NotReachable(f"only http and https links are fetched, not {parts.scheme or 'no scheme'}")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise NotReachable("the link names no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise NotReachable("the link's port is not a number") from None
    if parts.username or parts.password:
        raise NotReachable("a link with a user name or password in it is not fetched")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is None and not HOST_RE.fullmatch(host):
        raise NotReachable(f"{host!r} is not a host name")
    if port not in rules.ports:
        raise NotReachable(f"port {port} is not a web port (only {', '.join(map(str, sorted(rules.ports)))})")
    if host.lower() in METADATA_HOSTS:
        raise NotReachable(f"{host} is a cloud metadata service")
    entry = blocked_by(host, blocklist)
    if entry:
        raise NotReachable(f"{host} is on the fetch blocklist ({entry})")
    try:
        addrs = [str(literal)] if literal is not None else resolver(host, port)
    except OSError as e:
        raise NotReachable(f"cannot resolve {host}: {e}") from None
    if not addrs:
        raise NotReachable(f"{host} has no address")
    for a in addrs:
        why = address_refusal(a)
        if why and not (rules.allow_private and why != "a cloud metadata address"):
            raise NotReachable(f"{host} resolves to {a}, {why}")
    return parts.scheme, port, addrs[0]


def _dial_url(url: str, address: str, port: int) -> str:
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    path = parts.path or "/"
    return f"{parts.scheme}://{host}:{port}{path}" + (f"?{parts.query}" if parts.query else "")


def fetch(url: str, rules: Rules, blocklist: Iterable[str] = (), resolver: Resolver = system_resolver,
          transport: httpx.BaseTransport | None = None) -> Page:
    """The page at ``url``: its title and excerpt, or why it is not reachable. Never raises for the page's sake."""
    blocklist = tuple(blocklist)
    deadline = time.monotonic() + FETCH_TIMEOUT_S
    current = url
    try:
        with httpx.Client(follow_redirects=False, trust_env=False, transport=transport) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                _scheme, port, address = check(current, rules, blocklist, resolver)
                host = urlsplit(current).hostname or ""
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NotReachable(f"no answer within {FETCH_TIMEOUT_S:g} s")
                netloc = urlsplit(current).netloc.rsplit("@", 1)[-1]
                req = client.build_request("GET", _dial_url(current, address, port),
                                           headers={"Host": netloc, "User-Agent": USER_AGENT,
                                                    "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"},
                                           timeout=httpx.Timeout(left), extensions={"sni_hostname": host})
                r = client.send(req, stream=True)
                try:
                    if r.is_redirect:
                        target = r.headers.get("location") or ""
                        if not target:
                            raise NotReachable(f"the page redirects ({r.status_code}) to nowhere")
                        current = urljoin(current, target)
                        continue
                    if r.status_code >= 400:
                        return Page(False, current, status=r.status_code, why=f"the page answered {r.status_code}")
                    body = b""
                    for chunk in r.iter_bytes():
                        body += chunk
                        if len(body) >= MAX_PAGE_BYTES or time.monotonic() > deadline:
                            break
                    body = body[:MAX_PAGE_BYTES]
                    ctype = r.headers.get("content-type", "")
                    if "html" not in ctype.lower():
                        return Page(True, current, status=r.status_code, excerpt=_short(ctype, MAX_EXCERPT_CHARS))
                    title, excerpt = read_head(body, r.charset_encoding)
                    return Page(True, current, title, excerpt, r.status_code)
                finally:
                    r.close()
            raise NotReachable(f"more than {MAX_REDIRECTS} redirects")
    except NotReachable as e:
        return Page(False, current, why=str(e))
    except httpx.HTTPError as e:
        return Page(False, current, why=f"not reachable: {type(e).__name__}")
