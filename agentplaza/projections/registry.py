"""Every read model the hub keeps, in one list. A new area adds its projections here."""

from __future__ import annotations

from .agents import AgentsProjection, TranscriptProjection
from .board import BoardProjection
from .conversations import ConversationsProjection
from .e2b import E2bProjection
from .files import FilesProjection
from .framework import Projection
from .git import GitProjection
from .governance import GovernanceProjection
from .hiring import HiringProjection
from .hub_mcp import HubMcpProjection
from .laws import LawsProjection
from .library import LibraryProjection
from .log import UnreadableEvents
from .memory import MemoryProjection
from .models import ModelsProjection, UsageProjection
from .nodes import NodesProjection
from .outreach import OutreachProjection
from .plaza import EventCounts, PlazaProjection
from .society import SocietyProjection
from .toolbox import ToolboxProjection
from .toollib import ToolLibraryProjection
from .treasury import TreasuryProjection
from .vault import VaultProjection
from .volumes import VolumesProjection
from .work import WorkProjection


def all_projections() -> list[Projection]:
    return [PlazaProjection(), EventCounts(), LawsProjection(), TreasuryProjection(), VaultProjection(),
            WorkProjection(), ModelsProjection(), UsageProjection(), AgentsProjection(), TranscriptProjection(),
            UnreadableEvents(), BoardProjection(), ConversationsProjection(),
            SocietyProjection(), GitProjection(), LibraryProjection(), HubMcpProjection(),
            HiringProjection(), ToolboxProjection(), MemoryProjection(), GovernanceProjection(),
            NodesProjection(),
            E2bProjection(),
            OutreachProjection(),
            FilesProjection(), ToolLibraryProjection(),
            VolumesProjection()]
