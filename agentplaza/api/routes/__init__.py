"""One module per area of the API; each holds its handlers at module level and a ``ROUTES`` list
(see ``api/kit.py``)."""

from __future__ import annotations

from . import (
    agents,
    approvals,
    auth,
    board,
    conduct,
    console,
    conversations,
    decide,
    e2b,
    gateway,
    git,
    governance,
    hiring,
    hosting,
    hub_mcp,
    library,
    log,
    memory,
    models,
    plaza,
    rules,
    society,
    system,
    tasks,
    toolbox,
    tools,
    treasury,
    unfurl,
    usage,
    vault,
    volumes,
)

AREAS = [auth, system, log, plaza, rules, treasury, vault, tasks, approvals, conduct, models, usage, gateway,
         agents, decide, unfurl, console, board, conversations, society, git, library, hub_mcp,
         e2b, hiring, toolbox, memory, governance, hosting, tools,
         volumes]
