"""One module per area of the command line; each has ``register(sub)`` and ``run(args, env)``."""

from __future__ import annotations

from . import agents, audit, events, hub, models, overview, plaza, replay, rules, society, treasury, usage, vault

AREAS = {m.NAME: m for m in (overview, hub, plaza, events, audit, replay, rules, treasury, vault, models, usage,
                             agents, society)}
