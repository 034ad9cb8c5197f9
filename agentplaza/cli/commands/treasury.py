"""agentplaza treasury balances | wallets | journal | flows | series | explain | mint | fine | payments."""

from __future__ import annotations

import json

from ...wire import JOURNAL_KINDS, PAYMENT_STATUSES, WALLET_SORTS
from ..actions import Action, Area, arg
from ..output import pairs, table

WALLET_COLUMNS = ["cid", "name", "role", "balance", "earned", "spent", "share"]
PAYMENT_COLUMNS = ["id", "payer", "payee", "amount", "memo", "task", "status", "held_at"]


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


def render_minted(d: dict) -> str:
    return render_entry(d) + "\n\n" + render_balances(d["balances"])


def render_flows(d: dict) -> str:
    f = d["flows"]
    return pairs({"Minted": f["minted"], "Escrowed": f["escrowed"], "Paid": f["paid"], "Refunded": f["refunded"],
                  "Fined": f["fined"], "Spent": f["spent"], "In circulation": f["in_circulation"],
                  "(Model calls)": f["model_calls"]})


RANGE = (arg("--from", dest="start"), arg("--to", dest="end"))

AREA = Area("treasury", "balances, wallets and the journal; mint into the budget, fine an agent", (
    Action("balances", "the plaza budget, the treasury, what is in circulation", "GET", "/v1/treasury/balances",
           render=render_balances, default=True),
    Action("wallets", "one row per agent: name, role, balance, earned, spent, share", "GET", "/v1/treasury/wallets",
           args=(arg("--sort", default="balance", choices=list(WALLET_SORTS)),
                 arg("--asc", action="store_true", help="smallest first")),
           query=lambda a: {"sort": a.sort, "order": "asc" if a.asc else "desc"},
           render=lambda d: table(d["wallets"], WALLET_COLUMNS)),
    Action("journal", "every entry, newest first", "GET", "/v1/treasury/journal",
           args=(arg("--kind", choices=JOURNAL_KINDS, help="only this kind of entry"),
                 arg("--wallet", metavar="CID", help="only entries concerning this agent's wallet"),
                 arg("--task", help="only entries of this task"),
                 arg("--limit", type=int, default=50),
                 arg("--before", type=int, help="older than this position (load older entries)")),
           query=lambda a: {"kind": a.kind, "wallet": a.wallet, "task": a.task, "limit": a.limit,
                            "before": a.before},
           render=render_journal),
    Action("mint", "mint whole credits into the plaza budget", "POST", "/v1/treasury/mint",
           args=(arg("amount", type=int, metavar="N"), arg("--memo")),
           body=lambda a: {"amount": a.amount, **({"memo": a.memo} if a.memo else {})},
           render=render_minted),
    Action("fine", "fine an agent: credits from its wallet to the plaza's treasury", "POST", "/v1/treasury/fines",
           args=(arg("cid", metavar="CID"), arg("amount", type=int, metavar="AMOUNT"),
                 arg("--memo", required=True, help="what the fine is for")),
           body=lambda a: {"cid": a.cid, "amount": a.amount, "memo": a.memo},
           render=render_entry),
    Action("explain", "the postings that make up an account's balance", "GET",
           "/v1/treasury/accounts/{account}/explain",
           args=(arg("account", metavar="ACCOUNT",
                     help="budget, treasury, mint, model-costs, wallet:CID, escrow:TASK or a CID"),
                 arg("--limit", type=int, default=100), arg("--before", type=int)),
           query=lambda a: {"limit": a.limit, "before": a.before},
           render=render_explain),
    Action("flows", "Minted, Escrowed, Paid, Refunded, Fined, Spent and In circulation over a range", "GET",
           "/v1/treasury/flows", args=RANGE, query=lambda a: {"from": a.start, "to": a.end}, render=render_flows),
    Action("series", "balances and flows by hour or by day", "GET", "/v1/treasury/series",
           args=(arg("--by", choices=["hour", "day"], default="day"), *RANGE),
           query=lambda a: {"by": a.by, "from": a.start, "to": a.end},
           render=lambda d: table(d["series"])),
    Action("payments", "payments above approve_over waiting for you", "GET", "/v1/treasury/payments",
           args=(arg("--status", choices=list(PAYMENT_STATUSES), default="pending"),),
           query=lambda a: {"status": a.status},
           render=lambda d: table(d["payments"], PAYMENT_COLUMNS)),
))
