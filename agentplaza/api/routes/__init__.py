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
    egress,
    gateway,
    git,
    governance,
    hiring,
    hosting,
    hub_mcp,
    library,
    log,
    machines,
    memory,
    models,
    nodelink,
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
         e2b, hiring, toolbox, memory, governance, hosting, tools]
AREAS += [nodelink, machines]  # joined nodes: their connection, drain and revoke; the Machines list
AREAS += [egress]  # the proxy, the fetch blocklist and the audit of the agents' connections
AREAS += [volumes]  # shared read-only data volumes and the roles' lists
