"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import approvals, conduct, plaza, rules, system, tasks, treasury

AREAS = [system, plaza, rules, treasury, tasks, approvals, conduct]
