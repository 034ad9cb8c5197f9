"""Every read model the hub keeps, in one list. A new area adds its projections here."""

from __future__ import annotations

from .framework import Projection
from .plaza import EventCounts, PlazaProjection
from .vault import VaultProjection


def all_projections() -> list[Projection]:
    return [PlazaProjection(), EventCounts(), VaultProjection()]
