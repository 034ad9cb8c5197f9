"""The sanctions schedule, as data: severity of the broken law x offence count (1, 2, 3 and later).

The offence count is how many times that law was broken by that agent in the last 30 days,
this offence included; the third and later offences use the third column.  Each cell is the
list of steps the plaza takes, in order.  A step is a tuple:

    ("warning",)               a record on the agent's profile and a note in its memory
    ("fine", CREDITS)          through the treasury (capped at 300 a fine, 1,000 in any 7 days)
    ("probation", HOURS)       the offending tool is refused for HOURS
    ("lockout", HOURS)         the offending tool is refused for HOURS, and the owner is asked
    ("demotion",)              an approval for the owner; the plaza does not demote
    ("retirement",)            an approval for the owner; approving records it, it does not retire
    ("owner_review",)          an approval for the owner

Every case is treated as negligent for now.  ``CULPABILITY_SHIFT`` is the rule for the other
cases (one column left when induced by others, one column right when done on purpose), kept
here for when the plaza can tell them apart.  docs/sanctions.md prints this table.
"""

from __future__ import annotations

#: The window the offence count looks back over.
OFFENCE_WINDOW_DAYS = 30
#: The columns of the table: offence 1, offence 2, offence 3 and later.
COLUMNS = 3
SEVERITIES = ("info", "low", "medium", "high", "critical")
#: The culpability every case is treated as, and how each would move along the columns.
CULPABILITY = "negligent"
CULPABILITY_SHIFT = {"induced": -1, "negligent": 0, "purposeful": 1}

SCHEDULE: dict[str, tuple[list[tuple], list[tuple], list[tuple]]] = {
    "info": (
        [("warning",)],
        [("warning",)],
        [("warning",), ("fine", 25)],
    ),
    "low": (
        [("warning",)],
        [("warning",), ("fine", 50)],
        [("fine", 100), ("probation", 1)],
    ),
    "medium": (
        [("warning",), ("fine", 50)],
        [("fine", 150), ("probation", 6)],
        [("fine", 300), ("lockout", 24)],
    ),
    "high": (
        [("fine", 150), ("probation", 24)],
        [("fine", 300), ("lockout", 72)],
        [("fine", 300), ("lockout", 168), ("demotion",)],
    ),
    "critical": (
        [("fine", 300), ("lockout", 168), ("owner_review",)],
        [("fine", 300), ("lockout", 720), ("demotion",)],
        [("fine", 300), ("lockout", 720), ("retirement",)],
    ),
}

#: The steps from the lightest to the heaviest: ``heaviest`` names a cell by its last one here (what a
#: ruling is "for", as S-041 reads it: "a ruling for a lockout, demotion, retirement or owner review").
STEP_ORDER = ("warning", "fine", "probation", "lockout", "demotion", "owner_review", "retirement")


def heaviest(steps: list[tuple]) -> str | None:
    """The heaviest step of a cell (None for no step)."""
    kinds = [s[0] for s in steps]
    return max(kinds, key=STEP_ORDER.index) if kinds else None
