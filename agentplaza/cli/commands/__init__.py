"""One module per area of the command line: its ``AREA``, a table of actions (``cli.actions``);
an area not yet in that form has ``NAME``, ``register(sub)`` and ``run(env)``."""

from __future__ import annotations

from . import (
    acp,
    agents,
    approvals,
    audit,
    board,
    conduct,
    conversations,
    council,
    courts,
    decide,
    doctor,
    e2b,
    events,
    git,
    hub,
    library,
    log,
    machines,
    mcp,
    models,
    node,
    nodes,
    overview,
    plaza,
    projects,
    replay,
    rules,
    settings,
    simulate,
    society,
    tasks,
    templates,
    toolbox,
    tools,
    treasury,
    tui,
    unfurl,
    usage,
    vault,
    volumes,
)

AREAS = {
    getattr(m, "AREA", m).NAME: getattr(m, "AREA", m)
    for m in (overview, hub, plaza, events, audit, log, replay, rules, treasury, vault, tasks, approvals, conduct,
              models, usage, agents, society, conversations, board, projects, council, nodes, templates, git, library,
              decide, unfurl, tui, doctor, mcp, acp, e2b, settings, toolbox, courts, simulate, tools,
              node, machines, volumes)
}
