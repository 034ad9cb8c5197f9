"""One module per area of the command line; each has ``register(sub)`` and ``run(args, env)``."""

from __future__ import annotations

from . import (
    agents,
    approvals,
    audit,
    conduct,
    events,
    hub,
    log,
    models,
    nodes,
    overview,
    plaza,
    replay,
    rules,
    society,
    tasks,
    templates,
    treasury,
    usage,
    vault,
)

AREAS = {
    m.NAME: m
    for m in (overview, hub, plaza, events, audit, log, replay, rules, treasury, vault, tasks, approvals, conduct,
              models, usage, agents, society, nodes, templates)
}
