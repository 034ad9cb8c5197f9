"""A machine's sockets listen in its run folder however deep that folder is (a node's state folder in a
test's tree ran past the 107 bytes a unix socket's address holds, and every start on that node failed)."""

from __future__ import annotations

import socket

from vmm.qemu import UNIX_PATH_MAX, bind_unix


def test_a_socket_binds_at_a_path_longer_than_an_address_holds(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "qmp.sock"
    assert len(str(path)) > UNIX_PATH_MAX
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        bind_unix(s, path)
        s.listen(1)
        assert path.is_socket()  # made where it was asked for
        monkeypatch.chdir(deep)  # a client that reaches it as QEMU in its jail does, by a short path
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect("qmp.sock")
            conn, _ = s.accept()
            conn.close()


def test_a_short_path_binds_as_it_is(tmp_path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        bind_unix(s, tmp_path / "channel.sock")
        assert s.getsockname() == str(tmp_path / "channel.sock")
