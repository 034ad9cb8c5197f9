"""agentplaza acp: the stdio agent editors start (a pipe to the hub's /acp), and the editor sessions the hub
holds.  See docs/acp.md."""

from __future__ import annotations

import sys

from .. import acp_pipe
from ..actions import Action, Area, arg
from ..env import Env
from ..output import table

SESSION_COLUMNS = ["id", "cid", "title", "caller", "protocol", "prompts", "created_at", "updated_at"]


def connect(env: Env) -> int:
    a, c = env.args, env.client
    if getattr(a, "repo", None):
        print("agentplaza acp: --repo (the repository mirror) is not available on this plaza yet; "
              "the agent works without your project", file=sys.stderr)
    return acp_pipe.run(c.hub, c.token, a.agent, c.ssl_context)


AREA = Area("acp", "the stdio agent Zed, JetBrains IDEs and Neovim start, and the editor sessions on the hub", (
    Action("connect", "the stdio agent an editor starts: a pipe to the hub's /acp (the default)", run=connect,
           default=True),
    Action("sessions", "the editor sessions the hub holds (newest first)", "GET", "/v1/hub-mcp/acp/sessions",
           args=(arg("--cid", type=int, help="only this agent's sessions"), arg("--limit", type=int)),
           query=lambda a: {"cid": a.cid, "limit": a.limit},
           render=lambda d: table(d["sessions"], SESSION_COLUMNS) if d["sessions"] else "no editor sessions yet"),
), top=(arg("--agent", metavar="NAME|CID", help="the agent to drive (default: the orchestrator)"),
        arg("--repo", metavar="NAME", help="the plaza repository mirroring the editor's project")))
