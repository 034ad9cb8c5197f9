"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import agents, plaza, system

AREAS = [system, plaza, agents]
