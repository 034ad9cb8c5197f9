"""A small QMP (QEMU Machine Protocol) client over a unix socket."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Sequence


class QMPError(Exception):
    def __init__(self, cls: str, desc: str) -> None:
        super().__init__(f"{cls}: {desc}")
        self.cls, self.desc = cls, desc


class QMP:
    def __init__(self, path: str) -> None:
        self.path = path
        self.sock: socket.socket | None = None
        self._file = None
        self._lock = threading.Lock()
        self.events: list = []
        self.greeting: dict = {}

    def connect(self, timeout: float = 10.0) -> QMP:
        end = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if time.monotonic() > end:
                    raise TimeoutError(f"QMP socket {self.path} did not come up") from None
                time.sleep(0.01)
        s.settimeout(timeout)
        self.sock, self._file = s, s.makefile("rb")
        self.greeting = self._read()
        if "QMP" not in self.greeting:
            raise QMPError("Protocol", f"unexpected greeting {self.greeting!r}")
        self.execute("qmp_capabilities")
        return self

    @classmethod
    def over_socket(cls, sock: socket.socket, timeout: float = 10.0) -> QMP:
        """A QMP session on a connection QEMU made to us (``-chardev socket,server=off``)."""
        q = cls(sock.getsockname() if isinstance(sock.getsockname(), str) else "")
        sock.settimeout(timeout)
        q.sock, q._file = sock, sock.makefile("rb")
        q.greeting = q._read()
        if "QMP" not in q.greeting:
            raise QMPError("Protocol", f"unexpected greeting {q.greeting!r}")
        q.execute("qmp_capabilities")
        return q

    def _read(self) -> dict:
        line = self._file.readline()
        if not line:
            raise ConnectionError("QMP connection closed")
        return json.loads(line)

    def execute(self, command: str, arguments: dict | None = None, timeout: float = 10.0,
                fds: Sequence[int] = ()):
        """Run one command; ``fds`` ride along as SCM_RIGHTS (for ``getfd``)."""
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        with self._lock:
            self.sock.settimeout(timeout)
            data = json.dumps(msg).encode() + b"\n"
            if fds:
                n = socket.send_fds(self.sock, [data], list(fds))
                data = data[n:]
            if data:
                self.sock.sendall(data)
            while True:
                r = self._read()
                if "event" in r:
                    self.events.append(r)
                    continue
                if "error" in r:
                    raise QMPError(r["error"].get("class", "?"), r["error"].get("desc", ""))
                return r.get("return")

    def wait_event(self, names, timeout: float = 10.0) -> dict:
        """Wait for one of the named events (also those seen during earlier commands)."""
        names = {names} if isinstance(names, str) else set(names)
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                for i, ev in enumerate(self.events):
                    if ev.get("event") in names:
                        return self.events.pop(i)
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no QMP event {sorted(names)}")
                self.sock.settimeout(left)
                self.events.append(self._read())

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
