"""agentplaza conduct show CID | mode CID autonomous|ask|read-only | lift CID SUSPENSION.

The agent's permission mode and conduct.  These live under ``conduct`` until the agents area
lands ``agentplaza agents``; it may add ``agents mode CID MODE`` calling the same routes.
"""

from __future__ import annotations

from ..env import Env
from ..output import pairs, table

NAME = "conduct"
MODES = ("autonomous", "ask", "read-only")


def register(sub) -> None:
    p = sub.add_parser(NAME, help="an agent's permission mode, suspensions and sanctions")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    sh = s.add_parser("show", help="the mode, the suspensions in force, the sanctions received")
    sh.add_argument("cid", metavar="CID")
    sh.add_argument("--limit", type=int, default=50)
    m = s.add_parser("mode", help="set the agent's permission mode")
    m.add_argument("cid", metavar="CID")
    m.add_argument("mode", choices=MODES)
    lf = s.add_parser("lift", help="lift a suspension in force")
    lf.add_argument("cid", metavar="CID")
    lf.add_argument("suspension", metavar="SUSPENSION", help="its id, s1, s2 ...")
    lf.add_argument("--reason")


def render(d: dict) -> str:
    head = pairs({"agent": d["cid"], "mode": d["mode"], "offences": d["offences"], "warnings": d["warnings"],
                  "fined": d["fined"]})
    inforce = table(d["in_force"], ["suspension", "kind", "tool", "until", "law", "approval"]) if d["in_force"] else "(none)"
    log = table(d["sanctions"], ["at", "event", "law", "detail"])
    return f"{head}\n\nsuspensions in force\n{inforce}\n\nsanctions\n{log}"


def run(env: Env) -> int:
    args, c = env.args, env.client
    if args.action in (None, "show"):
        return env.show(c.get(f"/v1/conduct/{args.cid}", limit=args.limit), render)
    if args.action == "mode":
        return env.show(c.post(f"/v1/conduct/{args.cid}/mode", {"mode": args.mode}), render)
    body = {"reason": args.reason} if args.reason else {}
    return env.show(c.post(f"/v1/conduct/{args.cid}/suspensions/{args.suspension}/lift", body), render)
