"""agentplaza replay --rebuild [NAME] | --at TIMESTAMP | --upto POSITION [--name NAME] [--offline]."""

from __future__ import annotations

from ... import gate
from ...when import parse_when
from .. import offline
from ..actions import Action, Area, arg
from ..env import Env
from ..output import refuse, table


def render(d: dict) -> str:
    if "rebuilt" in d:
        return table([{"read model": k, "position": v} for k, v in d["rebuilt"].items()])
    out = [f"read models as of position {d['upto']}" + (f" (at {d['at']})" if d.get("at") else "")]
    for name, tables in d["read_models"].items():
        for tname, rows in tables.items():
            out += ["", f"{name} / {tname}", table(rows)]
    return "\n".join(out)


def run(env: Env) -> int:
    args = env.args
    if sum(x is not None for x in (args.rebuild, args.at, args.upto)) != 1:
        return refuse("replay wants one of --rebuild [NAME], --at TIMESTAMP or --upto POSITION")
    if args.rebuild is not None:
        name = args.rebuild or None
        return offline.through_hub_or_store(
            env, lambda c: c.post("/v1/replay/rebuild", {"name": name} if name else {}),
            lambda: offline.rebuild(name), render)
    at = None
    if args.at is not None:
        try:
            at = parse_when(args.at)
        except ValueError as e:
            return refuse(str(e), "invalid_request")
    if args.upto is not None:
        try:  # the gate's rule for a position: 0 or more, within signed 64 bits (what the store holds)
            gate.query_int("--upto", str(args.upto), None, 0)
        except gate.OutOfBounds as e:
            return refuse(str(e), "invalid_request")
    return offline.through_hub_or_store(
        env, lambda c: c.get("/v1/replay", at=at, upto=args.upto, name=args.name),
        lambda: offline.replay(at, args.upto, args.name), render)


AREA = Area("replay", "rebuild read models, or show them as they were", (
    Action("show", "rebuild, or show the read models as they were", run=run, default=True),
), top=(
    arg("--rebuild", nargs="?", const="", metavar="NAME", help="drop and rebuild one read model, or all"),
    arg("--at", metavar="TIMESTAMP", help="show the read models as they were at this UTC time"),
    arg("--upto", type=int, metavar="POSITION", help="show the read models as they were after this event"),
    arg("--name", help="only this read model"),
    arg("--offline", action="store_true", help="read the store directly, not through the hub"),
))
