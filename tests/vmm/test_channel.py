import contextlib
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as hs
from support.checked_thread import started
from support.deadline import until

from vmm import channel as ch


def pair():
    a, b = socket.socketpair()
    host = ch.Channel.over_socket(a, role="host")
    guest = ch.Channel.over_socket(b, role="guest")
    return host, guest


def test_frame_roundtrip_and_split_feeding():
    frames = [(ch.OPEN, 2, b'{"service":"x"}'), (ch.DATA, 2, b"hello"), (ch.CLOSE, 2, b"")]
    blob = b"".join(ch.encode(*f) for f in frames)
    dec = ch.FrameDecoder()
    got = []
    for i in range(len(blob)):          # one byte at a time
        got += dec.feed(blob[i:i + 1])
    assert got == frames


def test_decoder_rejects_garbage():
    with pytest.raises(ch.ProtocolError):
        ch.FrameDecoder().feed(bytes([99]) + bytes(11))
    with pytest.raises(ch.ProtocolError):
        ch.FrameDecoder().feed(ch.HEADER.pack(ch.DATA, 0, 0, 2, ch.MAX_PAYLOAD + 1))


def test_hello_and_several_streams_both_ways():
    host, guest = pair()
    host.start(), guest.start()
    assert host.wait_ready(2)["role"] == "guest"
    assert guest.wait_ready(2)["role"] == "host"
    streams = [host.open("echo", n=i) for i in range(5)]
    accepted = [guest.accept(2) for _ in range(5)]
    assert sorted(s.meta["n"] for s in accepted) == list(range(5))
    assert all(s.id % 2 == 0 for s in accepted)
    for s in streams:
        s.write(f"to-guest-{s.id}".encode())
        s.close()
    for s in accepted:
        assert s.read_all(2) == f"to-guest-{s.id}".encode()
        s.write(b"back")
        s.close({"exit": 0})
    for s in streams:
        assert s.read_all(2) == b"back"
        assert s.close_info == {"exit": 0}
    # guest-initiated stream gets an odd id
    g = guest.open("gateway")
    h = host.accept(2)
    assert g.id % 2 == 1 and h.meta["service"] == "gateway"
    g.write(b"x"), g.close(), h.close()
    assert h.read_all(2) == b"x" and g.read_all(2) == b""
    assert host.stream_count() == 0 and guest.stream_count() == 0
    host.close(), guest.close()


def test_flow_control_blocks_writer_until_reader_consumes():
    host, guest = pair()
    host.start(), guest.start()
    s = host.open("bulk")
    g = guest.accept(2)
    big = os.urandom(ch.INITIAL_WINDOW * 3 + 123)

    def credit():
        with host._lock:
            return s._send_credit

    w = started(lambda: (s.write(big), s.close()))
    until("the writer spends its window", lambda: credit() == 0, 5)
    assert w.is_alive(), "writer must stall once the window is spent"   # 2 windows and more are left
    got = g.read_all(5)
    assert got == big
    w.join(5)
    host.close(), guest.close()


def test_window_overrun_is_a_protocol_error():
    a, b = socket.socketpair()
    guest = ch.Channel.over_socket(b, role="guest").start()
    a.sendall(ch.encode(ch.OPEN, 2, b'{"service":"x"}'))
    chunk = b"z" * ch.MAX_PAYLOAD
    for _ in range(ch.INITIAL_WINDOW // ch.MAX_PAYLOAD + 1):
        try:
            a.sendall(ch.encode(ch.DATA, 2, chunk))
        except OSError:
            break
    guest.accept(2)
    until("the guest closes the channel on the overrun", lambda: guest.closed, 5)
    a.close()


def test_reset_unknown_stream_and_peer_loss():
    host, guest = pair()
    host.start(), guest.start()
    s = host.open("x")
    g = guest.accept(2)
    g.reset("refused")
    with pytest.raises(ch.StreamReset):
        s.read(timeout=2)
    s2 = host.open("y")
    guest.accept(2)
    guest.close()
    with pytest.raises(ch.ChannelClosed):
        s2.read(timeout=2)
    with pytest.raises(ch.ChannelClosed):
        host.open("z")
    host.close()



def hold_first_write(monkeypatch, fd: int) -> tuple[threading.Event, threading.Event]:
    """The channel's first write to ``fd`` waits: ``holding`` is set once it does, and it goes on when ``go`` is."""
    holding, go = threading.Event(), threading.Event()

    def write(f, data):
        if f == fd and not holding.is_set():
            holding.set()
            go.wait(30)
        return os.write(f, data)

    monkeypatch.setattr(ch, "os", types.SimpleNamespace(read=os.read, write=write, close=os.close, pipe=os.pipe,
                                                        set_blocking=os.set_blocking))
    return holding, go


def test_close_leaves_the_socket_to_a_writer_still_sending_and_the_writer_closes_it(monkeypatch):
    """A frame the writer took before ``close`` goes to the channel's own socket, never to another file that got
    its fd's number: the socket is closed only once the writer is done, by the writer itself when ``close`` stops
    waiting for it first (CI once found a WINDOW frame in a test's subprocess pipe)."""
    a, b = socket.socketpair()
    host = ch.Channel.over_socket(a, role="host")
    fd = a.fileno()
    holding, go = hold_first_write(monkeypatch, fd)
    monkeypatch.setattr(ch, "JOIN_S", 0.05)
    host.start(hello=False)
    with host._lock:
        host._send_locked(ch.WINDOW, 2, struct.pack(">I", ch.INITIAL_WINDOW // 2))
    until("the writer holds its frame", holding.is_set, 5)
    started(host.close).join(10)
    assert host.closed
    assert a.fileno() == fd and stat.S_ISSOCK(os.fstat(fd).st_mode), "the socket was closed under its writer"
    go.set()
    until("the writer, done, closes the socket", lambda: a.fileno() == -1, 10)
    b.close()


def test_a_dead_channels_writer_sends_nothing_more_on_its_pipe(monkeypatch):
    """Frames still queued when a channel dies are dropped, not written: the pipe may carry another channel by
    then (a guest's port: channeld makes a new channel on it for the next host)."""
    a, b = socket.socketpair()
    fd = a.fileno()
    host = ch.Channel(fd, role="host")  # raw descriptors, as a guest's port: nothing closes them but their owner
    holding, go = hold_first_write(monkeypatch, fd)
    host.start(hello=False)
    with host._lock:
        host._send_locked(ch.WINDOW, 2, struct.pack(">I", 1))  # taken by the writer, held in its write
    until("the writer holds its first frame", holding.is_set, 5)
    with host._lock:
        host._send_locked(ch.WINDOW, 4, struct.pack(">I", 2))  # queued behind it
        host._die()  # the channel dies (its peer went, or it broke the protocol)
    go.set()
    until("the writer ends", lambda: not host._writer.is_alive(), 10)
    b.settimeout(5)
    assert b.recv(1024) == ch.encode(ch.WINDOW, 2, struct.pack(">I", 1))  # the frame it had taken, and no more
    b.setblocking(False)
    with pytest.raises(BlockingIOError):
        b.recv(1024)
    b.close()  # (its reader sees the end first: nothing reads ``a``'s number once ``a`` is closed)
    host.close()
    assert not host._reader.is_alive() and stat.S_ISSOCK(os.fstat(fd).st_mode)  # a raw descriptor stays its owner's
    a.close()


def test_close_over_raw_descriptors_ends_a_reader_waiting_on_them_and_it_reads_no_more():
    """A guest's port cannot be shut down under a read: ``close`` wakes the reader instead, and it ends without
    reading the port again, so what the next host sends there is the next channel's (channeld makes one on the
    same port once ``close`` returns). The descriptors stay open: they are their owner's."""
    port_r, host_w = os.pipe()
    host_r, port_w = os.pipe()
    guest = ch.Channel(port_r, port_w, role="guest")
    guest.start(hello=False)
    until("the reader waits on the port", lambda: guest._reader.is_alive(), 5)
    guest.close()
    assert guest.closed and not guest._reader.is_alive() and not guest._writer.is_alive()
    os.write(host_w, b"the next host's HELLO")
    assert os.read(port_r, 100) == b"the next host's HELLO"  # still there for the next channel
    for fd in (port_r, host_w, host_r, port_w):
        assert os.fstat(fd).st_mode and stat.S_ISFIFO(os.fstat(fd).st_mode)
        os.close(fd)
    assert guest._released
    guest.close()  # again: nothing more to do, and no descriptor of another file is written to


def test_close_over_raw_descriptors_ends_a_writer_waiting_for_room_and_its_frame_is_not_written():
    """A writer waiting for room on a port nobody reads (a host gone) is woken by ``close`` and writes nothing
    more: the frame it held would otherwise reach the next host, ahead of the next channel's own frames."""
    port_r, host_w = os.pipe()
    host_r, port_w = os.pipe()
    os.set_blocking(port_w, False)  # as channeld opens its port
    junk = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            junk += os.write(port_w, b"x" * 4096)
    guest = ch.Channel(port_r, port_w, role="guest")
    guest.start(hello=True)  # its HELLO waits for room
    until("the writer has taken the HELLO", lambda: not guest._outq, 5)
    guest.close()
    assert guest.closed and not guest._writer.is_alive() and not guest._reader.is_alive()
    got = b""
    with contextlib.suppress(BlockingIOError):
        os.set_blocking(host_r, False)
        while chunk := os.read(host_r, 65536):
            got += chunk
    assert got == b"x" * junk  # the junk that filled it, and no frame after it
    for fd in (port_r, host_w, host_r, port_w):
        os.close(fd)


def test_a_channel_closed_from_its_own_reader_closes_its_socket_as_the_reader_ends():
    a, b = socket.socketpair()
    host = ch.Channel.over_socket(a, role="host", on_hello=lambda hello: host.close())
    host.start()
    guest = ch.Channel.over_socket(b, role="guest").start()
    until("the host's socket is closed", lambda: a.fileno() == -1, 10)
    assert host.closed
    guest.close()


def test_close_with_idle_threads_closes_the_socket_before_it_returns():
    host, guest = pair()
    host.start(), guest.start()
    host.wait_ready(2)
    host.close()
    assert host._sock.fileno() == -1 and not host._reader.is_alive() and not host._writer.is_alive()
    guest.close()
    assert guest._sock.fileno() == -1



@given(hs.lists(hs.tuples(hs.sampled_from(sorted(ch.NAMES)), hs.integers(0, 2**32 - 1),
                          hs.binary(max_size=300)), max_size=20),
       hs.lists(hs.integers(1, 64), min_size=1, max_size=50))
def test_decoder_any_chunking(frames, cuts):
    blob = b"".join(ch.encode(*f) for f in frames)
    dec, got, i, k = ch.FrameDecoder(), [], 0, 0
    while i < len(blob):
        n = cuts[k % len(cuts)]
        got += dec.feed(blob[i:i + n])
        i, k = i + n, k + 1
    assert got == frames


#: What the channel's frames carry, and what json would make of it: the C codec must agree byte for byte.
FRAME_VALUES = [{}, {"service": "exec", "argv": ["/bin/sh", "-c", "echo 'hi' \"there\""], "env": {"A": "", "B": "\u00e9"},
                    "cwd": "/workspace"}, {"exit": 0, "error": "nul \x00 tab \t line \n emoji \U0001F600"},
                {"n": 10 ** 30, "f": 1e300, "neg": -0.0, "small": 1.5e-7, "t": True, "no": None, "list": [1, [2, [3]]]},
                [1, "x"], "a string", 3]


def test_the_frames_json_is_jsons_own_without_importing_its_modules():
    import json

    for v in FRAME_VALUES:
        assert ch.dumps(v) == json.dumps(v).encode()
        assert ch.loads(ch.dumps(v)) == json.loads(json.dumps(v))
    assert ch.loads(b'  {"a": [1, {"b": "c"}]}\n') == {"a": [1, {"b": "c"}]} and ch.loads('"\u00e9"') == "\u00e9"
    for bad in (b"", b"{", b'{"a": 1} x', b"nope", b"[1,]", b"\xff"):
        with pytest.raises(ValueError):
            ch.loads(bad)
    with pytest.raises(TypeError):
        ch.dumps({"x": object()})
    # what json does with the values a peer could send: NaN read as NaN, a value too deep refused, not a crash
    assert ch.loads(b'{"x": NaN}')["x"] != ch.loads(b'{"x": NaN}')["x"]
    with pytest.raises((ValueError, RecursionError)):
        ch.loads(b"[" * 100_000 + b"]" * 100_000)
    # channeld's start (its modules and the channel's) imports no part of json (its regular expressions)
    code = ("import sys; sys.path[:0] = ['vmm', 'vmm/guest']; import channel, contract, channeld; "
            "print(sorted(m for m in sys.modules if m == 'json' or m.startswith('json.')))")
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["[]"], (r.stdout, r.stderr)


def test_a_restores_refresh_mixes_entropy_through_the_descriptor_opened_at_start():
    """channeld opens /dev/urandom once as it starts: a restore's refresh then opens no file (kernel code
    a restored guest would run untranslated: wakes 0.050x to 0.047x of a cold boot, bench/snapshots.py),
    and a refresh where the start could not open it opens it itself."""
    code = """
import os, sys
sys.path[:0] = ['vmm', 'vmm/guest']
import channeld
channeld.open_urandom()
[fd] = channeld._urandom
real = os.open
def no_open(*a, **k):
    raise AssertionError('a refresh opened a file')
os.open = no_open
channeld.refresh({'entropy': os.urandom(32).hex()})
os.fstat(fd)  # still open for the next restore
channeld._urandom.clear(); os.open = real
opened = []
os.open = lambda *a, **k: opened.append(a[0]) or real(*a, **k)
channeld.refresh({'entropy': os.urandom(32).hex()})
print(opened)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["['/dev/urandom']"], (r.stdout, r.stderr)
