"""Times as people type them, turned into the log's form (UTC, ISO 8601)."""

from __future__ import annotations

import datetime as dt


def parse_when(text: str) -> str:
    """'2026-11-29T21:00:00Z', '2026-11-29 21:00' (UTC assumed) ... -> the log's ISO form.

    Raises ValueError with a message for a person.
    """
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a timestamp: {text!r} (use ISO 8601, e.g. 2026-11-29T21:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).isoformat()
