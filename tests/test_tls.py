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


def test_bound_to_anything_but_loopback_apid_serves_https_and_on_loopback_when_asked():
    from agentplaza.api.main import hosted

    for host in ("0.0.0.0", "::", "192.168.1.20", "hub.example.net"):
        assert hosted(host, https_flag=False)
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert not hosted(host, https_flag=False) and hosted(host, https_flag=True)


def test_the_certificate_names_the_bound_address_the_owners_names_and_this_machine():
    from agentplaza.api.edge import HubNames
    from agentplaza.api.main import certificate_names

    names = HubNames.make("0.0.0.0", ["hub.lan"], ["https://hub.example.net:7700"])
    assert certificate_names("0.0.0.0", names) == ["hub.example.net", "hub.lan", "localhost", "127.0.0.1"]
    assert certificate_names("10.0.0.5", HubNames.make("10.0.0.5"))[0] == "10.0.0.5"
