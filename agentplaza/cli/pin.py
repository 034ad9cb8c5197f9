"""``--pin``: the SHA-256 fingerprint of the certificate a hub serves itself.

Before anything is sent, the command opens one TLS connection, reads the certificate the hub
presents and compares its SHA-256 with the pin; a mismatch ends the command with nothing sent (no
token, no request). The requests that follow trust that one certificate and nothing else, so a
second connection cannot be answered by another certificate either.
"""

from __future__ import annotations

import hashlib
import re
import socket
import ssl
from urllib.parse import urlparse

from .errors import HubError, Unreachable

#: How long the first handshake, the one that reads the certificate, may take.
HANDSHAKE_TIMEOUT_S = 10.0
#: A SHA-256 fingerprint: 64 hex digits, written with or without colons, after an optional ``sha256:``.
PIN_RE = re.compile(r"[0-9a-f]{64}")
PIN_PREFIXES = ("sha256:", "sha256/", "sha256=")
HTTPS_PORT = 443


def normal_pin(text: str) -> str:
    """The pin as 64 lowercase hex digits; a malformed one is refused ``invalid_pin``."""
    t = text.strip().lower()
    for prefix in PIN_PREFIXES:
        if t.startswith(prefix):
            t = t[len(prefix):]
    t = t.replace(":", "").replace(" ", "")
    if not PIN_RE.fullmatch(t):
        raise HubError("--pin wants the SHA-256 fingerprint of the hub's certificate: 64 hex digits, "
                       "colons allowed", "invalid_pin")
    return t


def with_colons(hex_digest: str) -> str:
    """``AB:CD:...``, as ``openssl x509 -fingerprint -sha256`` prints a fingerprint."""
    return ":".join(hex_digest[i:i + 2] for i in range(0, len(hex_digest), 2)).upper()


def fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def presented_certificate(host: str, port: int) -> bytes:
    """The certificate the server at host:port presents (read, not trusted)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=HANDSHAKE_TIMEOUT_S) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            return tls.getpeercert(binary_form=True)


def pinned_context(url: str, pin: str) -> ssl.SSLContext:
    """A TLS context that trusts only the certificate ``url`` presents, once its fingerprint is ``pin``."""
    want = normal_pin(pin)
    u = urlparse(url)
    if u.scheme != "https" or not u.hostname:
        raise HubError(f"--pin checks the certificate of an https:// hub; {url} is not one", "pin_needs_https")
    try:
        der = presented_certificate(u.hostname, u.port or HTTPS_PORT)
    except (OSError, ssl.SSLError) as e:
        raise Unreachable(f"cannot reach the hub at {url}: {e}") from None
    got = fingerprint(der)
    if got != want:
        raise HubError(f"the hub at {url} presents a certificate whose SHA-256 is {with_colons(got)}, not the "
                       f"pinned {with_colons(want)}; nothing was sent", "pin_mismatch")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # the pin names the certificate itself, whatever names it carries
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # that certificate alone is the anchor
    ctx.load_verify_locations(cadata=ssl.DER_cert_to_PEM_cert(der))
    return ctx


#: The hub's own certificate in its state folder (``api.tls.CERT_FILE``): on the hub's machine the command
#: pins it by itself, as it reads the owner-token file.
LOCAL_CERT_FILE = "hub-cert.pem"


def local_pin(state_dir) -> str | None:
    """The SHA-256 of the certificate the hub on this machine made for itself (None when it has none)."""
    try:
        pem = (state_dir / LOCAL_CERT_FILE).read_text()
        return fingerprint(ssl.PEM_cert_to_DER_cert(pem))
    except (OSError, ValueError):
        return None
