"""agentplaza unfurl TARGET: the preview card for a link, a task (#N, task #N) or an agent (@Name).

Where the terminal supports links (standard output is a terminal), the card's short label is a
terminal hyperlink (OSC 8) to the thing it names; piped, the card is plain text. ``--json`` gives
the hub's answer (``GET /v1/unfurl?target=...``)."""

from __future__ import annotations

import sys

from ..env import Env

#: OSC 8: ESC ] 8 ; ; URL ST  LABEL  ESC ] 8 ; ; ST
OSC8_OPEN, OSC8_CLOSE = "\x1b]8;;{url}\x1b\\", "\x1b]8;;\x1b\\"
#: The characters a URL may carry into the escape sequence (no control characters: the card's URL
#: is the hub's answer, and a link must not smuggle terminal escapes).
_SAFE = frozenset(chr(c) for c in range(0x21, 0x7F))


def hyperlink(label: str, url: str | None, enabled: bool) -> str:
    """``label``, clickable to ``url`` where the terminal supports links."""
    if not enabled or not url or not set(url) <= _SAFE:
        return label
    return OSC8_OPEN.format(url=url) + label + OSC8_CLOSE


def _plain(text: object) -> str:
    """A value from the hub, with control characters (terminal escapes) taken out."""
    return "".join(ch for ch in str(text) if ch.isprintable() or ch == " ")


def card(d: dict, links: bool) -> str:
    head = hyperlink(_plain(d["label"]), d.get("url"), links)
    title = f"  {_plain(d['title'])}" if d.get("title") else ""
    lines = [f"{head}{title}", f"  kind     {_plain(d['kind'])}"]
    for name in ("state", "author"):
        if d.get(name):
            lines.append(f"  {name:<8} {_plain(d[name])}")
    for k, v in (d.get("fields") or {}).items():
        if v is not None and not (k == "status" and v == d.get("state")):
            lines.append(f"  {k:<8} {_plain(v)}")
    if d.get("excerpt"):
        lines.append(f"  {_plain(d['excerpt'])}")
    if d.get("reachable") is False:
        lines.append(f"  not reachable: {_plain(d.get('why') or 'the hub could not fetch it')}")
    if d.get("url") and not links:
        lines.append(f"  {_plain(d['url'])}")
    return "\n".join(lines)


def render(d: dict) -> str:
    return card(d, sys.stdout.isatty())


NAME = "unfurl"
HELP = "the preview card for a link, a task (#N) or an agent (@Name)"


def register(sub) -> None:
    p = sub.add_parser(NAME, help=HELP, description=HELP + " (quote #N: a shell reads an unquoted #12 as a comment)")
    p.add_argument("target", nargs="+", help="#N, task #N, @Name, or a link")


def run(env: Env) -> int:
    return env.show(env.client.get("/v1/unfurl", target=" ".join(env.args.target)), render)
