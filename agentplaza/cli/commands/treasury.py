"""agentplaza treasury balances | wallets | journal | flows | series | explain | mint | fine | payments."""

from __future__ import annotations

import json

from ..env import Env
from ..output import pairs, table

NAME = "treasury"
KINDS = ("Mint", "Subcontract", "Spend", "Model call", "Payment", "Refund", "Fine", "Transfer", "Bonus")


def register(sub) -> None:
    p = sub.add_parser(NAME, help="balances, wallets and the journal; mint into the budget, fine an agent")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("balances", help="the plaza budget, the treasury, what is in circulation")
    w = s.add_parser("wallets", help="one row per agent: name, role, balance, earned, spent, share")
    w.add_argument("--sort", default="balance", choices=["balance", "earned", "spent", "name", "role", "cid"])
    w.add_argument("--asc", action="store_true", help="smallest first")
    j = s.add_parser("journal", help="every entry, newest first")
    j.add_argument("--kind", choices=KINDS, help="only this kind of entry")
    j.add_argument("--wallet", metavar="CID", help="only entries concerning this agent's wallet")
    j.add_argument("--task", help="only entries of this task")
    j.add_argument("--limit", type=int, default=50)
    j.add_argument("--before", type=int, help="older than this position (load older entries)")
    m = s.add_parser("mint", help="mint whole credits into the plaza budget")
    m.add_argument("amount", type=int, metavar="N")
    m.add_argument("--memo")
    f = s.add_parser("fine", help="fine an agent: credits from its wallet to the plaza's treasury")
    f.add_argument("cid", metavar="CID")
    f.add_argument("amount", type=int, metavar="AMOUNT")
    f.add_argument("--memo", required=True, help="what the fine is for")
    e = s.add_parser("explain", help="the postings that make up an account's balance")
    e.add_argument("account", metavar="ACCOUNT", help="budget, treasury, mint, model-costs, wallet:CID, escrow:TASK or a CID")
    e.add_argument("--limit", type=int, default=100)
    e.add_argument("--before", type=int)
    fl = s.add_parser("flows", help="Minted, Escrowed, Paid, Refunded, Fined, Spent and In circulation over a range")
    fl.add_argument("--from", dest="start")
    fl.add_argument("--to", dest="end")
    se = s.add_parser("series", help="balances and flows by hour or by day")
    se.add_argument("--by", choices=["hour", "day"], default="day")
    se.add_argument("--from", dest="start")
    se.add_argument("--to", dest="end")
    pa = s.add_parser("payments", help="payments above approve_over waiting for you")
    pa.add_argument("--status", choices=["pending", "approved", "denied", "all"], default="pending")


def render_balances(b: dict) -> str:
    return pairs({
        "plaza budget": f"{b['budget']} credits ({b['budget_usd']})",
        "treasury (fines)": b["treasury"],
        "in wallets": b["wallets"],
        "in escrows": b["escrows"],
        "in circulation": b["in_circulation"],
        "model costs": b["model_costs"],
        "minted": b["minted"],
    })


def postings_text(p: dict) -> str:
    return " ".join(f"{k}{'+' if v > 0 else ''}{v}" for k, v in p.items()) or "(nothing moved)"


def render_journal(d: dict) -> str:
    rows = [{
        "position": e["position"], "at": e["at"][:19], "kind": e["kind"], "amount": e["amount"],
        "postings": postings_text(e["postings"]), "task": e["task"],
        "memo": e["memo"] + (f" [shortfall {e['shortfall']}]" if e["shortfall"] else "")
        + (f" [not collected {e['uncollected']}]" if e["uncollected"] else ""),
    } for e in d["entries"]]
    out = table(rows)
    if d.get("older"):
        out += f"\n(older: --before {d['older']})"
    return out


def render_explain(d: dict) -> str:
    head = pairs({"account": d["account"], "balance": d["balance"], "postings": d["postings_count"],
                  "credited": d["earned"], "debited": d["spent"]})
    rows = [{"position": p["position"], "at": p["at"][:19], "kind": p["kind"], "amount": p["amount"],
             "balance": p["balance_after"], "task": p["task"], "memo": p["memo"]} for p in d["postings"]]
    shown = sum(p["amount"] for p in d["postings"])
    tail = "" if len(d["postings"]) == d["postings_count"] else \
        f"\n({len(d['postings'])} of {d['postings_count']} postings shown; these sum to {shown})"
    return head + "\n\n" + table(rows) + tail


def render_entry(d: dict) -> str:
    lines = [f"{e['kind']}: {postings_text(e['postings'])}  {e['memo']}" for e in d["entries"]]
    if "levied" in d:
        lines.append(f"levied {d['levied']}, collected {d['collected']}, not collected {d['uncollected']}")
    return "\n".join(lines) or json.dumps(d)


def run(env: Env) -> int:
    args, c = env.args, env.client
    a = args.action
    if a in (None, "balances"):
        return env.show(c.get("/v1/treasury/balances"), render_balances)
    if a == "wallets":
        return env.show(c.get("/v1/treasury/wallets", sort=args.sort, order="asc" if args.asc else "desc"),
                        lambda d: table(d["wallets"], ["cid", "name", "role", "balance", "earned", "spent", "share"]))
    if a == "journal":
        return env.show(c.get("/v1/treasury/journal", kind=args.kind, wallet=args.wallet, task=args.task,
                              limit=args.limit, before=args.before), render_journal)
    if a == "mint":
        body = {"amount": args.amount, **({"memo": args.memo} if args.memo else {})}
        return env.show(c.post("/v1/treasury/mint", body),
                        lambda d: render_entry(d) + "\n\n" + render_balances(d["balances"]))
    if a == "fine":
        return env.show(c.post("/v1/treasury/fines", {"cid": args.cid, "amount": args.amount, "memo": args.memo}),
                        render_entry)
    if a == "explain":
        return env.show(c.request("GET", f"/v1/treasury/accounts/{args.account}/explain",
                                  params={k: v for k, v in {"limit": args.limit, "before": args.before}.items() if v is not None}),
                        render_explain)
    if a == "flows":
        return env.show(c.get("/v1/treasury/flows", **{"from": args.start, "to": args.end}),
                        lambda d: pairs({"Minted": d["flows"]["minted"], "Escrowed": d["flows"]["escrowed"],
                                         "Paid": d["flows"]["paid"], "Refunded": d["flows"]["refunded"],
                                         "Fined": d["flows"]["fined"], "Spent": d["flows"]["spent"],
                                         "In circulation": d["flows"]["in_circulation"],
                                         "(Model calls)": d["flows"]["model_calls"]}))
    if a == "series":
        return env.show(c.get("/v1/treasury/series", by=args.by, **{"from": args.start, "to": args.end}),
                        lambda d: table(d["series"]))
    return env.show(c.get("/v1/treasury/payments", status=args.status), lambda d: table(
        d["payments"], ["id", "payer", "payee", "amount", "memo", "task", "status", "held_at"]))
