"""The tools an MCP client sees: exactly the guide's list, each with its scope, its input schema and
what it does.

A tool does what the console does through the console's own door: it calls the hub's own route
in-process (``inner``), through the same handler, body checks, commands, laws and refusals, with
the events' correlation id ``mcp:<caller>`` so the plaza records that the change came over MCP.
Where the guide gives no route (an agent proposal, a recommendation on an approval), the tool calls
the command the plaza's own agents use.  A tool whose area is not built yet answers ``not_available``.
Nothing here reaches the vault, money, law edits, sanctions, STOP ALL or settings: the routes a tool
may call are listed in ``ROUTES_USED`` and a test pins them against the guide's "never reachable" list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..commands import approvals as approval_commands
from ..commands import hub_mcp as commands
from ..domain.base import Refusal
from ..domain.hub_mcp import MAX_NOTE_CHARS, VERDICTS
from ..wire import APPROVAL_STATUSES, TASK_STATES
from .inner import Inner

#: The guide: "An agent's transcript, a page at a time. Each tool result is cut to 4 KB."
TRANSCRIPT_RESULT_BYTES = 4096
TRANSCRIPT_PAGE = 50
TRANSCRIPT_MAX_PAGE = 200
LIST_LIMIT = 100
#: The journal lines treasury_summary shows.
JOURNAL_LINES = 20
MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class Call:
    """One tool call: where it runs, and who made it."""

    inner: Inner
    caller: str  # "token:<id>", "owner" or "address:<ip>"
    args: dict[str, Any]

    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)


@dataclass(frozen=True)
class Tool:
    name: str
    scope: str  # observe, operate or govern
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    run: Callable[[Call], Awaitable[tuple[Any, str]]]  # (structured result, one-line summary)
    changes: bool = False  # it changes the plaza: held by STOP ALL

    @property
    def input_schema(self) -> dict:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}


def not_built(area: str) -> Callable[[Call], Awaitable[tuple[Any, str]]]:
    async def run(call: Call) -> tuple[Any, str]:
        raise Refusal("not_available", f"not available on this plaza yet: {area} is not built on this hub")

    return run


S = {"type": "string", "maxLength": 200}
TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS}
CID_ARG = {"type": "integer", "minimum": 1, "description": "the agent's CID"}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000}


def _cid(call: Call) -> int:
    cid = call.arg("cid")
    if not isinstance(cid, int) or isinstance(cid, bool) or cid < 1:
        raise Refusal("invalid_cid", "cid: an agent's CID is a positive whole number")
    return cid


# -- observe -------------------------------------------------------------------------------------------------

async def plaza_status(call: Call) -> tuple[Any, str]:
    o = await call.inner.get("/v1/overview")
    tasks = o.get("tasks") or {}
    out = {"version": o["hub"]["version"], "state": o["plaza"]["state"],
           "agents": o["agents"]["total"], "open_tasks": sum(tasks.get(s, 0) for s in ("open", "claimed")),
           "pending_approvals": o["approvals"]["pending"], "treasury_balance": o["treasury"]["budget"]}
    return out, (f"plaza {out['state']}: {out['agents']} agents, {out['open_tasks']} open tasks, "
                 f"{out['pending_approvals']} pending approvals, balance {out['treasury_balance']:,}")


async def list_agents(call: Call) -> tuple[Any, str]:
    agents = (await call.inner.get("/v1/agents", role=call.arg("role")))["agents"]
    if call.arg("status"):
        agents = [a for a in agents if a.get("status") == call.arg("status")]
    return {"agents": agents}, f"{len(agents)} agents"


async def get_agent(call: Call) -> tuple[Any, str]:
    page = await call.inner.get(f"/v1/agents/{_cid(call)}")
    a = page.get("agent", page)
    return page, f"agent {a.get('name', '')} ({a.get('cid', _cid(call))}): {a.get('status', '')}"


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value.encode()) > TRANSCRIPT_RESULT_BYTES:
        return value.encode()[:TRANSCRIPT_RESULT_BYTES].decode(errors="ignore") + " [cut to 4 KB]"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value


async def get_transcript(call: Call) -> tuple[Any, str]:
    d = await call.inner.get(f"/v1/agents/{_cid(call)}/logs", after=call.arg("after", 0),
                             limit=call.arg("limit", TRANSCRIPT_PAGE))
    entries = [_cut(e) for e in d["transcript"]]
    return {"cid": d["cid"], "transcript": entries}, f"{len(entries)} transcript entries"


async def list_tasks(call: Call) -> tuple[Any, str]:
    rows = (await call.inner.get("/v1/tasks", state=call.arg("status"), worker=call.arg("assignee"),
                                 limit=call.arg("limit", LIST_LIMIT)))["tasks"]
    if call.arg("project"):
        rows = [t for t in rows if t.get("project") == call.arg("project")]
    return {"tasks": rows}, f"{len(rows)} tasks"


async def list_projects(call: Call) -> tuple[Any, str]:
    rows = (await call.inner.get("/v1/projects"))["projects"]
    return {"projects": rows}, f"{len(rows)} projects"


async def get_project(call: Call) -> tuple[Any, str]:
    p = await call.inner.get(f"/v1/projects/{call.arg('project')}")
    return _cut(p), f"project {p.get('id')}: {p.get('stage')}"


async def get_task(call: Call) -> tuple[Any, str]:
    number = str(call.arg("id"))
    task = await call.inner.get(f"/v1/tasks/{number}")
    timeline = await call.inner.get(f"/v1/tasks/{number}/timeline")
    return {"task": task, "timeline": timeline}, f"task {task.get('id', number)}: {task.get('state', '')}"


async def list_approvals(call: Call) -> tuple[Any, str]:
    rows = (await call.inner.get("/v1/approvals", status=call.arg("status", "pending"),
                                 limit=call.arg("limit", LIST_LIMIT)))["approvals"]
    return {"approvals": rows}, f"{len(rows)} approvals"


async def list_machines(call: Call) -> tuple[Any, str]:
    nodes = (await call.inner.get("/v1/nodes"))
    rows = nodes.get("nodes", nodes)
    return {"machines": rows}, f"{len(rows)} machines"


async def treasury_summary(call: Call) -> tuple[Any, str]:
    balances = await call.inner.get("/v1/treasury")
    journal = await call.inner.get("/v1/treasury/journal", limit=JOURNAL_LINES)
    return {"balances": balances, "journal": journal}, "treasury balances and the latest journal entries"


async def usage_summary(call: Call) -> tuple[Any, str]:
    return await call.inner.get("/v1/usage/summary"), "model calls, tokens and cost by provider and model"


async def list_laws(call: Call) -> tuple[Any, str]:
    d = await call.inner.get("/v1/rules")
    return d, "the laws in force"


# -- operate -------------------------------------------------------------------------------------------------

async def create_task(call: Call) -> tuple[Any, str]:
    body = {k: call.arg(k) for k in ("title", "acceptance", "budget", "details", "role", "project")
            if call.arg(k) is not None}
    task = await call.inner.post("/v1/tasks", body)
    return task, f"filed task {task.get('id')}: {task.get('title', '')}"


async def message_orchestrator(call: Call) -> tuple[Any, str]:
    found = (await call.inner.get("/v1/agents", role="orchestrator"))["agents"]
    live = [a for a in found if a.get("status") not in ("retired",)]
    if not live:
        raise Refusal("no_orchestrator", "this plaza has no orchestrator to message")
    cid = live[0]["cid"]
    d = await call.inner.post(f"/v1/agents/{cid}/tell", {"text": call.arg("text")})
    return d, f"sent to the orchestrator ({cid}), recorded as coming over MCP"


async def list_board(call: Call) -> tuple[Any, str]:
    d = await call.inner.get("/v1/board")
    return d, f"{len(d['posts'])} posts" + (" (deliveries paused)" if d.get("paused") else "")


async def search_library(call: Call) -> tuple[Any, str]:
    items = (await call.inner.get("/v1/library", q=call.arg("query")))["items"]
    return {"items": items}, f"{len(items)} library items match {call.arg('query')!r}"


async def post_board(call: Call) -> tuple[Any, str]:
    reply_to = call.arg("reply_to")
    if reply_to:
        d = await call.inner.post(f"/v1/board/{reply_to}/replies", {"text": call.arg("text")})
        return d, f"replied to post {reply_to}"
    d = await call.inner.post("/v1/board", {"text": call.arg("text")})
    return d, f"posted {d['id']} on the board"


async def tell_agent(call: Call) -> tuple[Any, str]:
    cid = _cid(call)
    d = await call.inner.post(f"/v1/agents/{cid}/tell", {"text": call.arg("text")})
    return d, f"sent a note to agent {cid}"


async def stop_agent(call: Call) -> tuple[Any, str]:
    cid = _cid(call)
    return await call.inner.post(f"/v1/agents/{cid}/cancel", {}), f"stopped agent {cid}'s current work"


async def restart_agent(call: Call) -> tuple[Any, str]:
    cid = _cid(call)
    return await call.inner.post(f"/v1/agents/{cid}/restart", {}), f"restarting agent {cid}'s VM"


async def propose_agent(call: Call) -> tuple[Any, str]:
    role, count, model = call.arg("role"), call.arg("count", 1), call.arg("model")
    why = call.arg("why") or "proposed over MCP"
    detail = {"role": role, "count": count, "model": model}
    number = await call.inner.command(lambda cmds, ctx: approval_commands.request(
        cmds, ctx, "agent", f"Start {count} {role} ({why})"[:300], detail=detail))
    return {"approval": number, "detail": detail}, f"filed agent proposal {number}; approve it in the console"


# -- govern --------------------------------------------------------------------------------------------------

async def request_decision(call: Call) -> tuple[Any, str]:
    number, verdict = str(call.arg("approval")), call.arg("recommendation")
    d = await call.inner.command(lambda cmds, ctx: commands.recommend(
        cmds, ctx, number, verdict, call.arg("note") or "", call.caller))
    return d, f"recorded the recommendation {verdict} on {number}; the owner decides"


TOOLS: tuple[Tool, ...] = (
    Tool("plaza_status", "observe", "The hub version, whether the plaza is running or held, counts of agents, open "
         "tasks and pending approvals, and the treasury balance.", {}, (), plaza_status),
    Tool("list_agents", "observe", "The roster, filtered by role or status.",
         {"role": S, "status": S}, (), list_agents),
    Tool("get_agent", "observe", "One agent's profile, limits, permissions and current task.",
         {"cid": CID_ARG}, ("cid",), get_agent),
    Tool("get_transcript", "observe", "An agent's transcript, a page at a time; each tool result is cut to 4 KB.",
         {"cid": CID_ARG, "after": {"type": "integer", "minimum": 0},
          "limit": {"type": "integer", "minimum": 1, "maximum": TRANSCRIPT_MAX_PAGE}}, ("cid",), get_transcript),
    Tool("list_tasks", "observe", "Tasks, filtered by status, project or assignee.",
         {"status": {"type": "string", "enum": list(TASK_STATES)}, "project": S, "assignee": S, "limit": LIMIT},
         (), list_tasks),
    Tool("get_task", "observe", "One task with its transitions.", {"id": S}, ("id",), get_task),
    Tool("list_board", "observe", "Board posts with their comment counts.", {}, (), list_board),
    Tool("list_projects", "observe", "The projects.", {}, (), list_projects),
    Tool("get_project", "observe", "One project with its documents, tasks and events.", {"project": S},
         ("project",), get_project),
    Tool("list_approvals", "observe", "Approval requests; pending ones by default.",
         {"status": {"type": "string", "enum": [*APPROVAL_STATUSES, "all"]}, "limit": LIMIT}, (), list_approvals),
    Tool("list_machines", "observe", "Machines, with their status, CPU, memory, GPUs and running agents.", {}, (),
         list_machines),
    Tool("treasury_summary", "observe", "Balances and recent journal entries.", {}, (), treasury_summary),
    Tool("usage_summary", "observe", "Model calls, tokens and cost by provider and model.", {}, (), usage_summary),
    Tool("search_library", "observe", "Library packages that match a query.", {"query": S}, ("query",),
         search_library),
    Tool("list_laws", "observe", "The laws in force.", {}, (), list_laws),
    Tool("create_task", "operate", "Files a task to the orchestrator, as the New task button does.",
         {"title": S, "acceptance": TEXT, "budget": {"type": "integer", "minimum": 1}, "details": TEXT,
          "role": S, "project": S}, ("title", "acceptance"), create_task, changes=True),
    Tool("message_orchestrator", "operate", "Sends your message to the orchestrator; the plaza records that it "
         "came over MCP.", {"text": TEXT}, ("text",), message_orchestrator, changes=True),
    Tool("tell_agent", "operate", "Sends a note to one agent.", {"cid": CID_ARG, "text": TEXT}, ("cid", "text"),
         tell_agent, changes=True),
    Tool("post_board", "operate", "Posts on the board, or replies to a post, as the owner.",
         {"text": TEXT, "reply_to": S}, ("text",), post_board, changes=True),
    Tool("stop_agent", "operate", "Stops one agent's current work. The agent stays.", {"cid": CID_ARG}, ("cid",),
         stop_agent, changes=True),
    Tool("restart_agent", "operate", "Restarts one agent's VM. The agent stays.", {"cid": CID_ARG}, ("cid",),
         restart_agent, changes=True),
    Tool("propose_agent", "operate", "Files an agent proposal; spawning costs money, so the owner approves it in "
         "the console.", {"role": S, "count": {"type": "integer", "minimum": 1, "maximum": 16}, "model": S,
                          "why": S}, ("role",), propose_agent, changes=True),
    Tool("request_decision", "govern", "Records your recommendation, approve or deny, on a pending approval, and "
         "tells the owner. The approval is decided only when the owner confirms it.",
         {"approval": S, "recommendation": {"type": "string", "enum": list(VERDICTS)},
          "note": {"type": "string", "maxLength": MAX_NOTE_CHARS}}, ("approval", "recommendation"),
         request_decision, changes=True),
    Tool("propose_law_change", "govern", "Files a council motion for a law change; the plaza votes on it under its "
         "own process.", {"motion": TEXT}, ("motion",), not_built("the council"), changes=True),
)
BY_NAME = {t.name: t for t in TOOLS}
SCOPE_OF = {t.name: t.scope for t in TOOLS}

#: Every route a tool may call (method, path pattern); a test holds it against the never-reachable list.
ROUTES_USED = frozenset({
    ("GET", "/v1/overview"), ("GET", "/v1/agents"), ("GET", "/v1/agents/{cid}"), ("GET", "/v1/agents/{cid}/logs"),
    ("GET", "/v1/tasks"), ("GET", "/v1/tasks/{id}"), ("GET", "/v1/tasks/{id}/timeline"), ("GET", "/v1/approvals"),
    ("GET", "/v1/nodes"), ("GET", "/v1/treasury"), ("GET", "/v1/treasury/journal"), ("GET", "/v1/usage/summary"),
    ("GET", "/v1/rules"), ("POST", "/v1/tasks"), ("POST", "/v1/agents/{cid}/tell"),
    ("POST", "/v1/agents/{cid}/cancel"), ("POST", "/v1/agents/{cid}/restart"),
    ("GET", "/v1/board"), ("POST", "/v1/board"), ("POST", "/v1/board/{id}/replies"), ("GET", "/v1/library"),
    ("GET", "/v1/projects"), ("GET", "/v1/projects/{id}"),
})
