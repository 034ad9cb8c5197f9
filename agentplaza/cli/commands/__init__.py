"""One module per area of the command line; each has ``register(sub)`` and ``run(args, env)``."""

from __future__ import annotations

from . import agents, audit, events, hub, overview, plaza, replay, rules, society, treasury

AREAS = {m.NAME: m for m in (overview, hub, plaza, events, audit, replay, rules, treasury, agents, society)}
