"""What the screens read: built from read models only, never from aggregates."""

from __future__ import annotations

import sqlalchemy as sa

from ..projections.models import overview_counts as models_counts
from ..projections.plaza import event_counts, plaza_holds, plaza_state
from ..projections.treasury import treasury_overview
from ..projections.work import approvals_overview, tasks_overview
from .hub import Hub
from .routes.rules import overview_counts as rules_counts


def plaza_state_view(hub: Hub) -> dict:
    rows = hub.read_models.rows(plaza_state)
    if not rows:
        return {"state": "unknown"}
    r = rows[0]
    return {
        "name": r["name"],
        "state": "held" if r["held"] else "running",
        "held": r["held"],
        "since": r["since"],
        "by": r["by"],
        "reason": r["reason"],
        "founded_at": r["founded_at"],
    }


def plaza_history(hub: Hub, limit: int) -> list[dict]:
    return hub.read_models.rows(plaza_holds, order_by=sa.desc(plaza_holds.c.position), limit=limit)


def _agents_counts(hub: Hub) -> dict:
    from .routes.agents import overview_counts

    return overview_counts(hub)


def models_overview(hub: Hub) -> dict:
    return models_counts(hub.read_models)


def overview(hub: Hub) -> dict:
    from .routes.vault import vault_overview

    counts = hub.read_models.rows(event_counts)
    families: dict[str, int] = {}
    for row in counts:
        families[row["family"]] = families.get(row["family"], 0) + row["count"]
    return {
        "hub": hub.info(),
        "plaza": plaza_state_view(hub),
        "agents": _agents_counts(hub),
        "rules": rules_counts(hub),
        "vault": vault_overview(hub),
        "events": {"total": sum(families.values()), "by_family": dict(sorted(families.items()))},
        "treasury": treasury_overview(hub.read_models),
        "models": models_overview(hub),
        "tasks": tasks_overview(hub.read_models),
        "approvals": approvals_overview(hub.read_models),
        "log": log_overview(hub),
    }


def log_overview(hub: Hub) -> dict:
    """The log's health: events that cannot be read back, and read models that cannot fold."""
    return {"unreadable": hub.unreadable(), "read_models_failing": dict(hub.read_models.failing)}
