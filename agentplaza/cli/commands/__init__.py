"""One module per area of the command line; each has ``register(sub)`` and ``run(args, env)``."""

from __future__ import annotations

from . import audit, events, hub, models, overview, plaza, replay, rules, usage

AREAS = {m.NAME: m for m in (overview, hub, plaza, events, audit, replay, rules, models, usage)}
