"""A machine's serial console, line by line, as node events (``{"cid", "event": "console", "text"}``).

The QEMU backend writes each guest's serial console to a file in the machine's run folder; a tail
reads what is new every ``POLL_S`` and hands each complete line on. A file that shrinks (the machine
booted or woke anew) is read again from its start. What a guest may flood is bounded: at most
``READ_MAX_BYTES`` a poll, each line cut at the wire's ``CONSOLE_LINE_MAX_CHARS``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from ...wire import CONSOLE_LINE_MAX_CHARS

POLL_S = 0.5
READ_MAX_BYTES = 64 * 1024


class ConsoleTail:
    def __init__(self, path: Path, emit: Callable[[str], None]):
        self.path, self.emit = Path(path), emit
        self.offset = 0
        self.partial = b""
        self.stopped = threading.Event()

    def start(self, name: str) -> ConsoleTail:
        threading.Thread(target=self._loop, daemon=True, name=name).start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _loop(self) -> None:
        while not self.stopped.wait(POLL_S):
            self.poll()

    def poll(self) -> None:
        """Hand on every complete line written since the last poll."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if size < self.offset:  # a new boot wrote the file anew
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(READ_MAX_BYTES)
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        if len(self.partial) > CONSOLE_LINE_MAX_CHARS:  # a line with no end: carried in pieces
            lines.append(self.partial)
            self.partial = b""
        for raw in lines:
            text = raw.decode("utf-8", errors="replace").rstrip("\r")
            if text:
                self.emit(text[:CONSOLE_LINE_MAX_CHARS])
