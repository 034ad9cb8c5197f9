"""agentplaza acp: the stdio agent editors start (a pipe to the hub's /acp), and the editor sessions the hub
holds.  See docs/acp.md."""

from __future__ import annotations

import re
import sys

from .. import acp_pipe
from ..actions import Action, Area, arg
from ..env import Env
from ..output import table

#: The guide: "a plaza repository name: lowercase letters, digits, ., _ and -, up to 100 characters" (the hub
#: checks the rest: no "..", no ".git" at the end).
REPO_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
SESSION_COLUMNS = ["id", "cid", "title", "caller", "protocol", "prompts", "created_at", "updated_at"]


def connect(env: Env) -> int:
    a, c = env.args, env.client
    repo = getattr(a, "repo", None)
    if repo is not None and REPO_NAME.fullmatch(repo) is None:
        print(f"agentplaza acp: --repo takes a plaza repository name: lowercase letters, digits, ., _ and -, up "
              f"to 100 characters; {repo[:100]!r} is not one", file=sys.stderr)
        return 2
    return acp_pipe.run(c.hub, c.token, a.agent, c.ssl_context, repo)


AREA = Area("acp", "the stdio agent Zed, JetBrains IDEs and Neovim start, and the editor sessions on the hub", (
    Action("connect", "the stdio agent an editor starts: a pipe to the hub's /acp (the default)", run=connect,
           default=True),
    Action("sessions", "the editor sessions the hub holds (newest first)", "GET", "/v1/hub-mcp/acp/sessions",
           args=(arg("--cid", type=int, help="only this agent's sessions"), arg("--limit", type=int)),
           query=lambda a: {"cid": a.cid, "limit": a.limit},
           render=lambda d: table(d["sessions"], SESSION_COLUMNS) if d["sessions"] else "no editor sessions yet"),
), top=(arg("--agent", metavar="NAME|CID", help="the agent to drive (default: the orchestrator)"),
        arg("--repo", metavar="NAME", help="the plaza repository mirroring the editor's project")))
