"""/v1/rules: the laws, the owner's rules, explain, check, infractions, and a decision on a call.

POST /v1/rules/decide is the entry the agent harness uses for every tool call: it decides the
call against the laws in force and records the decision as an event (``ToolCall.CallDecided``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import jhrl
from jhrl.catalog import TOOLS, tier_of

from ...commands import laws as law_commands
from ...commands.unit import Done
from ...domain.laws import (
    JhrlRefusal,
    all_laws,
    call_from_event,
    owner_rule_of,
    warnings_of,
)
from ...projections import laws as rm
from ..errors import ApiError, Body, read_body, status_of
from ..hub import Hub
from ..kit import MAX_LIST_LIMIT, Api, api_of
from ..kit import endpoint as kit_endpoint

#: Changed decisions a check lists in full (it always counts them all).
MAX_CHECK_CHANGES_SHOWN = 200
#: The kind of a decision event, as the log names it.
DECIDED_KIND = "ToolCall.CallDecided"
CHANGES = ("add", "replace", "disable", "enable", "delete")


class CallBody(Body):
    role: str
    tool: str
    risk: str | None = None  # default: the tool's risk class in the catalogue, else write
    tier: str | None = None  # default: the role's tier
    mode: str = "autonomous"
    args: dict[str, Any] = {}
    approved: bool = False


class DecideBody(CallBody):
    agent: str


class AddBody(Body):
    title: str
    source: str


class DisableBody(Body):
    reason: str | None = None


class CheckBody(Body):
    op: str = "add"
    id: str | None = None
    title: str | None = None
    source: str | None = None
    reason: str | None = None
    all: bool = False


def make_call(body: CallBody) -> jhrl.Call:
    try:
        return jhrl.Call(role=body.role, action=body.tool, risk=body.risk or TOOLS.get(body.tool, "write"),
                         tier=body.tier or tier_of(body.role), mode=body.mode, args=dict(body.args),
                         approved=body.approved)
    except ValueError as e:
        raise ApiError("invalid_request", str(e)) from None


def decision_view(d: jhrl.Decision) -> dict:
    return {"effect": d.effect, "reason": d.reason, "matched": list(d.matched), "forbidding": d.forbidding,
            "violation": d.violation, "recorded": list(d.recorded), "permits": list(d.permits), "asks": list(d.asks)}


def explanation_view(x: jhrl.Explanation) -> dict:
    return {
        "decision": decision_view(x.decision), "summary": x.summary,
        "forbids": [{"law": i, "title": t} for i, t in x.forbids],
        "permits": [{"law": n.law_id, "title": n.title, "matched": n.matched, "failed": list(n.failed)}
                    for n in x.permits],
        "lines": x.lines(),
    }


def law_view(law: jhrl.Law) -> dict:
    return {"id": law.id, "title": law.title, "statement": law.statement, "severity": law.severity,
            "tier": law.tier, "enforcement": law.enforcement, "effect": law.effect, "actions": list(law.actions),
            "text": jhrl.print_law(law)}


def jhrl_refusal_response(r: JhrlRefusal) -> JSONResponse:
    return JSONResponse({"error": {"code": r.code, "message": r.message, "line": r.line, "column": r.column}},
                        status_code=status_of(r))


# -- the views: the law book in force beside the read models' counts ------------------------------


def list_view(hub: Hub) -> dict:
    book = law_commands.book_in_force(hub.commands)
    counts = rm.counts_by_law(hub.read_models)
    laws = []
    for row in jhrl.laws_overview(book):
        c = counts.get(row["id"], {})
        laws.append({**row, "refused": c.get("refused", 0), "recorded": c.get("recorded", 0),
                     "last_at": c.get("last_at")})
    rules = [{"id": r.id, "title": r.title, "enabled": r.enabled, "laws": [law.id for law in r.laws]}
             for r in book.rules()]
    return {"laws": laws, "rules": rules, "disabled": book.disabled_statutes(), "totals": rm.totals(hub.read_models)}


def show_view(hub: Hub, ident: str) -> dict:
    book = law_commands.book_in_force(hub.commands)
    counts = rm.counts_by_law(hub.read_models)
    if any(r.id == ident for r in book.rules()):
        rule = book.rule(ident)
        return {"id": rule.id, "kind": "rule", "title": rule.title, "enabled": rule.enabled, "source": rule.source,
                "laws": [{**law_view(law), "refused": counts.get(law.id, {}).get("refused", 0)} for law in rule.laws]}
    for law in all_laws(book):
        if law.id == ident:
            rid = owner_rule_of(book, ident)
            off = book.disabled_statutes()
            enabled = book.rule(rid).enabled if rid else ident not in off
            c = counts.get(ident, {})
            return {**law_view(law), "kind": "law", "origin": rid or "builtin", "enabled": enabled,
                    "reason": off.get(ident), "refused": c.get("refused", 0), "recorded": c.get("recorded", 0),
                    "last_at": c.get("last_at")}
    raise ApiError("rule_not_found", f"no law or owner rule {ident!r}")


def _history(hub: Hub):
    for rec in hub.store.read():
        if rec.kind == DECIDED_KIND:
            yield {"position": rec.position, "at": rec.at, "agent": rec.data["agent"], "call_id": rec.originator_id,
                   **{k: rec.data[k] for k in ("role", "tier", "mode", "tool", "risk", "args", "approved",
                                                "decision", "why")}}


def check_view(hub: Hub, body: CheckBody) -> dict:
    book, draft = law_commands.draft(hub.commands, body.op, rule_id=body.id, title=body.title,
                                     source=body.source, reason=body.reason)
    rows = list(_history(hub)) if body.all else rm.recent(hub.read_models)
    calls = [call_from_event(r) for r in rows]
    report = book.check_all(draft, calls)
    changes = []
    for ch in report.changes[:MAX_CHECK_CHANGES_SHOWN]:
        r = rows[ch.index]
        changes.append({"position": r["position"], "at": r["at"], "agent": r["agent"], "role": r["role"],
                        "tool": r["tool"], "risk": r["risk"], "decided": r["decision"], "before": decision_view(ch.before),
                        "after": decision_view(ch.after)})
    return {"replayed": report.replayed, "window": "all" if body.all else rm.RECENT_CALLS,
            "changed": len(report.changes), "newly_refused": len(report.newly_refused),
            "newly_allowed": len(report.newly_allowed), "changes": changes, "warnings": warnings_of(draft)}


def endpoint(fn: Callable) -> Callable:
    """``kit.endpoint``, with a law's syntax refusal answered with its line and column."""
    async def guarded(request: Request) -> Any:
        try:
            return await fn(request)
        except JhrlRefusal as r:
            return jhrl_refusal_response(r)

    guarded.__name__ = fn.__name__
    guarded.__doc__ = fn.__doc__
    return kit_endpoint(guarded)


@endpoint
async def listing(request: Request) -> dict:
    api = api_of(request)
    return await api.query(list_view, api.hub)


@endpoint
async def show(request: Request) -> dict:
    api = api_of(request)
    return await api.query(show_view, api.hub, request.path_params["ident"])


@endpoint
async def explain(request: Request) -> dict:
    api = api_of(request)
    call = make_call(await read_body(request, CallBody))
    book = await api.query(law_commands.book_in_force, api.hub.commands)
    return explanation_view(jhrl.explain(book.lawset, call))


@endpoint
async def list_infractions(request: Request) -> dict:
    api = api_of(request)
    limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
    return {"infractions": await api.query(rm.infraction_rows, api.hub.read_models, limit)}


@endpoint
async def check(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, CheckBody)
    if body.op not in CHANGES:
        raise ApiError("invalid_request", f"op must be one of {', '.join(CHANGES)}")
    return await api.query(check_view, api.hub, body)


async def committed(api: Api, fn: Callable[[], Done]) -> Done:
    """Run a command; once the read models show it, its value and positions (the answer names one)."""
    done = await api.query(fn)
    await api.command(lambda: done)
    return done


async def change(request: Request, op: str, reason: str | None = None, **fields: Any) -> dict:
    api = api_of(request)
    ctx = api.context(request, reason)
    done = await committed(api, lambda: law_commands.change(api.hub.commands, ctx, op, **fields))
    draft, positions = done.value, done.positions
    return {"id": draft.rule_id or fields.get("rule_id"), "done": op, "warnings": warnings_of(draft),
            "position": positions[-1] if positions else None}


@endpoint
async def add(request: Request) -> JSONResponse:
    body = await read_body(request, AddBody)
    return JSONResponse(await change(request, "add", title=body.title, source=body.source), status_code=201)


@endpoint
async def replace(request: Request) -> dict:
    body = await read_body(request, AddBody)
    return await change(request, "replace", rule_id=request.path_params["ident"], title=body.title,
                        source=body.source)


@endpoint
async def disable(request: Request) -> dict:
    body = await read_body(request, DisableBody)
    return await change(request, "disable", body.reason, rule_id=request.path_params["ident"])


@endpoint
async def enable(request: Request) -> dict:
    await read_body(request, DisableBody)
    return await change(request, "enable", rule_id=request.path_params["ident"])


@endpoint
async def delete(request: Request) -> dict:
    return await change(request, "delete", rule_id=request.path_params["ident"])


@endpoint
async def decide(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, DecideBody)
    call = make_call(body)
    ctx = api.context(request)
    done = await committed(api, lambda: law_commands.decide_call(api.hub.commands, call, body.agent, ctx))
    d = done.value
    return {"decision": decision_view(d.decision), "digest": d.digest, "call_id": d.call_id,
            "position": done.positions[-1], "lawbook_version": d.lawbook_version}


ROUTES = [
    Route("/v1/rules", listing),
    Route("/v1/rules", add, methods=["POST"]),
    Route("/v1/rules/infractions", list_infractions),
    Route("/v1/rules/explain", explain, methods=["POST"]),
    Route("/v1/rules/check", check, methods=["POST"]),
    Route("/v1/rules/decide", decide, methods=["POST"]),
    Route("/v1/rules/{ident}", show),
    Route("/v1/rules/{ident}", replace, methods=["PUT"]),
    Route("/v1/rules/{ident}", delete, methods=["DELETE"]),
    Route("/v1/rules/{ident}/disable", disable, methods=["POST"]),
    Route("/v1/rules/{ident}/enable", enable, methods=["POST"]),
]
