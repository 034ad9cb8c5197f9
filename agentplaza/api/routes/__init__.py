"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import (
    agents,
    approvals,
    auth,
    conduct,
    gateway,
    models,
    plaza,
    rules,
    system,
    tasks,
    treasury,
    usage,
    vault,
)

AREAS = [auth, system, plaza, rules, treasury, vault, tasks, approvals, conduct, models, usage, gateway, agents]
