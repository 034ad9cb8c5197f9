"""apid: the hub.  Starlette on Hypercorn with the trio worker.  The program is ``agentplaza.apid``, which holds
Python's cyclic collector off while it imports this; ``main`` keeps it off until the hub listens."""

from __future__ import annotations

import argparse
import faulthandler
import gc
import os
import signal
import sys

import trio
from anyio.from_thread import BlockingPortal
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette

from .. import dataclass_code
from ..adapters.kvm.link import NodeError
from ..adapters.providers.presets import ANTHROPIC
from ..config import DEFAULT_BIND, folders
from ..permissions import private_umask
from ..runtime.e2b import sandboxes_of
from ..runtime.e2bgate import DEFAULT_GATEWAY_PORT, Gateway
from ..runtime.egress import EGRESS_ENV, EGRESS_PORTS_ENV, EgressPolicy, policy_from_flags
from ..runtime.fleet import AgentRuntime
from ..runtime.forge import server_of
from ..runtime.modelrelay import GatewayCall, in_process
from . import acp_door, ws
from .app import create_app
from .auth import LOOPBACK_TRUST_ENV, SIGN_IN_LINK_TTL_S, is_loopback, loopback_trust_from
from .edge import HubNames
from .hub import START_CATCH_UP_MAX, VERSION, Hub
from .routes.gateway import gateway_of
from .tls import Certificate, hub_certificate, with_colons

#: The signal on which apid writes every thread's stack to its stderr and goes on (docs/operations.md,
#: "A hub that seems stuck"): what each thread waits for, without stopping or slowing the hub.
STACKS_SIGNAL = signal.SIGUSR1

#: More names and addresses for the hub, for a hub hosted for other machines.
PUBLIC_URL_ENV = "APZ_PUBLIC_URL"
ALLOW_HOSTS_ENV = "APZ_ALLOW_HOSTS"


#: How long the hub keeps an idle kept-alive connection open (Hypercorn's default is 5 s). A client
#: that reuses a pooled connection just as the server closes it gets "Server disconnected without sending
#: a response" (CI met it once, a test's client idle about 5 s between two calls). The server must
#: outwait the clients' own idle expiry (httpx: 5 s; a browser retries an idempotent request itself), so
#: that it is always the client that lets go first.
KEEP_ALIVE_S = 75

def _csv(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def gateway_call(app: Starlette, portal: BlockingPortal) -> GatewayCall:
    """The model gateway in process, for the agents' runtime: a call from one of the runtime's threads
    runs on the hub's event loop (through ``portal``), through the gateway's own steps."""
    gw = gateway_of(app.state.api)

    async def call(token: str, body: dict, headers: dict) -> tuple[int, bytes]:
        return await gw.call_in_process(ANTHROPIC, token, body, headers)

    return in_process(portal, call)


def start_runtime(hub: Hub, node: str, egress: EgressPolicy, gateway: GatewayCall) -> None:
    """Node n0 and the agents' runtime, which follows the hub's events and calls its gateway in process."""
    try:
        hub.runtime = AgentRuntime(hub, node=node, images_dir=os.environ.get("APZ_IMAGE_DIR") or None,
                                   egress=egress, gateway=gateway).start()
        print(f"apid: node n0 connected ({node})", flush=True)
    except (NodeError, OSError) as e:
        hub.runtime = None
        print(f"apid: no node, agents cannot boot: {e}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="apid", description="The AgentPlaza hub.")
    p.add_argument("--bind", default=DEFAULT_BIND, help=f"address:port to listen on (default {DEFAULT_BIND})")
    p.add_argument("--node", default=os.environ.get("APZ_NODE", "local"),
                   help="local: start node n0 (noded) for this machine's agents; off: no node; "
                        "or the path of a running noded's socket (default: APZ_NODE or local)")
    p.add_argument("--egress", choices=("on", "off"), default=None,
                   help=f"agents' outbound web traffic through the hub's egress proxy (default: {EGRESS_ENV} or on)")
    p.add_argument("--egress-ports", metavar="PORT,PORT", default=None,
                   help=f"ports agents may reach besides 80 and 443, comma-separated (default: {EGRESS_PORTS_ENV})")
    p.add_argument("--loopback-trust", choices=("on", "off"), default=None,
                   help="on: callers on this machine's loopback address are the owner; off: every caller presents "
                        f"the owner token or signs in (default: {LOOPBACK_TRUST_ENV} or on)")
    p.add_argument("--public-url", action="append", default=[], metavar="URL",
                   help=f"an address this hub is reached at by name, e.g. https://hub.example.net:7700 "
                        f"(repeatable; also {PUBLIC_URL_ENV}, comma-separated)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help=f"another Host name this hub answers to (repeatable; also {ALLOW_HOSTS_ENV}, comma-separated)")
    p.add_argument("--https", action="store_true",
                   help="serve HTTPS on a loopback address too (off loopback apid always serves HTTPS only)")
    p.add_argument("--tls-cert", metavar="PEM", default=None,
                   help="your own certificate (with --tls-key) instead of the hub's self-signed one")
    p.add_argument("--tls-key", metavar="PEM", default=None, help="the key of --tls-cert")
    p.add_argument("--e2b-gateway-port", type=int, default=None, metavar="PORT",
                   help="serve the E2B SDK's node gateway on 127.0.0.1:PORT (off unless given; "
                        f"the SDK's E2B_SANDBOX_URL; {DEFAULT_GATEWAY_PORT} is the usual port)")
    p.add_argument("--version", action="version", version=f"apid {VERSION}")
    return p.parse_args(argv)


def hosted(host: str, https_flag: bool) -> bool:
    """The guide: a hub that other machines can join "listens on an address you choose, serves HTTPS".
    Bound to anything but loopback, apid serves HTTPS only; on loopback, when asked."""
    return https_flag or not (host == "localhost" or is_loopback(host))


def certificate_names(host: str, names: HubNames) -> list[str]:
    """What the hub's own certificate names: the bound address (not a wildcard), the owner's names, localhost."""
    bound = [] if host in ("0.0.0.0", "::") else [host]
    return [*bound, *sorted(names.names), "localhost", "127.0.0.1"]


def main(argv: list[str] | None = None) -> int:
    """Start the hub and serve until SIGINT or SIGTERM.  Python's cyclic collector is off until it listens
    (see ``agentplaza.apid``: opening a hub made some 150,000 lasting objects for it to walk again and
    again), and as it was before after a start that fails."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if was:
            gc.enable()


def _main(argv: list[str] | None) -> int:
    private_umask()  # what the hub writes is 0600 and its folders 0700, whatever the caller's umask
    args = parse_args(argv)
    faulthandler.register(STACKS_SIGNAL, all_threads=True)
    host, sep, port = args.bind.rpartition(":")
    if not sep or not port.isdigit():
        print(f"apid: --bind wants address:port, not {args.bind!r}", file=sys.stderr)
        return 2
    host = host.strip("[]") or "127.0.0.1"
    try:
        egress = policy_from_flags(args.egress, args.egress_ports, os.environ)
    except ValueError as e:
        print(f"apid: {e}", file=sys.stderr)
        return 2
    try:
        loopback_trust = loopback_trust_from(args.loopback_trust, os.environ)
        names = HubNames.make(host, args.allow_host + _csv(os.environ.get(ALLOW_HOSTS_ENV)),
                              args.public_url + _csv(os.environ.get(PUBLIC_URL_ENV)))
    except ValueError as e:
        print(f"apid: {e}", file=sys.stderr)
        return 2
    try:
        hub = Hub.open(folders(), catch_up_max=START_CATCH_UP_MAX)
    except Exception as e:  # noqa: BLE001 - a failed start says why, in one line
        print(f"apid: cannot start: {e}", file=sys.stderr)
        return 1
    for note in hub.start_notes():
        print(note, flush=True)
    try:  # before it listens: the repositories' refs set to what the log says (a line for each it repairs)
        server_of(hub)
    except Exception as e:  # noqa: BLE001 - the git server is not the whole hub; its first use tries again
        print(f"apid: the git server's repositories could not be checked against the log: {e}", file=sys.stderr)
    if not hub.caught_up_at_start:
        print(f"apid: the read models are {hub.read_models.behind():,} events behind the log; they catch up "
              "while the hub listens (reads show the past until then)", flush=True)
    cert: Certificate | None = None
    if hosted(host, args.https) or args.tls_cert:
        try:
            cert = hub_certificate(hub.folders.state, certificate_names(host, names), args.tls_cert, args.tls_key)
        except (ValueError, OSError) as e:
            print(f"apid: cannot serve HTTPS: {e}", file=sys.stderr)
            hub.close()
            return 2
    scheme = "https" if cert else "http"
    hub.address = f"{scheme}://{args.bind if ':' not in host else f'[{host}]:{port}'}"
    hub.names, hub.loopback_trust = names, loopback_trust
    hub.serves_https, hub.fingerprint = cert is not None, cert.fingerprint if cert else None
    public = args.public_url + _csv(os.environ.get(PUBLIC_URL_ENV))
    hub.public_url = public[0].rstrip("/") if public else hub.address
    if cert is not None:
        print(f"apid: HTTPS with {'its own' if cert.own else 'your'} certificate {cert.certfile}", flush=True)
        print(f"apid: certificate SHA-256 {with_colons(cert.fingerprint)}", flush=True)
        print(f"apid: pin it: agentplaza --hub {hub.public_url} --pin {cert.fingerprint}", flush=True)
        if not public and host in ("0.0.0.0", "::"):
            print(f"apid: no --public-url: join codes carry {hub.address}, which other machines cannot reach; "
                  "set --public-url", flush=True)
    if hub.new_owner_token:
        print(f"apid: owner token (shown once; also in {hub.folders.state / 'owner-token'}):")
        print(f"  {hub.new_owner_token}")
    if not loopback_trust:
        print("apid: loopback trust is off: every caller presents the owner token or signs in")
        print(f"apid: sign in once (for {SIGN_IN_LINK_TTL_S // 60} minutes): "
              f"{hub.address}/v1/auth/link?code={hub.sessions.new_link_code()}")
    if not hub.database_url:
        print("no APZ_DATABASE_URL; state stays in files")
    if hub.anchors is not None and hub.anchors.problem:
        print(f"apid: the event log does not match its signed checkpoints: {hub.anchors.problem}; "
              "no new checkpoint is signed (run agentplaza audit verify)", file=sys.stderr)
    config = Config()
    config.bind = [args.bind]
    config.keep_alive_timeout = KEEP_ALIVE_S
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    if cert is not None:  # HTTPS only: a plain-HTTP request on this port gets no answer, only a failed handshake
        config.certfile, config.keyfile = str(cert.certfile), str(cert.keyfile)
    # /v1/ws is read-only and closes on a message over its own 4 KiB; /acp carries an editor's prompts.
    config.websocket_max_message_size = max(ws.CLIENT_MESSAGE_BYTES_MAX, acp_door.MESSAGE_BYTES_MAX)
    config.websocket_ping_interval = ws.PING_INTERVAL_S
    app = create_app(hub)

    started = {"listening": False, "exit": 0}

    async def run() -> None:
        stop = trio.Event()

        async def on_signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    stop.set()
                    return

        async with BlockingPortal() as portal:
            if args.node != "off":  # started here: the runtime's gateway calls run on this loop
                await trio.to_thread.run_sync(start_runtime, hub, args.node, egress, gateway_call(app, portal))
            sandboxes = sandboxes_of(hub)  # the E2B sandboxes' reaper runs from hub start
            if args.e2b_gateway_port is not None:
                try:
                    gw = Gateway(sandboxes, args.e2b_gateway_port).start()
                except OSError as e:
                    print(f"apid: cannot serve the E2B gateway on 127.0.0.1:{args.e2b_gateway_port}: {e}",
                          file=sys.stderr)
                    started["exit"] = 1
                    return
                sandboxes.gateway_port = gw.port
                print(f"apid: E2B gateway on http://127.0.0.1:{gw.port}", flush=True)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(on_signals)
                await nursery.start(_serve, app, config, stop)
                started["listening"] = True
                print(f"apid: listening on {hub.address}", flush=True)
                gc.enable()  # (off from apid's start: ``main``)
                dataclass_code.save()  # the next start loads what this one compiled
                await stop.wait()
                nursery.cancel_scope.cancel()
            if args.node == "local" and hub.runtime is not None:  # its node, and every VM, goes with it
                await trio.to_thread.run_sync(sandboxes.pause_running)  # bounded: SHUTDOWN_PAUSE_S
            await portal.stop(cancel_remaining=True)  # a model turn in flight as the hub stops ends now

    try:
        trio.run(run)
    except (OSError, BaseExceptionGroup) as e:
        taken = cannot_listen(e) if not started["listening"] else None
        if taken is None:
            raise
        print(f"apid: cannot listen on {args.bind}: {taken}", file=sys.stderr)
        return 1
    finally:
        hub.close()
    return started["exit"]


def cannot_listen(e: BaseException) -> OSError | None:
    """The one OSError a failed bind raised (an address in use, one this machine does not have), however many
    of trio's nurseries wrapped it on its way out; None when ``e`` holds anything else too."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e if isinstance(e, OSError) else None


async def _serve(app, config: Config, stop: trio.Event, task_status=trio.TASK_STATUS_IGNORED) -> None:
    await serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)


if __name__ == "__main__":
    sys.exit(main())
