"""The hub's certificate: made once, 0600, reused (its fingerprint is what owners pin); or the owner's own."""

from __future__ import annotations

import hashlib
import os
import ssl
import stat

import pytest

from agentplaza.api.tls import CERT_FILE, KEY_FILE, hub_certificate, make_certificate


def test_the_hubs_own_certificate_is_made_once_owner_only_and_its_fingerprint_is_the_der_sha256(tmp_path):
    old = os.umask(0o022)
    try:
        first = hub_certificate(tmp_path, ["127.0.0.2", "hub.example.net"])
    finally:
        os.umask(old)
    for name in (CERT_FILE, KEY_FILE):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    der = ssl.PEM_cert_to_DER_cert((tmp_path / CERT_FILE).read_text())
    assert first.own and first.fingerprint == hashlib.sha256(der).hexdigest()
    again = hub_certificate(tmp_path, ["another.name"])
    assert again.fingerprint == first.fingerprint  # the pin owners hold stays good across restarts


def test_the_owners_own_pair_is_used_as_given_and_half_a_pair_is_refused(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    make_certificate(own, ["hub.example.net"])
    state = tmp_path / "state"
    state.mkdir()
    cert = hub_certificate(state, [], str(own / CERT_FILE), str(own / KEY_FILE))
    assert not cert.own and cert.certfile == own / CERT_FILE
    assert not (state / CERT_FILE).exists()  # the hub made none of its own
    with pytest.raises(ValueError):
        hub_certificate(state, [], str(own / CERT_FILE), None)
