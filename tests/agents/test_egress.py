"""The egress proxy's refusals and its tunnel, over a real channel on a socketpair. Only addresses on
this machine (127.0.0.1) are dialled; every refusal is decided before any packet is sent."""

from __future__ import annotations

import socket

import pytest
from support.echo import echo_server

from agentplaza.runtime.egress import (
    EgressPolicy,
    EgressProxy,
    Refused,
    address_refusal,
    blocked_by,
    check_blocklist_entry,
    parse_connect,
)
from vmm.channel import Channel


@pytest.mark.parametrize("addr,why", [
    ("127.0.0.1", "a loopback address"), ("::1", "a loopback address"), ("10.1.2.3", "a private address"),
    ("172.16.0.1", "a private address"), ("192.168.1.1", "a private address"),
    ("169.254.169.254", "a cloud metadata address"), ("fd00:ec2::254", "a cloud metadata address"),
    ("169.254.1.1", "a link-local address"), ("fe80::1", "a link-local address"),
    ("fd12:3456::1", "a unique-local address"), ("224.0.0.1", "a multicast address"), ("ff02::1", "a multicast address"),
    ("0.0.0.0", "an unspecified address"), ("::", "an unspecified address"), ("::ffff:10.0.0.1", "a private address"),
    ("100.64.0.1", "not a public address"), ("100.100.100.200", "a cloud metadata address"),
    ("93.184.215.14", None), ("2606:4700::1111", None),
])
def test_address_classes(addr, why):
    assert address_refusal(addr) == why


def test_blocklist_host_and_subdomains_or_subdomains_only():
    rules = (check_blocklist_entry("example.com"), check_blocklist_entry("*.example.net"))
    assert blocked_by("example.com", rules) == "example.com"
    assert blocked_by("api.example.com", rules) == "example.com"
    assert blocked_by("notexample.com", rules) is None
    assert blocked_by("example.net", rules) is None
    assert blocked_by("a.b.example.net", rules) == "*.example.net"
    for bad in ("http://example.com", "example.com/x", "*example.com", "exa mple.com", ""):
        with pytest.raises(ValueError):
            check_blocklist_entry(bad)


def test_parse_connect():
    assert parse_connect(b"CONNECT example.org:443 HTTP/1.1\r\nHost: x") == ("example.org", 443)
    assert parse_connect(b"CONNECT [2606:4700::1111]:80 HTTP/1.1") == ("2606:4700::1111", 80)
    for bad in (b"GET http://example.org/ HTTP/1.1", b"CONNECT example.org HTTP/1.1", b"CONNECT a:99999 HTTP/1.1"):
        with pytest.raises(Refused):
            parse_connect(bad)


class Rig:
    """A guest end and a hub end of one channel; the hub end serves the egress proxy."""

    def __init__(self, policy: EgressPolicy, resolver=None, law=None):
        a, b = socket.socketpair()
        self.records: list = []
        self.decided: list = []

        def decide(cid, host, port):
            self.decided.append((host, port))
            if law:
                law(host, port)

        kw = {"resolver": resolver} if resolver else {}
        self.proxy = EgressProxy(policy, decide, lambda cid, d: self.records.append(d), **kw)
        self.hub = Channel.over_socket(a, role="host", on_open=lambda st: self.proxy.handle(7, st)).start()
        self.guest = Channel.over_socket(b, role="guest").start()

    def connect(self, target: str) -> tuple[bytes, object]:
        st = self.guest.open("egress")
        st.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = st.read(timeout=10)
            if not chunk:
                break
            head += chunk
        return head, st

    def close(self):
        self.guest.close()
        self.hub.close()


def never(host, port):  # a resolver that must not be asked
    raise AssertionError(f"resolved {host}")


@pytest.mark.parametrize("target,why", [
    ("127.0.0.1:443", "a loopback address"), ("10.0.0.8:443", "a private address"),
    ("169.254.169.254:80", "a cloud metadata address"), ("[::1]:443", "a loopback address"),
    ("[fd00::1]:443", "a unique-local address"), ("224.0.0.5:80", "a multicast address"),
    ("0.0.0.0:80", "an unspecified address"), ("metadata.google.internal:80", "cloud metadata service"),
    ("example.com:22", "port 22 is not open"), ("api.example.com:443", "on the fetch blocklist"),
])
def test_refusals_answer_403_and_are_recorded(target, why):
    rig = Rig(EgressPolicy(blocklist=("example.com",)), resolver=lambda h, p: ["127.0.0.1"])
    try:
        head, _ = rig.connect(target)
        assert head.startswith(b"HTTP/1.1 403"), head
        assert why in head.decode()
        assert rig.records[-1]["verdict"] == "refused" and why in rig.records[-1]["why"]
    finally:
        rig.close()


def test_a_name_that_resolves_to_loopback_is_refused_after_the_laws():
    rig = Rig(EgressPolicy(), resolver=lambda h, p: ["93.184.215.14", "127.0.0.1"])
    try:
        head, _ = rig.connect("sneaky.example.org:443")
        assert head.startswith(b"HTTP/1.1 403") and b"resolves to 127.0.0.1" in head
        assert rig.decided == [("sneaky.example.org", 443)]
    finally:
        rig.close()


def test_the_laws_refuse_before_any_lookup():
    def law(host, port):
        raise Refused("the laws refuse egress.connect (forbidden, C-003)")

    rig = Rig(EgressPolicy(), resolver=never, law=law)
    try:
        head, _ = rig.connect("example.org:443")
        assert head.startswith(b"HTTP/1.1 403") and b"C-003" in head
    finally:
        rig.close()


def test_not_connect_is_a_bad_request():
    rig = Rig(EgressPolicy(), resolver=never)
    try:
        st = rig.guest.open("egress")
        st.write(b"GET http://example.org/ HTTP/1.1\r\n\r\n")
        assert st.read(timeout=10).startswith(b"HTTP/1.1 400")
        assert rig.records[-1]["verdict"] == "refused"
    finally:
        rig.close()


def test_an_allowed_tunnel_carries_bytes_and_an_idle_one_closes():
    srv = echo_server()
    port = srv.getsockname()[1]
    # allow_private lets the test dial 127.0.0.1 (the only address tests reach); agents never get it
    rig = Rig(EgressPolicy(ports=frozenset({port}), allow_private=True, idle_s=0.5))
    try:
        head, st = rig.connect(f"127.0.0.1:{port}")
        assert head.startswith(b"HTTP/1.1 200"), head
        st.write(b"hello through the plaza")
        assert st.read(timeout=10) == b"HELLO THROUGH THE PLAZA"
        assert rig.records[-1] == {"verdict": "allowed", "why": None, "host": "127.0.0.1", "port": port,
                                   "address": "127.0.0.1"}
        assert st.wait_closed(timeout=30)  # nothing moves: the tunnel is closed as idle
    finally:
        rig.close()
        srv.close()


def test_metadata_stays_refused_even_with_allow_private():
    rig = Rig(EgressPolicy(allow_private=True), resolver=lambda h, p: ["169.254.169.254"])
    try:
        head, _ = rig.connect("imds.example.org:80")
        assert head.startswith(b"HTTP/1.1 403") and b"metadata" in head
    finally:
        rig.close()
