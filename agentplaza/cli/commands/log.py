"""agentplaza log unreadable | void POSITION --reason R [--yes]: events the store cannot read back."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import table


def render_list(d: dict) -> str:
    rows = d["unreadable"]
    return table(rows) if rows else "every stored event reads back"


def render_voided(d: dict) -> str:
    v = d["voided"]
    return f"voided position {v['position']} at position {v.get('voided_at')}"


AREA = Area("log", "events in the log that cannot be read back, and voiding one", (
    Action("unreadable", "every stored event that cannot be read back, and whether it is voided",
           "GET", "/v1/log/unreadable", render=render_list, default=True),
    Action("void", "record that an unreadable event is seen and the plaza goes on without it",
           "POST", "/v1/log/void",
           args=(arg("position", type=int, help="the position the hub named"),
                 arg("--reason", required=True, help="why (the log's only account of the gap)")),
           body=lambda a: {"position": a.position, "reason": a.reason},
           confirm=lambda a: f"Void the unreadable event at position {a.position}? The log keeps it.",
           render=render_voided),
))
