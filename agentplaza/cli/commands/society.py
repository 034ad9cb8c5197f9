"""agentplaza society reputation | wallets | bonds [--cid CID] | ratings [--cid CID] | roles | proposals | hires
| rate CID up|down (the owner's Trust more / Trust less)."""

from __future__ import annotations

from ..actions import Action, Area, arg
from ..output import table

ROLE_COLUMNS = ["role", "tier", "group", "what"]
REPUTATION_COLUMNS = ["cid", "name", "role", "reputation", "evidence"]
WALLET_COLUMNS = ["cid", "name", "role", "balance", "earned", "spent", "share"]
BOND_COLUMNS = ["a", "b", "strength", "interactions", "last"]
RATING_COLUMNS = ["at", "by", "of", "rating", "for", "counts"]
PROPOSAL_COLUMNS = ["id", "status", "agent", "title"]
HIRE_COLUMNS = ["at", "task", "hirer", "contact", "bonus", "bonus_state", "outcome"]
ONLY_CID = arg("--cid", type=int, help="only this agent's")


def render_rated(d: dict) -> str:
    a = d.get("agent") or {}
    return f"trust {d['trust']} for agent {d['cid']}; reputation now {a.get('reputation', 'unrated')}"


AREA = Area("society", "the society: reputation and wallets, bonds, ratings, roles, proposals", (
    Action("reputation", "every agent's reputation (0-100, or unrated until there is enough evidence)", "GET",
           "/v1/society/reputation", render=lambda d: table(d["agents"], REPUTATION_COLUMNS), default=True),
    Action("wallets", "every agent's wallet", "GET", "/v1/treasury/wallets",
           render=lambda d: table(d["wallets"], WALLET_COLUMNS)),
    Action("bonds", "the bonds between agents: how strong each contact is now", "GET", "/v1/society/bonds",
           args=(ONLY_CID,), query=lambda a: {"cid": a.cid} if a.cid is not None else {},
           render=lambda d: table(d["bonds"], BOND_COLUMNS)),
    Action("ratings", "the ratings, the latest first (agents' and the owner's)", "GET", "/v1/society/ratings",
           args=(ONLY_CID, arg("--limit", type=int, default=100)),
           query=lambda a: {k: v for k, v in (("cid", a.cid), ("limit", a.limit)) if v is not None},
           render=lambda d: table(d["ratings"], RATING_COLUMNS)),
    Action("roles", "every role an agent can be started with", "GET", "/v1/society/roles",
           render=lambda d: table(d["roles"], ROLE_COLUMNS)),
    Action("proposals", "the agents' proposals of new agents (approve or reject them in approvals)", "GET",
           "/v1/approvals", query=lambda a: {"kind": "agent", "status": "all"},
           render=lambda d: table(d["approvals"], PROPOSAL_COLUMNS)),
    Action("hires", "who hired whom, the bonus and whether it was paid (the latest first)", "GET",
           "/v1/society/hires", args=(ONLY_CID,), query=lambda a: {"cid": a.cid} if a.cid is not None else {},
           render=lambda d: table(d["hires"], HIRE_COLUMNS)),
    Action("rate", "trust an agent more (up) or less (down), as the owner", "POST", "/v1/society/{cid}/trust",
           args=(arg("cid", type=int), arg("direction", choices=("up", "down"))),
           body=lambda a: {"more": a.direction == "up"}, render=render_rated),
))
