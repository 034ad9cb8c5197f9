"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import agents, gateway, models, plaza, rules, system, treasury, usage, vault

AREAS = [system, plaza, rules, treasury, vault, models, usage, gateway, agents]
