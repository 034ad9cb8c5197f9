"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import agents, plaza, rules, system, treasury

AREAS = [system, plaza, rules, treasury, agents]
