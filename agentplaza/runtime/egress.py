"""The egress proxy: a guest's outbound web traffic, reached over its channel (service ``egress``).

The guest's forwarder sends ``CONNECT host:port HTTP/1.1``. Before the hub dials it checks, in order:
whether egress is on (``apid --egress off`` refuses everything), the port (80 and 443, plus any the
owner adds with ``apid --egress-ports``), the fetch blocklist (the model policy's ``fetch_blocklist``,
read afresh on every CONNECT: ``example.com`` blocks the host and its subdomains, ``*.example.net``
only the subdomains), the laws (``egress.connect`` with
``args.host`` and ``args.port``), and every address the name resolves to (loopback, private,
link-local, unique-local, multicast, unspecified, cloud-metadata and any other non-public address are
refused). It then dials the address it checked (no second lookup), answers ``200`` and splices the
bytes without reading them. An idle tunnel closes after five minutes. Every connection, allowed or
refused, is one ``egress`` entry in the agent's transcript.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable

from vmm.channel import ChannelClosed, Stream, StreamReset

from ..domain.models import blocklist_entry

#: Ports open to agents unless the owner allows more.
DEFAULT_PORTS = frozenset({80, 443})
#: The ports an owner may add (``--egress-ports``).
MIN_PORT, MAX_PORT = 1, 65535
#: apid's environment variables for its egress flags (the flag wins).
EGRESS_ENV, EGRESS_PORTS_ENV = "APZ_EGRESS", "APZ_EGRESS_PORTS"
#: What a guest hears from a hub started with ``--egress off``.
EGRESS_OFF = "egress is switched off on this hub (apid --egress off)"
#: An idle tunnel closes after this many seconds.
IDLE_TUNNEL_S = 300.0
#: The longest URL a web tool takes (the guest's harness holds the same).
MAX_URL = 2048
#: The longest CONNECT request head the proxy reads.
MAX_HEAD = 8192
DIAL_TIMEOUT_S = 10.0
#: Cloud metadata services, refused by name and by address.
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "metadata.azure.internal"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "169.254.169.253"))
HOST_RE = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?")

Resolver = Callable[[str, int], list]


class Refused(Exception):
    def __init__(self, why: str, code: str = "egress_refused"):
        super().__init__(why)
        self.why, self.code = why, code


def check_blocklist_entry(entry: str) -> str:
    """A bare host name, or ``*.`` and one; anything else is refused when the owner saves (the rule
    is the domain's, ``domain.models.blocklist_entry``, so the policy and the proxy agree)."""
    e = blocklist_entry(entry)
    if e is None:
        raise ValueError(f"{entry!r} is not a bare host name (example.com or *.example.net)")
    return e


def blocked_by(host: str, blocklist: Iterable[str]) -> str | None:
    h = host.lower().rstrip(".")
    for entry in blocklist:
        if entry.startswith("*."):
            if h.endswith(entry[1:]):
                return entry
        elif h == entry or h.endswith("." + entry):
            return entry
    return None


def address_refusal(addr: str) -> str | None:
    """Why this address is refused, or None for a public address."""
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv6Address) and ip in ipaddress.ip_network("fc00::/7"):
        return "a unique-local address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "not a public address"
    return None


def system_resolver(host: str, port: int) -> list:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


@dataclasses.dataclass
class EgressPolicy:
    """The hub's egress settings, fixed when it starts (apid's flags). The owner's fetch blocklist is
    not here: the proxy reads it live from the model policy. ``blocklist`` is a fixed one on top."""

    enabled: bool = True
    ports: frozenset = DEFAULT_PORTS
    blocklist: tuple = ()
    #: Lets private and loopback addresses through (never cloud metadata). Off for agents.
    allow_private: bool = False
    #: Exact addresses let through in spite of the address check (never cloud metadata): a test's own
    #: server on this machine. apid has no flag for it: agents' hubs never set it.
    allow_addresses: frozenset = frozenset()
    idle_s: float = IDLE_TUNNEL_S

    def __post_init__(self) -> None:
        self.blocklist = tuple(check_blocklist_entry(e) for e in self.blocklist)

    def view(self) -> dict:
        """The settings in effect, as ``/v1/nodes`` shows them."""
        return {"egress": "on" if self.enabled else "off", "ports": sorted(self.ports)}


def parse_ports(text: str) -> frozenset:
    """``8080,8443``: ports added to 80 and 443. Raises ValueError saying what is wrong."""
    extra = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit() or not MIN_PORT <= int(item) <= MAX_PORT:
            raise ValueError(f"{item!r} is not a port: give port numbers {MIN_PORT} to {MAX_PORT}, "
                             "separated by commas (e.g. 8080,8443)")
        extra.add(int(item))
    return DEFAULT_PORTS | extra


def policy_from_flags(egress: str | None, ports: str | None, environ: dict | None = None) -> EgressPolicy:
    """apid's ``--egress on|off`` and ``--egress-ports``, else ``APZ_EGRESS`` and ``APZ_EGRESS_PORTS``
    (the flag wins). Raises ValueError naming the flag or variable that is wrong."""
    env = environ if environ is not None else {}
    where = "--egress"
    if egress is None:
        egress, where = env.get(EGRESS_ENV) or "on", EGRESS_ENV
    if egress not in ("on", "off"):
        raise ValueError(f"{where} is on or off, not {egress!r}")
    where = "--egress-ports"
    if ports is None:
        ports, where = env.get(EGRESS_PORTS_ENV) or "", EGRESS_PORTS_ENV
    try:
        allowed = parse_ports(ports)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return EgressPolicy(enabled=egress == "on", ports=allowed)


def url_target(url: object) -> tuple[str, int]:
    """The host and port a web tool's URL reaches (http:// or https:// only), or Refused."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise Refused(f"a URL is http:// or https://, at most {MAX_URL} characters", "bad_request")
    try:
        u = urllib.parse.urlsplit(url)
        port = u.port
    except ValueError:
        raise Refused(f"{url[:200]} is not a URL", "bad_request") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise Refused(f"{url[:200]} is not an http:// or https:// URL", "bad_request")
    if u.username or u.password:
        raise Refused("a URL with a user name or password is refused", "bad_request")
    return u.hostname, port or (443 if u.scheme == "https" else 80)


def parse_connect(head: bytes) -> tuple[str, int]:
    try:
        line = head.split(b"\r\n", 1)[0].decode("ascii")
    except UnicodeDecodeError:
        raise Refused("the request is not ASCII", "bad_request") from None
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "CONNECT" or not parts[2].startswith("HTTP/1."):
        raise Refused("the egress proxy takes CONNECT host:port only", "bad_request")
    target = parts[1]
    if target.startswith("["):
        host, _, port = target[1:].partition("]:")
    else:
        host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise Refused(f"bad target {target!r}", "bad_request")
    return host, int(port)


class EgressProxy:
    """``decide(cid, host, port)`` asks the laws (raises Refused); ``record(cid, detail)`` writes the
    transcript entry; ``blocklist()`` is the owner's fetch blocklist now, asked on every CONNECT."""

    def __init__(self, policy: EgressPolicy, decide: Callable[[int, str, int], None],
                 record: Callable[[int, dict], None], resolver: Resolver = system_resolver,
                 blocklist: Callable[[], Iterable[str]] = tuple):
        self.policy = policy
        self.decide = decide
        self.record = record
        self.resolver = resolver
        self.blocklist = blocklist

    def precheck(self, host: str, port: int) -> None:
        """What is refused before any lookup (egress off, the host's form, the port rule, cloud metadata
        names, the fetch blocklist, a literal address that is not public): Refused with the reason. The
        hub asks it when a web tool is decided, so the call is refused before it runs; the CONNECT is
        checked again, in full, by ``check``."""
        p = self.policy
        if not p.enabled:
            raise Refused(EGRESS_OFF)
        h = host.lower().rstrip(".")
        try:
            literal = ipaddress.ip_address(h)
        except ValueError:
            literal = None
        if literal is None and not HOST_RE.fullmatch(h):
            raise Refused(f"bad host name {host!r}", "bad_request")
        if port not in p.ports:
            raise Refused(f"port {port} is not open (only {', '.join(map(str, sorted(p.ports)))})")
        if h in METADATA_HOSTS:
            raise Refused(f"{host} is a cloud metadata service")
        entry = blocked_by(h, p.blocklist) or blocked_by(h, self.blocklist())
        if entry:
            raise Refused(f"{host} is on the fetch blocklist ({entry})")
        if literal is not None:
            self._address_ok(host, str(literal))

    def _address_ok(self, host: str, a: str) -> None:
        p = self.policy
        why = address_refusal(a)
        if why is None:
            return
        if why != "a cloud metadata address" and (p.allow_private or a.split("%", 1)[0] in p.allow_addresses):
            return
        raise Refused(f"{host} resolves to {a}, {why}" if host != a else f"{a} is {why}")

    def check(self, cid: int, host: str, port: int) -> str:
        """The address to dial, or Refused with the reason: ``precheck``, the laws, then every address the
        name resolves to."""
        self.precheck(host, port)
        h = host.lower().rstrip(".")
        try:
            literal = ipaddress.ip_address(h)
        except ValueError:
            literal = None
        self.decide(cid, h, port)
        try:
            addrs = [str(literal)] if literal is not None else self.resolver(h, port)
        except OSError as e:
            raise Refused(f"cannot resolve {host}: {e}", "resolve_failed") from None
        if not addrs:
            raise Refused(f"{host} has no address", "resolve_failed")
        for a in addrs:
            self._address_ok(host, a)
        return addrs[0]

    def handle(self, cid: int, st: Stream) -> None:
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = st.read(MAX_HEAD, timeout=30)
                if not chunk:
                    return
                head += chunk
                if len(head) > MAX_HEAD:
                    raise Refused("the request head is too long", "bad_request")
            head, rest = head.split(b"\r\n\r\n", 1)
            host, port = parse_connect(head)
        except Refused as r:
            self.record(cid, {"verdict": "refused", "why": r.why, "host": None, "port": None})
            _answer(st, 400, r.why)
            return
        except (ChannelClosed, StreamReset, TimeoutError):
            return
        try:
            addr = self.check(cid, host, port)
            sock = socket.create_connection((addr, port), timeout=DIAL_TIMEOUT_S)
        except Refused as r:
            self.record(cid, {"verdict": "refused", "why": r.why, "host": host, "port": port})
            _answer(st, 403, r.why)
            return
        except OSError as e:
            self.record(cid, {"verdict": "failed", "why": str(e), "host": host, "port": port})
            _answer(st, 502, f"cannot reach {host}:{port}: {e}")
            return
        self.record(cid, {"verdict": "allowed", "why": None, "host": host, "port": port, "address": addr})
        try:
            st.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                sock.sendall(rest)
        except (ChannelClosed, StreamReset, OSError):
            sock.close()
            return
        Tunnel(st, sock, self.policy.idle_s).run()


def _answer(st: Stream, status: int, why: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (why + "\n").encode()
    try:
        st.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        st.close()
    except (ChannelClosed, StreamReset):
        pass


class Tunnel:
    """Bytes both ways, unread; closed when both sides are done or nothing moved for ``idle_s``."""

    def __init__(self, st: Stream, sock: socket.socket, idle_s: float):
        self.st, self.sock, self.idle_s = st, sock, idle_s
        self.last = time.monotonic()
        self.done = threading.Event()
        self.closed_idle = False

    def run(self) -> None:
        up = threading.Thread(target=self._guest_to_net, daemon=True)
        down = threading.Thread(target=self._net_to_guest, daemon=True)
        up.start()
        down.start()
        while not self.done.wait(min(1.0, self.idle_s / 4)):
            if time.monotonic() - self.last > self.idle_s:
                self.closed_idle = True
                break
            if not up.is_alive() and not down.is_alive():
                break
        self._close()

    def _close(self) -> None:
        self.done.set()
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.st.reset("idle tunnel closed" if self.closed_idle else "closed")
        except Exception:
            pass

    def _guest_to_net(self) -> None:
        try:
            while not self.done.is_set():
                try:
                    data = self.st.read(65536, timeout=1.0)
                except TimeoutError:
                    continue
                if not data:
                    self.sock.shutdown(socket.SHUT_WR)
                    return
                self.last = time.monotonic()
                self.sock.sendall(data)
        except (ChannelClosed, StreamReset, OSError):
            self.done.set()

    def _net_to_guest(self) -> None:
        self.sock.settimeout(1.0)
        try:
            while not self.done.is_set():
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    self.st.close()
                    self.done.set()
                    return
                self.last = time.monotonic()
                self.st.write(data)
        except (ChannelClosed, StreamReset, OSError):
            self.done.set()
