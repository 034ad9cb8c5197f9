"""The hub's certificate: its own, made on the first start, or the owner's.

The guide, "Owner access": "Off loopback ... The hub serves HTTPS with its own self-signed
certificate."  On the first hosted start apid makes an ECDSA P-256 key and a self-signed certificate
for the names it is reached at, kept in the state folder (``CERT_FILE``, ``KEY_FILE``, 0600), and uses
them from then on, so its fingerprint stays the one owners pinned.  ``apid --tls-cert --tls-key`` gives
the owner's own pair instead.  Either way apid prints the certificate's SHA-256, the value the command
line's ``--pin`` checks (``cli.pin``: the SHA-256 of the certificate's DER bytes).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ..permissions import write_private_bytes

CERT_FILE = "hub-cert.pem"
KEY_FILE = "hub-key.pem"
#: The hub's own certificate is valid this long: a pinned certificate is renewed by hand (a new pin).
CERT_DAYS = 3650
#: A little before now, so a machine whose clock is behind still accepts it.
BACKDATE = dt.timedelta(hours=1)
COMMON_NAME = "agentplaza hub"


@dataclass(frozen=True)
class Certificate:
    certfile: Path
    keyfile: Path
    fingerprint: str  # SHA-256 of the DER certificate, 64 lowercase hex digits
    own: bool  # made by the hub itself (else the owner's)


def fingerprint_of(cert_pem: bytes) -> str:
    cert = x509.load_pem_x509_certificate(cert_pem)
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def with_colons(hex_digest: str) -> str:
    return ":".join(hex_digest[i:i + 2] for i in range(0, len(hex_digest), 2)).upper()


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for n in dict.fromkeys(n.strip("[]").lower() for n in names if n):
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            entries.append(x509.DNSName(n))
    return x509.SubjectAlternativeName(entries)


def make_certificate(state_dir: Path, names: list[str], now: dt.datetime | None = None) -> None:
    """A new ECDSA P-256 key and a self-signed certificate for ``names``, written 0600."""
    now = now or dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, COMMON_NAME)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + dt.timedelta(days=CERT_DAYS))
            .add_extension(_san(names or ["localhost"]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    write_private_bytes(state_dir / KEY_FILE, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    write_private_bytes(state_dir / CERT_FILE, cert.public_bytes(serialization.Encoding.PEM))


def hub_certificate(state_dir: Path, names: list[str], own_cert: str | None = None,
                    own_key: str | None = None) -> Certificate:
    """The owner's pair when given (both, or neither), else the hub's own, made now if missing."""
    if bool(own_cert) != bool(own_key):
        raise ValueError("--tls-cert and --tls-key go together")
    if own_cert and own_key:
        cert, key = Path(own_cert).resolve(), Path(own_key).resolve()
        return Certificate(cert, key, fingerprint_of(cert.read_bytes()), own=False)
    cert, key = state_dir / CERT_FILE, state_dir / KEY_FILE
    if not (cert.exists() and key.exists()):
        make_certificate(state_dir, names)
    return Certificate(cert, key, fingerprint_of(cert.read_bytes()), own=True)
