"""/v1/unfurl?target=...: the preview card for a task (#N), an agent (@Name), an approval, a plaza
link, a GitHub link or a plain link.

A card is ``{"target", "kind", "label", "title", "state", "author", "excerpt", "url", "fields"}``,
and for a fetched link ``reachable`` and, when it is not, ``why``. A plaza thing is read from the
read models; a link to the hub itself is read the same way, never fetched; any other link is
fetched by ``runtime/linkfetch.py`` under the agents' host rules (the route is owner-only, like
every /v1 route, so only the owner can make the hub fetch).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio
from starlette.requests import Request
from starlette.routing import Route

from ...domain import unfurl as targets
from ...domain.base import Refusal
from ...projections import agents as agents_rm
from ...projections import work as work_rm
from ...runtime import linkfetch
from ..kit import Api, api_of, endpoint
from .gateway import gateway_of

#: The hub's own paths a plaza link may name, each with the kind of thing behind it.
PLAZA_PATHS = {"tasks": targets.TASK, "agents": targets.AGENT, "approvals": targets.APPROVAL}


def _card(target: str, kind: str, label: str, title: str | None, url: str | None, **more) -> dict:
    card = {"target": target, "kind": kind, "label": label, "title": title, "state": None, "author": None,
            "excerpt": None, "url": url, "fields": {}}
    card.update(more)
    return card


def task_card(api: Api, target: str, number: str) -> dict:
    t = work_rm.task_row(api.hub.read_models, number)
    n = number[1:]
    assignee = t["worker"]
    return _card(target, targets.TASK, f"#{n}", t["title"], f"{_base(api)}/v1/tasks/{number}",
                 state=t["state"], author=t["created_by"],
                 excerpt=f"{t['state']}" + (f", assigned to {assignee}" if assignee else ", not assigned"),
                 fields={"number": number, "status": t["state"], "assignee": assignee, "role": t["role"],
                         "budget": t["budget"]})


def _agent_row(api: Api, ref: str) -> dict:
    rows = agents_rm.roster(api.hub.read_models)
    hit = [r for r in rows if str(r["cid"]) == ref] or [r for r in rows if (r["name"] or "").casefold() == ref.casefold()]
    if not hit:
        raise Refusal("unknown_agent", f"no agent {ref!r}; see agentplaza agents list")
    return hit[0]


def agent_card(api: Api, target: str, ref: str) -> dict:
    a = _agent_row(api, ref)
    name = a["name"] or str(a["cid"])
    return _card(target, targets.AGENT, f"@{name}", name, f"{_base(api)}/v1/agents/{a['cid']}",
                 state=a["status"], excerpt=f"{a['role']}, {a['status']}, thinks with {a['resolved_model']}",
                 fields={"cid": a["cid"], "role": a["role"], "status": a["status"], "model": a["resolved_model"],
                         "model_source": a["model_source"], "working_on": a["working_on"]})


def approval_card(api: Api, target: str, number: str) -> dict:
    a = work_rm.approval_row(api.hub.read_models, number)
    return _card(target, targets.APPROVAL, number, a["title"], f"{_base(api)}/v1/approvals/{number}",
                 state=a["status"], author=a["requested_by"], excerpt=f"{a['kind']}, {a['status']}",
                 fields={"number": number, "kind": a["kind"], "status": a["status"], "agent": a["agent"]})


def _base(api: Api) -> str:
    return (api.hub.address or "").rstrip("/")


def _own_netlocs(api: Api, request: Request) -> set[str]:
    own = {request.url.netloc.lower()}
    if api.hub.address:
        own.add(urlsplit(api.hub.address).netloc.lower())
    return own


def plaza_card(api: Api, target: str, path: str) -> dict:
    """A link to the hub itself: the thing it names, read from the read models (never fetched)."""
    parts = [p for p in path.split("/") if p]
    if parts and parts[0] == "v1":
        parts = parts[1:]
    if len(parts) == 2 and parts[0] in PLAZA_PATHS:
        kind, ref = PLAZA_PATHS[parts[0]], parts[1]
        found = targets.target({targets.TASK: f"task {ref}", targets.AGENT: f"@{ref}",
                                targets.APPROVAL: ref}[kind])
        if found.kind == kind:
            return thing_card(api, target, found)
    return _card(target, "plaza", path or "/", f"the plaza's page {path or '/'}", target)


def thing_card(api: Api, target: str, t: targets.Target) -> dict:
    if t.kind == targets.TASK:
        return task_card(api, target, t.ref)
    if t.kind == targets.AGENT:
        return agent_card(api, target, t.ref)
    return approval_card(api, target, t.ref)


def link_card(api: Api, target: str) -> dict:
    blocklist = gateway_of(api).policy().get("fetch_blocklist") or ()
    page = linkfetch.fetch(target, linkfetch.Rules.from_env(), blocklist)
    gh = targets.github(target)
    kind, label = gh if gh else ("link", urlsplit(target).hostname or target)
    card = _card(target, kind, label, page.title or (label if gh else None), page.url if page.reachable else target,
                 excerpt=page.excerpt, reachable=page.reachable)
    if page.status is not None:
        card["fields"]["status"] = page.status
    if not page.reachable:
        card["why"] = page.why
        card["state"] = "not reachable"
    return card


@endpoint
async def unfurl(request: Request) -> dict:
    api = api_of(request)
    raw = request.query_params.get("target")
    t = targets.target(raw)
    if t.kind != targets.LINK:
        return await api.query(thing_card, api, raw.strip(), t)
    parts = urlsplit(t.ref)
    if parts.netloc.lower() in _own_netlocs(api, request):
        return await api.query(plaza_card, api, t.ref, parts.path)
    return await anyio.to_thread.run_sync(link_card, api, t.ref)


ROUTES = [
    Route("/v1/unfurl", unfurl),
]
