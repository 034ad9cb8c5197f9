"""agentplaza rules list | show ID | explain | infractions | check | add | disable | enable | rm."""

from __future__ import annotations

import sys
from urllib.parse import quote

from ..env import Env
from ..output import pairs, refuse, table
from .plaza import confirm

NAME = "rules"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="the laws and your rules: list, show, explain, infractions, check, add ...")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("list", help="every law, built-in and yours, with how often each refused a call")
    show = s.add_parser("show", help="one law (C-002a, S-006d, your law's id) or one of your rules (R3)")
    show.add_argument("id")
    ex = s.add_parser("explain", help="why a call would be allowed, held or refused (and why not)")
    ex.add_argument("--role", required=True)
    ex.add_argument("--tool", required=True)
    ex.add_argument("--risk", choices=("read", "write", "irreversible"), help="default: the tool's own")
    ex.add_argument("--tier", choices=("orchestrator", "worker"), help="default: the role's")
    ex.add_argument("--mode", choices=("autonomous", "ask", "read-only"), default="autonomous")
    ex.add_argument("--arg", action="append", default=[], metavar="K=V",
                    help="one argument of the call (true/false and whole numbers are read as such)")
    ex.add_argument("--approved", action="store_true", help="as if the owner approved this exact call")
    inf = s.add_parser("infractions", help="the latest acts a law stopped or recorded, newest first")
    inf.add_argument("--limit", type=int, default=20)
    chk = s.add_parser("check", help="which recent decisions a change would change (nothing is saved)")
    what = chk.add_mutually_exclusive_group()
    what.add_argument("--file", help="a rule to add, in JHRL (default: read it from stdin)")
    what.add_argument("--disable", metavar="ID", help="check disabling a rule or a statute")
    what.add_argument("--enable", metavar="ID", help="check enabling a rule or a statute")
    what.add_argument("--rm", metavar="ID", help="check deleting a rule")
    chk.add_argument("--replace", metavar="ID", help="with --file: check replacing rule ID's source")
    chk.add_argument("--title", default="draft", help="the draft rule's title")
    chk.add_argument("--reason", help="with --disable of a statute")
    chk.add_argument("--all", action="store_true", help="replay the whole history, not only the last 500 calls")
    add = s.add_parser("add", help="add a rule: a title and its JHRL source (from --file or stdin)")
    add.add_argument("--title", required=True)
    add.add_argument("--file", help="the JHRL source (default: stdin)")
    dis = s.add_parser("disable", help="disable a rule, or a built-in statute (needs --reason)")
    dis.add_argument("id")
    dis.add_argument("--reason", help="why (required for a built-in statute; kept beside it)")
    en = s.add_parser("enable", help="enable a rule or a statute again")
    en.add_argument("id")
    rm = s.add_parser("rm", help="delete one of your rules")
    rm.add_argument("id")
    rm.add_argument("--yes", action="store_true", help="do not ask to confirm")


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


def run(env: Env) -> int:
    args, c = env.args, env.client
    action = args.action or "list"
    if action == "list":
        return env.show(c.get("/v1/rules"), render_list)
    if action == "show":
        return env.show(c.get(f"/v1/rules/{quote(args.id, safe='')}"), render_show)
    if action == "explain":
        try:
            call_args = _args(args.arg)
        except ValueError as e:
            return refuse(str(e), "invalid_request")
        body = {"role": args.role, "tool": args.tool, "mode": args.mode, "args": call_args, "approved": args.approved}
        if args.risk:
            body["risk"] = args.risk
        if args.tier:
            body["tier"] = args.tier
        return env.show(c.post("/v1/rules/explain", body), lambda d: "\n".join(d["lines"]))
    if action == "infractions":
        return env.show(c.get("/v1/rules/infractions", limit=args.limit),
                        lambda d: table(d["infractions"], ["position", "at", "agent", "role", "tool", "law_id",
                                                           "severity", "enforcement", "decision"]))
    if action == "check":
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
        return env.show(c.post("/v1/rules/check", body), render_check)
    if action == "add":
        return env.show(c.post("/v1/rules", {"title": args.title, "source": _source(args.file)}), render_saved)
    if action == "disable":
        return env.show(c.post(f"/v1/rules/{quote(args.id, safe='')}/disable", {"reason": args.reason} if args.reason else {}),
                        render_saved)
    if action == "enable":
        return env.show(c.post(f"/v1/rules/{quote(args.id, safe='')}/enable"), render_saved)
    if action == "rm":
        if not args.yes and not confirm(f"Delete rule {args.id}?"):
            return refuse(f"rules rm {args.id} not confirmed; pass --yes to skip the question", "not_confirmed")
        return env.show(c.request("DELETE", f"/v1/rules/{quote(args.id, safe='')}"), render_saved)
    return refuse(f"unknown rules action {action}")

