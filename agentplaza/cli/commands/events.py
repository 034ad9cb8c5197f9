"""agentplaza events [--kinds a,b] [--agent CID] [--all]: the live bus, reconnecting by itself.

``--all`` adds what the VMs write to their serial consoles (family ``console``, never stored).
"""

from __future__ import annotations

import json
import sys
import time
from urllib.parse import urlencode

from ...wire import CLOSE_IDLE, CONSOLE_FAMILY
from ...wire import WS_SUBPROTOCOL as SUBPROTOCOL
from ..actions import Action, Area, arg
from ..env import Env

#: After a lost connection: wait 1 s, doubling up to 30 s.
RECONNECT_FIRST_S = 1.0
RECONNECT_MAX_S = 30.0


def next_wait(wait: float) -> float:
    return min(wait * 2, RECONNECT_MAX_S)


def line(msg: dict) -> str:
    d = msg["data"]
    if msg["event"] == CONSOLE_FAMILY:
        return f"{d['at']}  cid {d['cid']:<6} {CONSOLE_FAMILY:<10} {d['text']}"
    why = f"  ({d['reason']})" if d.get("reason") else ""
    return f"{d['at']}  #{d['position']}  {msg['event']:<10} {d['kind']:<24} {d['actor']}{why}"


def run(env: Env) -> int:
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect

    args, client = env.args, env.client
    query = {k: v for k, v in (("kinds", args.kinds), ("all", "1" if args.all else None)) if v}
    url = client.ws_url("/v1/ws") + (f"?{urlencode(query, safe=',')}" if query else "")
    headers = {"Authorization": f"Bearer {client.token}"} if client.token else {}
    tls = {"ssl": client.ssl_context} if client.ssl_context is not None else {}  # a pinned hub's one certificate
    wait = RECONNECT_FIRST_S
    while True:
        try:
            with connect(url, subprotocols=[SUBPROTOCOL], additional_headers=headers, open_timeout=10,
                         **tls) as ws:
                wait = RECONNECT_FIRST_S
                for raw in ws:
                    msg = json.loads(raw)
                    d = msg["data"]
                    if args.agent and d.get("actor") != f"agent:{args.agent}" and str(d.get("cid")) != args.agent:
                        continue
                    print(json.dumps(msg) if args.json else line(msg), flush=True)
                    if args.once:
                        return 0
        except ConnectionClosed as e:
            if e.rcvd is not None and e.rcvd.code == CLOSE_IDLE:  # a quiet stream, closed by the hub: go on at once
                continue
            print(f"agentplaza: live events lost ({e}); reconnecting in {wait:g} s", file=sys.stderr)
        except (OSError, InvalidHandshake, InvalidStatus) as e:
            print(f"agentplaza: live events lost ({e}); reconnecting in {wait:g} s", file=sys.stderr)
        time.sleep(wait)
        wait = next_wait(wait)


AREA = Area("events", "stream the plaza's live events", (
    Action("stream", "stream the live events, reconnecting by itself", run=run, default=True),
), top=(
    arg("--kinds", help="only these kinds, comma separated (e.g. agent,approval)"),
    arg("--agent", help="only events about this agent's cid"),
    arg("--once", action="store_true", help="stop after the first event"),
    arg("--all", action="store_true", help="the VMs' console output too"),
))
