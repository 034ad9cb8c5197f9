"""agentplaza society roles: the 17 built-in roles."""

from __future__ import annotations

from ..actions import Action, Area
from ..output import table

ROLE_COLUMNS = ["role", "tier", "group", "what"]

AREA = Area("society", "the society: roles", (
    Action("roles", "every role an agent can be started with", "GET", "/v1/society/roles",
           render=lambda d: table(d["roles"], ROLE_COLUMNS)),
))
