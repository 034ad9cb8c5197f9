"""agentplaza hub status: which hub this command talks to."""

from __future__ import annotations

from ..actions import Action, Area
from ..env import Env
from ..output import pairs, refuse


def render(d: dict) -> str:
    return pairs({
        "address": d["address"], "version": d["version"],
        "store": f"{d['store']['backend']} {d['store']['where']}",
        "position": d["position"], "read models at": d["projections_at"], "started": d["started_at"],
    })


def status(env: Env) -> int:
    """``hub status``; ``hub`` alone names no action and is refused."""
    if env.args.action is None:
        return refuse("hub wants an action: status")
    return env.show(env.client.get("/v1/hub"), render)


AREA = Area("hub", "the hub this command talks to", (
    Action("status", "the hub's version, address, store and position", run=status, default=True),
))
