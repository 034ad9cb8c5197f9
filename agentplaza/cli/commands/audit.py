"""agentplaza audit verify [--anchor HASH@POSITION] [--offline] | anchor [--offline].

``verify`` walks the hash chain of every stored event and checks it against
the hub's latest signed checkpoint (and an anchor the owner kept elsewhere);
it exits 1 when the log is not intact.  ``anchor`` prints the chain's head as
``HASH@POSITION``, for the owner to keep somewhere the plaza cannot write.
"""

from __future__ import annotations

import sys

from .. import offline
from ..actions import Action, Area, arg
from ..env import Env

#: The exit status of a verify that finds the log broken.
BROKEN_EXIT = 1
#: The exit status of a malformed command line (as argparse's own).
USAGE_EXIT = 2


def render(v: dict) -> str:
    anchored = "; " + ", ".join(f"passes {_anchor_name(a)} at position {a['position']}" for a in v["anchors"])
    if v["intact"]:
        return f"intact: {v['count']} events, head {v['head']}" + (anchored if v["anchors"] else "")
    where = f" at position {v['broken_at']}" if v.get("broken_at") is not None else ""
    return f"BROKEN{where}: {v['problem']} ({v['count']} events verify before it)"


def _anchor_name(a: dict) -> str:
    return "the anchor given" if a["source"] == "given" else f"the signed checkpoint of {a['at']}"


def anchor(env: Env) -> int:
    return offline.through_hub_or_store(env, lambda c: c.get("/v1/audit/anchor"), offline.anchor,
                                        lambda d: d["anchor"])


def verify(env: Env) -> int:
    args = env.args
    params = {}
    if args.anchor is not None:
        try:
            given = offline.parse_anchor(args.anchor)
        except offline.AnchorSyntax as e:
            print(f"agentplaza: --anchor: {e} (invalid_anchor)", file=sys.stderr)
            return USAGE_EXIT
        params["anchor"] = args.anchor.strip()
    else:
        given = None
    return offline.through_hub_or_store(
        env, lambda c: c.get("/v1/audit/verify", **params), lambda: offline.verify(given), render,
        status=lambda v: 0 if v["intact"] else BROKEN_EXIT,
    )


OFFLINE = arg("--offline", action="store_true", help="read the store directly, not through the hub")

AREA = Area("audit", "check the event log", (
    Action("verify", "walk the hash chain of every stored event, against its signed checkpoint", run=verify,
           args=(arg("--anchor", metavar="HASH@POSITION",
                     help="also check against a head kept elsewhere (audit anchor)"), OFFLINE)),
    Action("anchor", "print the chain's head as HASH@POSITION, to keep elsewhere", run=anchor, args=(OFFLINE,)),
))
