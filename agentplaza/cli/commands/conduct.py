"""agentplaza conduct show CID | mode CID autonomous|ask|read-only | lift CID SUSPENSION.

The agent's permission mode and conduct (``agents mode CID MODE`` calls the same hub as ``mode``).
"""

from __future__ import annotations

from ...wire import PERMISSION_MODES
from ..actions import Action, Area, arg
from ..output import pairs, table

CID_ARG = arg("cid", metavar="CID")


def render(d: dict) -> str:
    head = pairs({"agent": d["cid"], "mode": d["mode"], "offences": d["offences"], "warnings": d["warnings"],
                  "fined": d["fined"]})
    inforce = table(d["in_force"], ["suspension", "kind", "tool", "until", "law", "approval"]) if d["in_force"] else "(none)"
    log = table(d["sanctions"], ["at", "event", "law", "detail"])
    return f"{head}\n\nsuspensions in force\n{inforce}\n\nsanctions\n{log}"


AREA = Area("conduct", "an agent's permission mode, suspensions and sanctions", (
    Action("show", "the mode, the suspensions in force, the sanctions received", "GET", "/v1/conduct/{cid}",
           args=(CID_ARG, arg("--limit", type=int, default=50)), query=lambda a: {"limit": a.limit}, render=render,
           default=True),
    Action("mode", "set the agent's permission mode", "POST", "/v1/conduct/{cid}/mode",
           args=(CID_ARG, arg("mode", choices=PERMISSION_MODES)), body=lambda a: {"mode": a.mode}, render=render),
    Action("lift", "lift a suspension in force", "POST", "/v1/conduct/{cid}/suspensions/{suspension}/lift",
           args=(CID_ARG, arg("suspension", metavar="SUSPENSION", help="its id, s1, s2 ..."), arg("--reason")),
           body=lambda a: {"reason": a.reason} if a.reason else {}, render=render),
))
