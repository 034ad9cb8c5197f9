"""agentplaza: the plaza's command line.  It talks to the hub over HTTP only."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

from . import offline
from .client import Client, HubError, Unreachable
from .output import emit, pairs, refuse, table

#: The live bus: first reconnect after 1 s, doubling up to 30 s.
RECONNECT_FIRST_S = 1.0
RECONNECT_MAX_S = 30.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentplaza", description="Run your AgentPlaza from the command line.")
    p.add_argument("--hub", help="the hub's address or saved name (APZ_HUB)")
    p.add_argument("--token", help="the owner token for that hub (APZ_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the hub's JSON instead of tables")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("overview", help="the plaza at a glance")

    hub = sub.add_parser("hub", help="the hub this command talks to")
    hub_sub = hub.add_subparsers(dest="action", metavar="ACTION")
    hub_sub.add_parser("status", help="the hub's version, address, store and position")

    plaza = sub.add_parser("plaza", help="the plaza's state, STOP ALL and resume")
    plaza_sub = plaza.add_subparsers(dest="action", metavar="ACTION")
    plaza_sub.add_parser("state", help="held or running, since when, by whom, why")
    stop = plaza_sub.add_parser("stop", help="STOP ALL: hold the whole plaza")
    stop.add_argument("--reason", required=True, help="why you hold it (shown in the banner)")
    stop.add_argument("--yes", action="store_true", help="do not ask to confirm")
    resume = plaza_sub.add_parser("resume", help="release the hold")
    resume.add_argument("--reason", help="why you resume")
    hist = plaza_sub.add_parser("history", help="every stop and resume, newest first")
    hist.add_argument("--limit", type=int, default=20)

    events = sub.add_parser("events", help="stream the plaza's live events")
    events.add_argument("--kinds", help="only these kinds, comma separated (e.g. agent,approval)")
    events.add_argument("--agent", help="only events by this agent's cid")
    events.add_argument("--once", action="store_true", help=argparse.SUPPRESS)

    audit = sub.add_parser("audit", help="check the event log")
    audit_sub = audit.add_subparsers(dest="action", metavar="ACTION")
    verify = audit_sub.add_parser("verify", help="walk the hash chain of every stored event")
    verify.add_argument("--offline", action="store_true", help="read the store directly, not through the hub")

    replay = sub.add_parser("replay", help="rebuild read models, or show them as they were")
    replay.add_argument("--rebuild", nargs="?", const="", metavar="NAME", help="drop and rebuild one read model, or all")
    replay.add_argument("--at", metavar="TIMESTAMP", help="show the read models as they were at this UTC time")
    replay.add_argument("--upto", type=int, metavar="POSITION", help="show the read models after this event")
    replay.add_argument("--name", help="only this read model")
    replay.add_argument("--offline", action="store_true", help="read the store directly, not through the hub")
    return p


def show_overview(d: dict) -> str:
    hub, plaza, ev = d["hub"], d["plaza"], d["events"]
    lines = [
        pairs({
            "hub": f"{hub['address'] or '-'} (apid {hub['version']})",
            "store": f"{hub['store']['backend']} {hub['store']['where']}",
            "position": hub["position"],
            "plaza": plaza_line(plaza),
            "events": ev["total"],
        })
    ]
    if ev["by_family"]:
        lines += ["", table([{"family": k, "events": v} for k, v in ev["by_family"].items()])]
    return "\n".join(lines)


def plaza_line(s: dict) -> str:
    if s.get("held"):
        return f"HELD since {s['since']} by {s['by']}: {s['reason']}"
    return f"running since {s.get('since')}"


def show_plaza(s: dict) -> str:
    return pairs({"state": s["state"], "since": s["since"], "by": s["by"], "reason": s["reason"]})


def confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def stream_events(client: Client, args: argparse.Namespace) -> int:
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect

    from ..events.bus import SUBPROTOCOL

    url = client.ws_url("/v1/ws") + (f"?kinds={args.kinds}" if args.kinds else "")
    headers = {"Authorization": f"Bearer {client.token}"} if client.token else {}
    wait = RECONNECT_FIRST_S
    while True:
        try:
            with connect(url, subprotocols=[SUBPROTOCOL], additional_headers=headers, open_timeout=10) as ws:
                wait = RECONNECT_FIRST_S
                for raw in ws:
                    msg = json.loads(raw)
                    data = msg["data"]
                    if args.agent and data.get("actor") != f"agent:{args.agent}" and str(data.get("cid")) != args.agent:
                        continue
                    if args.json:
                        print(json.dumps(msg), flush=True)
                    else:
                        why = f"  ({data['reason']})" if data.get("reason") else ""
                        print(f"{data['at']}  #{data['position']}  {msg['event']:<10} {data['kind']:<24} {data['actor']}{why}", flush=True)
                    if args.once:
                        return 0
        except (OSError, ConnectionClosed, InvalidHandshake, InvalidStatus) as e:
            print(f"agentplaza: live events lost ({e}); reconnecting in {wait:g} s", file=sys.stderr)
        time.sleep(wait)
        wait = min(wait * 2, RECONNECT_MAX_S)


def show_verdict(v: dict) -> str:
    if v["intact"]:
        return f"intact: {v['count']} events, head {v['head']}"
    return f"BROKEN at position {v['broken_at']}: {v['problem']} ({v['count']} events verify before it)"


def show_replay(d: dict) -> str:
    if "rebuilt" in d:
        return table([{"read model": k, "position": v} for k, v in d["rebuilt"].items()])
    out = [f"read models as of position {d['upto']}" + (f" (at {d['at']})" if d.get("at") else "")]
    for name, tables in d["read_models"].items():
        for tname, rows in tables.items():
            out += ["", f"{name} / {tname}", table(rows)]
    return "\n".join(out)


def run(args: argparse.Namespace, client_factory: Callable[[], Client]) -> int:
    cmd, action = args.command, getattr(args, "action", None)
    if cmd is None:
        build_parser().print_help()
        return 2

    def through_hub_or_offline(online: Callable[[Client], Any], off: Callable[[], Any], render) -> int:
        if not args.offline:
            try:
                emit(online(client_factory()), args.json, render)
                return 0
            except Unreachable as e:
                print(f"agentplaza: {e.message}; reading the store directly", file=sys.stderr)
        try:
            emit(off(), args.json, render)
        except offline.NoStore as e:
            return refuse(str(e), "no_store")
        except KeyError as e:
            return refuse(f"no read model named {e.args[0]!r}", "unknown_read_model")
        return 0

    if cmd == "audit":
        if action != "verify":
            return refuse("audit wants an action: verify")
        code = through_hub_or_offline(lambda c: c.get("/v1/audit/verify"), offline.verify, show_verdict)
        return code

    if cmd == "replay":
        chosen = [x is not None for x in (args.rebuild, args.at, args.upto)]
        if sum(chosen) != 1:
            return refuse("replay wants one of --rebuild [NAME], --at TIMESTAMP or --upto POSITION")
        if args.rebuild is not None:
            name = args.rebuild or None
            return through_hub_or_offline(
                lambda c: c.post("/v1/replay/rebuild", {"name": name} if name else {}),
                lambda: offline.rebuild(name), show_replay)
        at = None
        if args.at is not None:
            from ..api.app import parse_when
            from ..api.errors import ApiError
            try:
                at = parse_when(args.at)
            except ApiError as e:
                return refuse(e.message, e.code)
        if args.upto is not None and args.upto < 0:
            return refuse("--upto must be 0 or more")
        return through_hub_or_offline(
            lambda c: c.get("/v1/replay", at=at, upto=args.upto, name=args.name),
            lambda: offline.replay(at, args.upto, args.name), show_replay)

    client = client_factory()
    if cmd == "overview":
        emit(client.get("/v1/overview"), args.json, show_overview)
    elif cmd == "hub":
        if action != "status":
            return refuse("hub wants an action: status")
        emit(client.get("/v1/hub"), args.json, lambda d: pairs({
            "address": d["address"], "version": d["version"], "store": f"{d['store']['backend']} {d['store']['where']}",
            "position": d["position"], "read models at": d["projections_at"], "started": d["started_at"]}))
    elif cmd == "plaza":
        if action in (None, "state"):
            emit(client.get("/v1/plaza"), args.json, show_plaza)
        elif action == "stop":
            if not args.yes and not confirm("STOP ALL holds the whole plaza. Continue?"):
                return refuse("plaza stop not confirmed; pass --yes to skip the question", "not_confirmed")
            emit(client.post("/v1/plaza/stop", {"reason": args.reason}), args.json, show_plaza)
        elif action == "resume":
            emit(client.post("/v1/plaza/resume", {"reason": args.reason} if args.reason else {}), args.json, show_plaza)
        elif action == "history":
            emit(client.get("/v1/plaza/history", limit=args.limit), args.json, lambda d: table(d["history"]))
    elif cmd == "events":
        return stream_events(client, args)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args, lambda: Client(args.hub, args.token))
    except HubError as e:
        return refuse(e.message, e.code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
