"""agentplaza rules list | show ID | explain | infractions | check | add | disable | enable | rm."""

from __future__ import annotations

import sys
from urllib.parse import quote

from ...wire import AGENT_TIERS, PERMISSION_MODES, RISKS
from ..actions import YES, Action, Area, arg, confirm, one_of
from ..env import Env
from ..output import pairs, refuse, table

INFRACTION_COLUMNS = ["position", "at", "agent", "role", "tool", "law_id", "severity", "enforcement", "decision"]
ID = arg("id")

def _value(text: str):
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def _args(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--arg takes K=V, not {item!r}")
        out[key] = _value(value)
    return out


def _source(path: str | None) -> str:
    if path and path != "-":
        with open(path, encoding="utf-8") as f:
            return f.read()
    return sys.stdin.read()


def render_list(d: dict) -> str:
    rows = [{"id": r["id"], "title": r["title"], "origin": r["origin"], "effect": r["effect"],
             "severity": r["severity"], "enabled": r["enabled"], "refused": r["refused"],
             "recorded": r["recorded"], "reason": r["reason"]} for r in d["laws"]]
    t = d["totals"]
    foot = (f"\n{len(d['laws'])} laws, {len(d['rules'])} owner rules; {t['calls']} calls decided: "
            f"{t['allowed']} allowed, {t['refused']} refused ({t['default_deny']} by default deny), "
            f"{t['held']} held, {t['violations']} violations")
    return table(rows) + foot


def render_show(d: dict) -> str:
    if d["kind"] == "rule":
        head = pairs({"rule": d["id"], "title": d["title"], "enabled": d["enabled"],
                      "laws": ", ".join(law["id"] for law in d["laws"])})
        return head + "\n\n" + d["source"].rstrip()
    head = pairs({"law": d["id"], "title": d["title"], "origin": d["origin"], "enabled": d["enabled"],
                  "reason": d["reason"], "refused": d["refused"], "recorded": d["recorded"]})
    return head + "\n\n" + d["text"]


def render_check(d: dict) -> str:
    lines = [f"replayed {d['replayed']} calls ({'the whole history' if d['window'] == 'all' else 'the last ' + str(d['window'])}): "
             f"{d['changed']} would change, {d['newly_refused']} newly refused, {d['newly_allowed']} newly allowed"]
    if d["changes"]:
        lines.append(table([{"position": c["position"], "at": c["at"], "agent": c["agent"], "role": c["role"],
                             "tool": c["tool"], "now": f"{c['before']['effect']} ({c['before']['reason']})",
                             "after": f"{c['after']['effect']} ({c['after']['reason']})"} for c in d["changes"]]))
    lines += [f"warning: {w['message']} ({w['code']})" for w in d["warnings"]]
    return "\n".join(lines)


def render_saved(d: dict) -> str:
    lines = [f"{d['done']}: {d['id']}"]
    lines += [f"warning: {w['message']} ({w['code']})" for w in d["warnings"]]
    return "\n".join(lines)


def path_of(ident: str, tail: str = "") -> str:
    """A law's or a rule's route: its id is quoted whole (a law id may hold any character)."""
    return f"/v1/rules/{quote(ident, safe='')}{tail}"


def show(env: Env) -> int:
    return env.show(env.client.get(path_of(env.args.id)), render_show)


def explain(env: Env) -> int:
    args = env.args
    try:
        call_args = _args(args.arg)
    except ValueError as e:
        return refuse(str(e), "invalid_request")
    body = {"role": args.role, "tool": args.tool, "mode": args.mode, "args": call_args, "approved": args.approved}
    if args.risk:
        body["risk"] = args.risk
    if args.tier:
        body["tier"] = args.tier
    return env.show(env.client.post("/v1/rules/explain", body), lambda d: "\n".join(d["lines"]))


def check(env: Env) -> int:
    args = env.args
    body: dict = {"all": args.all}
    for op in ("disable", "enable", "rm"):
        if getattr(args, op):
            body.update(op="delete" if op == "rm" else op, id=getattr(args, op))
            if args.reason:
                body["reason"] = args.reason
            break
    else:
        body.update(op="replace" if args.replace else "add", title=args.title, source=_source(args.file))
        if args.replace:
            body["id"] = args.replace
    return env.show(env.client.post("/v1/rules/check", body), render_check)


def add(env: Env) -> int:
    return env.show(env.client.post("/v1/rules", {"title": env.args.title, "source": _source(env.args.file)}),
                    render_saved)


def disable(env: Env) -> int:
    body = {"reason": env.args.reason} if env.args.reason else {}
    return env.show(env.client.post(path_of(env.args.id, "/disable"), body), render_saved)


def enable(env: Env) -> int:
    return env.show(env.client.post(path_of(env.args.id, "/enable")), render_saved)


def rm(env: Env) -> int:
    """It asks itself (not through the action's ``confirm``): its refusal names the rule."""
    args = env.args
    if not args.yes and not confirm(f"Delete rule {args.id}?"):
        return refuse(f"rules rm {args.id} not confirmed; pass --yes to skip the question", "not_confirmed")
    return env.show(env.client.request("DELETE", path_of(args.id)), render_saved)


AREA = Area("rules", "the laws and your rules: list, show, explain, infractions, check, add ...", (
    Action("list", "every law, built-in and yours, with how often each refused a call", "GET", "/v1/rules",
           render=render_list, default=True),
    Action("show", "one law (C-002a, S-006d, your law's id) or one of your rules (R3)", args=(ID,), run=show),
    Action("explain", "why a call would be allowed, held or refused (and why not)", run=explain, args=(
        arg("--role", required=True),
        arg("--tool", required=True),
        arg("--risk", choices=RISKS, help="default: the tool's own"),
        arg("--tier", choices=AGENT_TIERS, help="default: the role's"),
        arg("--mode", choices=PERMISSION_MODES, default="autonomous"),
        arg("--arg", action="append", default=[], metavar="K=V",
            help="one argument of the call (true/false and whole numbers are read as such)"),
        arg("--approved", action="store_true", help="as if the owner approved this exact call"))),
    Action("infractions", "the latest acts a law stopped or recorded, newest first", "GET",
           "/v1/rules/infractions", args=(arg("--limit", type=int, default=20),),
           query=lambda a: {"limit": a.limit}, render=lambda d: table(d["infractions"], INFRACTION_COLUMNS)),
    Action("check", "which recent decisions a change would change (nothing is saved)", run=check, args=(
        one_of(arg("--file", help="a rule to add, in JHRL (default: read it from stdin)"),
               arg("--disable", metavar="ID", help="check disabling a rule or a statute"),
               arg("--enable", metavar="ID", help="check enabling a rule or a statute"),
               arg("--rm", metavar="ID", help="check deleting a rule")),
        arg("--replace", metavar="ID", help="with --file: check replacing rule ID's source"),
        arg("--title", default="draft", help="the draft rule's title"),
        arg("--reason", help="with --disable of a statute"),
        arg("--all", action="store_true", help="replay the whole history, not only the last 500 calls"))),
    Action("add", "add a rule: a title and its JHRL source (from --file or stdin)", run=add,
           args=(arg("--title", required=True), arg("--file", help="the JHRL source (default: stdin)"))),
    Action("disable", "disable a rule, or a built-in statute (needs --reason)", run=disable,
           args=(ID, arg("--reason", help="why (required for a built-in statute; kept beside it)"))),
    Action("enable", "enable a rule or a statute again", args=(ID,), run=enable),
    Action("rm", "delete one of your rules", args=(ID, YES), run=rm),
))
