"""agentplaza hub login [URL] [--token -] [--pin SHA256] [--name NAME] | logout [NAME] | list | use NAME | status
| rotate-token [--yes].

Saved hubs live in ``cli.json`` in the config folder (``cli.config``); with one in use, later commands
need no flags. A token is read from standard input (``--token -``) or a hidden prompt, and never
printed back.
"""

from __future__ import annotations

import getpass
import os
import sys
from urllib.parse import urlparse

from ...config import DEFAULT_HUB
from .. import config
from ..actions import Action, Area, arg
from ..env import Env
from ..errors import HubError
from ..output import pairs, refuse, table

#: ``--token -``: the token comes from standard input.
FROM_STDIN = "-"


def render(d: dict, saved_as: str | None = None) -> str:
    return pairs({
        "address": d["address"], "version": d["version"],
        "store": f"{d['store']['backend']} {d['store']['where']}",
        "position": d["position"], "read models at": d["projections_at"], "started": d["started_at"],
        **({"public address": d["public_url"]} if d.get("public_url") and d["public_url"] != d["address"] else {}),
        **({"certificate SHA-256": d["fingerprint"]} if d.get("fingerprint") else {}),
        **({"saved as": saved_as} if saved_as else {}),
    })


def status(env: Env) -> int:
    """``hub status``: the hub this command talks to (and its saved name, when it is a saved one)."""
    return env.show(env.client.get("/v1/hub"), lambda d: render(d, env.target.name))


def _token(env: Env, url: str) -> str | None:
    """The token to save: ``--token -`` reads standard input, ``--token T`` (or APZ_TOKEN) is taken as
    given, otherwise a hidden prompt on a terminal; a hub on this machine needs none (its owner-token
    file is read at each command)."""
    given = env.args.token or os.environ.get("APZ_TOKEN")
    if given == FROM_STDIN:
        token = sys.stdin.readline().strip()
        if not token:
            raise HubError("--token - read no token from standard input", "token_required")
        return token
    if given:
        return given
    from ..client import LOOPBACK

    if (urlparse(url).hostname or "") in LOOPBACK:
        return None
    if sys.stdin.isatty():
        return getpass.getpass(f"owner token for {url}: ").strip() or None
    raise HubError(f"hub login to {url} needs its owner token: pass --token - and give it on standard input",
                   "token_required")


def login(env: Env) -> int:
    from ..client import Client

    args = env.args
    saved = config.load()
    given = args.url or args.hub or os.environ.get("APZ_HUB") or DEFAULT_HUB
    url = saved.hubs[given].url if given in saved.hubs else config.normal_url(given)  # a saved name: log in again
    name = config.check_name(args.name or (given if given in saved.hubs else urlparse(url).netloc))
    token = _token(env, url)
    pin = args.pin or os.environ.get("APZ_PIN")
    if pin is not None:
        from ..pin import normal_pin

        pin = normal_pin(pin)
    answer = Client(url, token, pin=pin).get("/v1/hub")  # the hub answers (and the pin holds) before it is saved
    saved.hubs[name] = config.SavedHub(name=name, url=url, token=token, pin=pin)
    saved.current = name
    config.store(saved)
    shown = {**saved.hubs[name].public(saved.current), "version": answer.get("version")}
    return env.show(shown, lambda d: f"saved hub {d['name']} ({d['url']}, apid {d['version']}); "
                                     "later commands use it")


def logout(env: Env) -> int:
    saved = config.load()
    name = env.args.name or saved.current
    if name is None:
        return refuse("no saved hub is in use; name the one to forget (agentplaza hub list)", "unknown_hub")
    saved.named(name)
    del saved.hubs[name]
    if saved.current == name:
        saved.current = None
    config.store(saved)
    return env.show({"forgot": name, "current": saved.current},
                    lambda d: f"forgot hub {d['forgot']} and its token")


def listing(env: Env) -> int:
    saved = config.load()
    rows = [h.public(saved.current) for h in saved.hubs.values()]
    return env.show({"current": saved.current, "hubs": rows},
                    lambda d: table(d["hubs"], ["name", "url", "token", "pin", "current"]) if d["hubs"]
                    else "no saved hubs (agentplaza hub login URL saves one)")


def use(env: Env) -> int:
    saved = config.load()
    hub = saved.named(env.args.name)
    saved.current = hub.name
    config.store(saved)
    return env.show(hub.public(saved.current), lambda d: f"using hub {d['name']} ({d['url']})")


def status_or_refuse(env: Env) -> int:
    """``hub`` alone names no action and is refused."""
    if env.args.action is None:
        return refuse("hub wants an action: login, logout, list, use, status or rotate-token")
    return status(env)


NAME = arg("--name", help="the name to save it under (default: its host and port)")


def _rotated(d: dict) -> str:
    return (f"new owner token (shown once; also in {d['file']}):\n  {d['token']}\n"
            "the old token no longer works; saved hubs elsewhere need agentplaza hub login again")

AREA = Area("hub", "saved hubs: login, logout, list, use and status", (
    Action("status", "the hub's version, address, store and position", run=status_or_refuse, default=True),
    Action("login", "check a hub and save it (address, token, pin) as the one in use", run=login, args=(
        arg("url", nargs="?", metavar="URL", help="the hub's address (default: --hub, APZ_HUB or the local hub)"),
        NAME)),
    Action("logout", "forget a saved hub and its token", run=logout,
           args=(arg("name", nargs="?", metavar="NAME", help="the saved hub (default: the one in use)"),)),
    Action("list", "the saved hubs (tokens are never shown)", run=listing),
    Action("use", "talk to this saved hub from now on", run=use, args=(arg("name", metavar="NAME"),)),
    Action("rotate-token", "replace the owner token (on the hub's own machine); the old one stops at once",
           "POST", "/v1/hub/owner-token/rotate", render=_rotated,
           confirm=lambda a: "Replace the owner token? The old one, and every sign-in made with it, stop working now."),
))
