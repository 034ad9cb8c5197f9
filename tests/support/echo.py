"""A TCP server on 127.0.0.1 that answers each connection's bytes in upper case: the far end of the
egress proxy's tunnels in the tests (the only address the tests dial)."""

from __future__ import annotations

import socket
import threading


def echo_server() -> socket.socket:
    """Listening on an ephemeral port (``srv.getsockname()[1]``); close it to stop."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return

            def one(c=conn):
                while d := c.recv(65536):
                    c.sendall(d.upper())
                c.close()

            threading.Thread(target=one, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv
