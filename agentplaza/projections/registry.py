"""Every read model the hub keeps, in one list. A new area adds its projections here."""

from __future__ import annotations

from .agents import AgentsProjection, TranscriptProjection
from .framework import Projection
from .hub_mcp import HubMcpProjection
from .laws import LawsProjection
from .log import UnreadableEvents
from .models import ModelsProjection, UsageProjection
from .plaza import EventCounts, PlazaProjection
from .treasury import TreasuryProjection
from .vault import VaultProjection
from .work import WorkProjection


def all_projections() -> list[Projection]:
    return [PlazaProjection(), EventCounts(), LawsProjection(), TreasuryProjection(), VaultProjection(),
            WorkProjection(), ModelsProjection(), UsageProjection(), AgentsProjection(), TranscriptProjection(),
            UnreadableEvents(), HubMcpProjection()]
