"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import gateway, models, plaza, system, usage

AREAS = [system, plaza, models, usage, gateway]
