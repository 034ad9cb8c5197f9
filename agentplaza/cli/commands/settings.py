"""agentplaza settings show | set KEY VALUE: the owner's settings agents' money and outreach follow
(``payments.approve_over``: a payment above it waits in Approvals, 0 makes every payment wait;
``society.outreach_minutes``: an idle agent goes looking for people to work with at most this often,
0 turns outreach off)."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import pairs

#: The settings ``set`` changes, and the body each is sent as.
KEYS = {"payments.approve_over": lambda v: {"payments": {"approve_over": v}},
        "society.outreach_minutes": lambda v: {"society": {"outreach_minutes": v}}}


def render(d: dict) -> str:
    return pairs({f"{section}.{k}": v for section, values in d.items() for k, v in values.items()})


AREA = Area("settings", "the plaza's settings: payments.approve_over, society.outreach_minutes", (
    Action("show", "every setting and its value", "GET", "/v1/settings", render=render, default=True),
    Action("set", "change a setting: payments.approve_over CREDITS (0 makes every payment wait), "
                  "society.outreach_minutes MINUTES (0 turns outreach off)", "PATCH",
           "/v1/settings", args=(arg("key", choices=tuple(KEYS)), arg("value", type=int)),
           body=lambda a: KEYS[a.key](a.value), render=render),
))
