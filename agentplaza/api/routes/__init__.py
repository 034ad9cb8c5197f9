"""One module per area of the API; each exposes ``routes(api) -> list``."""

from __future__ import annotations

from . import plaza, rules, system, treasury, vault

AREAS = [system, plaza, rules, treasury, vault]
