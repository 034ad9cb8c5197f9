"""What the screens read: built from read models only, never from aggregates."""

from __future__ import annotations

from ..commands.laws import book_in_force
from ..projections import board, conversations, governance, laws, plaza
from ..projections.agents import agents_overview
from ..projections.models import overview_counts as models_counts
from ..projections.treasury import treasury_overview
from ..projections.work import approvals_overview, tasks_overview
from .hub import Hub


def rules_overview(hub: Hub) -> dict:
    """The Rules figures: the book in force's laws, owner rules and disabled statutes, and the
    decisions' totals."""
    book = book_in_force(hub.commands)
    return {"laws": len(book.lawset), "owner_rules": len(book.rules()),
            "disabled_statutes": len(book.disabled_statutes()), **laws.totals(hub.read_models)}


def vault_overview(hub: Hub) -> dict:
    """The vault line: its state and entry count (the vault's own status, never a value)."""
    if hub.vault is None:
        return {"state": "absent", "entries": 0}
    s = hub.vault.status()
    return {"state": s["state"], "entries": s["entries"], "slots": len(s["slots"])}


def models_overview(hub: Hub) -> dict:
    return models_counts(hub.read_models)


def overview(hub: Hub) -> dict:
    return {
        "hub": hub.info(),
        "plaza": plaza.state_view(hub.read_models),
        "agents": agents_overview(hub.read_models),
        "rules": rules_overview(hub),
        "vault": vault_overview(hub),
        "events": plaza.events_overview(hub.read_models),
        "treasury": treasury_overview(hub.read_models),
        "models": models_overview(hub),
        "tasks": tasks_overview(hub.read_models),
        "approvals": approvals_overview(hub.read_models),
        "board": {**board.counts(hub.read_models), **conversations.counts(hub.read_models)},
        "log": log_overview(hub),
        "governance": governance.counts(hub.read_models),
    }


def log_overview(hub: Hub) -> dict:
    """The log's health: events that cannot be read back, and read models that cannot fold."""
    return {"unreadable": hub.unreadable(), "read_models_failing": dict(hub.read_models.failing)}
