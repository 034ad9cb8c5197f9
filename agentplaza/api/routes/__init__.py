"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import (
    agents,
    approvals,
    auth,
    conduct,
    gateway,
    log,
    models,
    plaza,
    rules,
    system,
    tasks,
    treasury,
    usage,
    vault,
)

AREAS = [auth, system, log, plaza, rules, treasury, vault, tasks, approvals, conduct, models, usage, gateway,
         agents]
