"""One module per area of the API; each holds its handlers at module level and a ``ROUTES`` list
(see ``api/kit.py``)."""

from __future__ import annotations

from . import (
    agents,
    approvals,
    auth,
    conduct,
    console,
    decide,
    gateway,
    hub_mcp,
    log,
    models,
    plaza,
    rules,
    system,
    tasks,
    treasury,
    unfurl,
    usage,
    vault,
)

AREAS = [auth, system, log, plaza, rules, treasury, vault, tasks, approvals, conduct, models, usage, gateway,
         agents, decide, unfurl, hub_mcp, console]
