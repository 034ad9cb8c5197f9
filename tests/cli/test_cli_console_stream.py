"""``agentplaza events --all``: the VMs' console lines on the live bus, to a socket that asks for them only."""

from __future__ import annotations

from agentplaza.adapters.kvm.console import ConsoleTail
from agentplaza.cli.commands.events import line
from agentplaza.events.bus import Bus, ConsoleLine
from agentplaza.wire import CONSOLE_FAMILY, CONSOLE_LINE_MAX_CHARS


class Record:
    def __init__(self, family: str):
        self.family = family


def test_console_lines_reach_only_a_subscriber_that_asks_for_them():
    bus = Bus(clock=lambda: 0.0)
    plain = bus.subscribe("a", None, lambda: None)
    everything = bus.subscribe("b", None, lambda: None, console=True)
    agents_and_console = bus.subscribe("c", ["agent", CONSOLE_FAMILY], lambda: None)
    agents = bus.subscribe("d", ["agent"], lambda: None)
    bus.console(7, "Linux version 6.1", "node:n0")
    bus.publish([Record("agent"), *bus.take_console()])
    assert [r.family for r in plain.queue] == ["agent"]
    assert [r.family for r in everything.queue] == ["agent", CONSOLE_FAMILY]
    assert [r.family for r in agents_and_console.queue] == ["agent", CONSOLE_FAMILY]
    assert [r.family for r in agents.queue] == ["agent"]
    msg = everything.queue[1].as_message()
    assert msg["event"] == CONSOLE_FAMILY and msg["data"]["cid"] == 7 and msg["data"]["text"] == "Linux version 6.1"
    assert msg["data"]["position"] is None  # not a stored event
    assert line(msg).endswith("cid 7      console    Linux version 6.1")


def test_no_console_line_is_kept_while_nobody_wants_them():
    bus = Bus(clock=lambda: 0.0)
    bus.subscribe("a", ["plaza"], lambda: None)
    bus.console(7, "boot", "node:n0")
    assert bus.take_console() == []
    line_ = ConsoleLine(7, "x", "2026-12-01T00:00:00+00:00", "node:n0")
    assert line_.family == CONSOLE_FAMILY


def test_the_tail_hands_on_whole_lines_and_reads_a_new_boot_from_its_start(tmp_path):
    log = tmp_path / "console.log"
    seen: list[str] = []
    tail = ConsoleTail(log, seen.append)
    tail.poll()  # no file yet
    log.write_bytes(b"[    0.000] Linux version\r\n[    0.100] half")
    tail.poll()
    assert seen == ["[    0.000] Linux version"]
    with open(log, "ab") as f:
        f.write(b" a line\n\n")
    tail.poll()
    assert seen[-1] == "[    0.100] half a line" and len(seen) == 2  # an empty line is not carried
    log.write_bytes(b"booted again\n")  # a new boot writes the file anew
    tail.poll()
    assert seen[-1] == "booted again"
    log.write_bytes(b"y" * (CONSOLE_LINE_MAX_CHARS * 2))  # a line with no end is carried in pieces, each cut
    tail.poll()
    assert all(len(s) <= CONSOLE_LINE_MAX_CHARS for s in seen) and seen[-1].startswith("y")
