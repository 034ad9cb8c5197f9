"""How the command line prints: tables for people, the hub's JSON with --json."""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_CELL = 60


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        value = json.dumps(value, separators=(",", ":"))
    text = str(value)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "(none)"
    columns = columns or list(rows[0].keys())
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c.upper()), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def pairs(data: dict[str, Any]) -> str:
    width = max((len(k) for k in data), default=0)
    return "\n".join(f"{k.ljust(width)}  {_cell(v)}" for k, v in data.items())


def emit(data: Any, as_json: bool, render) -> None:
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=False))
    else:
        print(render(data))


def refuse(message: str, code: str | None = None) -> int:
    print(f"agentplaza: {message}" + (f" ({code})" if code else ""), file=sys.stderr)
    return 1
