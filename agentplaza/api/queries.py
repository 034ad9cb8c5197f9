"""What the screens read: built from read models only, never from aggregates."""

from __future__ import annotations

from ..projections import plaza
from ..projections.agents import agents_overview
from ..projections.models import overview_counts as models_counts
from ..projections.treasury import treasury_overview
from ..projections.work import approvals_overview, tasks_overview
from .hub import Hub
from .routes.rules import overview_counts as rules_counts


def models_overview(hub: Hub) -> dict:
    return models_counts(hub.read_models)


def overview(hub: Hub) -> dict:
    from .routes.vault import vault_overview

    return {
        "hub": hub.info(),
        "plaza": plaza.state_view(hub.read_models),
        "agents": agents_overview(hub.read_models),
        "rules": rules_counts(hub),
        "vault": vault_overview(hub),
        "events": plaza.events_overview(hub.read_models),
        "treasury": treasury_overview(hub.read_models),
        "models": models_overview(hub),
        "tasks": tasks_overview(hub.read_models),
        "approvals": approvals_overview(hub.read_models),
        "log": log_overview(hub),
    }


def log_overview(hub: Hub) -> dict:
    """The log's health: events that cannot be read back, and read models that cannot fold."""
    return {"unreadable": hub.unreadable(), "read_models_failing": dict(hub.read_models.failing)}
