"""agentplaza models providers | presets | add ID ... | edit ID ... | rm ID | key ID --value - | test ID
| list | policy show | policy set ... | decision-models | prices [MODEL] | token CID --role R | tokens | revoke CID."""

from __future__ import annotations

import getpass
import sys

from ..env import Env
from ..output import pairs, refuse, table

NAME = "models"


def _key_flags(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--key-stdin", action="store_true", help="read the key from standard input into the vault")
    g.add_argument("--env", metavar="NAME", help="read the key from the hub's environment variable NAME")
    g.add_argument("--secret", metavar="NAME", help="use the existing vault entry NAME")
    g.add_argument("--command", dest="key_command", metavar="CMD", help="run CMD; its output is a bearer token")


def register(sub) -> None:
    p = sub.add_parser(NAME, help="providers, keys, the model policy, prices and decision models")
    s = p.add_subparsers(dest="action", metavar="ACTION")
    s.add_parser("providers", help="the providers and their key status")
    s.add_parser("presets", help="every provider the hub knows how to reach")
    add = s.add_parser("add", help="add a provider from a preset")
    add.add_argument("id")
    add.add_argument("--preset", help="the preset (default: the id)")
    add.add_argument("--base-url", help="the endpoint (a local runner's address)")
    add.add_argument("--models", help="comma-separated model names (default: the preset's)")
    _key_flags(add)
    add.add_argument("--yes", action="store_true", help="do not ask before setting a key --command")
    edit = s.add_parser("edit", help="change a provider")
    edit.add_argument("id")
    edit.add_argument("--base-url")
    edit.add_argument("--models")
    edit.add_argument("--enable", dest="enabled", action="store_const", const=True)
    edit.add_argument("--disable", dest="enabled", action="store_const", const=False)
    edit.add_argument("--vault", action="store_true", help="keep the key in the vault (provider:<id>)")
    _key_flags(edit)
    edit.add_argument("--yes", action="store_true", help="do not ask before setting a key --command")
    rm = s.add_parser("rm", help="remove a provider")
    rm.add_argument("id")
    key = s.add_parser("key", help="store a provider's key in the vault (read from stdin)")
    key.add_argument("id")
    key.add_argument("--value", required=True, help="'-': read the key from standard input")
    test = s.add_parser("test", help="make one short call to the provider")
    test.add_argument("id")
    test.add_argument("--model")
    s.add_parser("list", help="every model, its tiers and its price")
    pol = s.add_parser("policy", help="the model policy")
    ps = pol.add_subparsers(dest="policy_action", metavar="ACTION")
    ps.add_parser("show")
    pset = ps.add_parser("set")
    pset.add_argument("--orchestrator", help="the whole orchestrator list, comma-separated")
    pset.add_argument("--worker", help="the whole worker list, comma-separated")
    pset.add_argument("--effort", help="the effort of requests that name none ('' clears it)")
    pset.add_argument("--default-model", help="the worker default")
    pset.add_argument("--orchestrator-model", help="the orchestrator's model")
    pset.add_argument("--role-model", action="append", default=[], metavar="ROLE=MODEL",
                      help="a role's model; an empty model clears it (repeat for each role)")
    pset.add_argument("--price", action="append", default=[], metavar="MODEL=IN:OUT[:CACHE_READ[:CACHE_WRITE]]",
                      help="your price in credits per million tokens; MODEL= removes it (repeat)")
    pset.add_argument("--allow-training-models", choices=["on", "off"])
    pset.add_argument("--idle-sleep-min", type=int, help="idle minutes before an agent sleeps (0: never)")
    pset.add_argument("--sleep-never-roles", help="roles that never sleep on their own, comma-separated")
    pset.add_argument("--decision-models", help="the decision models, comma-separated")
    pset.add_argument("--fetch-blocklist", metavar="HOSTS",
                      help="the hosts agents may not fetch from, comma-separated (example.com: the host and its "
                           "subdomains; *.example.net: the subdomains only); '' clears it")
    pset.add_argument("--yes", action="store_true", help="confirm --allow-training-models on")
    s.add_parser("decision-models", help="the plaza's decision models")
    pr = s.add_parser("prices", help="where prices come from; the price of one model")
    pr.add_argument("model", nargs="?")
    pr.add_argument("--refresh", action="store_true", help="fetch the public lists now")
    tok = s.add_parser("token", help="issue an agent's gateway token (shown once)")
    tok.add_argument("cid")
    tok.add_argument("--role", required=True)
    tok.add_argument("--model")
    tok.add_argument("--task")
    s.add_parser("tokens", help="the gateway's connection table")
    rev = s.add_parser("revoke", help="revoke an agent's gateway token")
    rev.add_argument("cid")


def _csv(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


def _read_secret(prompt: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(prompt)
    return sys.stdin.read().strip()


def _key_body(args) -> dict | None:
    if getattr(args, "env", None):
        return {"kind": "env", "name": args.env}
    if getattr(args, "secret", None):
        return {"kind": "secret", "name": args.secret}
    if getattr(args, "key_command", None):
        return {"kind": "command", "command": args.key_command}
    if getattr(args, "key_stdin", False) or getattr(args, "vault", False):
        return {"kind": "vault"}
    return None


def _command_not_confirmed(args, key: dict | None) -> int | None:
    """A key --command makes the hub run a program as its own user: show it and ask, unless --yes."""
    if not key or key["kind"] != "command" or args.yes:
        return None
    from .plaza import confirm

    if confirm(f"The hub will run this command as its own user, to read the key:\n  {key['command']}\nSet it?"):
        return None
    return refuse(f"key command {key['command']!r} not confirmed; pass --yes to skip the question", "not_confirmed")


def _providers(d: dict) -> str:
    return table(d["providers"], ["id", "preset", "endpoint", "key_status", "enabled", "models"])


def _policy(d: dict) -> str:
    p = d["policy"]
    lines = {
        "orchestrator": ", ".join(p["orchestrator"]), "worker": ", ".join(p["worker"]),
        "effort": p["effort"] or "(the request's, else the provider's)",
        "orchestrator_model": p["orchestrator_model"], "default_model": p["default_model"],
        "role_models": ", ".join(f"{r}={m}" for r, m in p["role_models"].items()) or "(none)",
        "allow_training_models": "on" if p["allow_training_models"] else "off",
        "prices": ", ".join(f"{m}={':'.join(str(x) for x in v)}" for m, v in p["prices"].items()) or "(none)",
        "idle_sleep_min": p["idle_sleep_min"], "sleep_never_roles": ", ".join(p["sleep_never_roles"]) or "(none)",
        "decision_models": ", ".join(p["decision_models"]),
        "fetch_blocklist": ", ".join(p.get("fetch_blocklist", [])) or "(none)",
    }
    return pairs(lines)


def _policy_body(args) -> dict | None:
    body: dict = {}
    if args.orchestrator is not None:
        body["orchestrator"] = _csv(args.orchestrator)
    if args.worker is not None:
        body["worker"] = _csv(args.worker)
    if args.effort is not None:
        if args.effort == "":
            body["clear_effort"] = True
        else:
            body["effort"] = args.effort
    if args.default_model:
        body["default_model"] = args.default_model
    if args.orchestrator_model:
        body["orchestrator_model"] = args.orchestrator_model
    if args.role_model:
        roles = {}
        for item in args.role_model:
            role, sep, model = item.partition("=")
            if not sep:
                raise ValueError(f"--role-model wants ROLE=MODEL, not {item!r}")
            roles[role] = model
        body["role_models"] = roles
    if args.price:
        prices: dict = {}
        for item in args.price:
            model, sep, spec = item.partition("=")
            if not sep or not model:
                raise ValueError(f"--price wants MODEL=IN:OUT, not {item!r}")
            if not spec:
                prices[model] = None
                continue
            try:
                prices[model] = [int(x) for x in spec.split(":")]
            except ValueError:
                raise ValueError(f"--price {item!r}: prices are whole credits per million tokens") from None
        body["prices"] = prices
    if args.allow_training_models:
        body["allow_training_models"] = args.allow_training_models == "on"
    if args.idle_sleep_min is not None:
        body["idle_sleep_min"] = args.idle_sleep_min
    if args.sleep_never_roles is not None:
        body["sleep_never_roles"] = _csv(args.sleep_never_roles)
    if args.decision_models is not None:
        body["decision_models"] = _csv(args.decision_models)
    if args.fetch_blocklist is not None:
        body["fetch_blocklist"] = _csv(args.fetch_blocklist)
    return body


def run(env: Env) -> int:
    args, c = env.args, env.client
    a = args.action
    if a in (None, "providers"):
        return env.show(c.get("/v1/models/providers"), _providers)
    if a == "presets":
        return env.show(c.get("/v1/models/presets"), lambda d: table(
            d["presets"], ["id", "name", "endpoint", "auth", "local", "starts", "models"]))
    if a == "add":
        body: dict = {"id": args.id}
        if args.preset:
            body["preset"] = args.preset
        if args.base_url:
            body["base_url"] = args.base_url
        if args.models is not None:
            body["models"] = _csv(args.models)
        key = _key_body(args)
        if key is not None:
            body["key"] = key
        if (refused := _command_not_confirmed(args, key)) is not None:
            return refused
        value = _read_secret(f"{args.id} key: ") if args.key_stdin else None
        if args.key_stdin and not value:
            return refuse("no key on standard input", "no_key")
        out = c.post("/v1/models/providers", body)
        if value:
            out = c.request("PUT", f"/v1/models/providers/{args.id}/key", json={"value": value})
        return env.show(out, lambda d: pairs({k: d[k] for k in ("id", "endpoint", "key_status")}))
    if a == "edit":
        body = {}
        if args.base_url:
            body["base_url"] = args.base_url
        if args.models is not None:
            body["models"] = _csv(args.models)
        if args.enabled is not None:
            body["enabled"] = args.enabled
        key = _key_body(args)
        if key is not None:
            body["key"] = key
        if (refused := _command_not_confirmed(args, key)) is not None:
            return refused
        value = _read_secret(f"{args.id} key: ") if args.key_stdin else None
        out = c.request("PATCH", f"/v1/models/providers/{args.id}", json=body) if body else None
        if value:
            out = c.request("PUT", f"/v1/models/providers/{args.id}/key", json={"value": value})
        if out is None:
            return refuse("nothing to change: give --base-url, --models, --enable, --disable or a key flag", "no_change")
        return env.show(out, lambda d: pairs({k: d[k] for k in ("id", "endpoint", "key_status", "enabled")}))
    if a == "rm":
        return env.show(c.request("DELETE", f"/v1/models/providers/{args.id}"), lambda d: f"removed {d['removed']}")
    if a == "key":
        if args.value != "-":
            return refuse("a key is read from standard input only: use --value -", "key_on_command_line")
        value = _read_secret(f"{args.id} key: ")
        if not value:
            return refuse("no key on standard input", "no_key")
        out = c.request("PUT", f"/v1/models/providers/{args.id}/key", json={"value": value})
        return env.show(out, lambda d: f"stored the key of {d['id']} in the vault ({d['key_status']})")
    if a == "test":
        out = c.post(f"/v1/models/providers/{args.id}/test", {"model": args.model} if args.model else {})
        env.show(out, lambda d: pairs(d))
        return 0 if out["ok"] else 1
    if a == "list":
        return env.show(c.get("/v1/models"), lambda d: table(
            [dict(m, price=_price(m["price"])) for m in d["models"]],
            ["model", "orchestrator", "worker", "contributor", "price"]))
    if a == "policy":
        if args.policy_action in (None, "show"):
            return env.show(c.get("/v1/models/policy"), _policy)
        try:
            body = _policy_body(args)
        except ValueError as e:
            return refuse(str(e), "invalid_request")
        if not body:
            return refuse("nothing to set; see agentplaza models policy set --help", "no_change")
        if body.get("allow_training_models") and not args.yes:
            from .plaza import confirm

            if not confirm("Contributor models may be trained on what they are sent. Allow them?"):
                return refuse("allow_training_models not confirmed; pass --yes to skip the question", "not_confirmed")
        return env.show(c.request("PATCH", "/v1/models/policy", json=body), _policy)
    if a == "decision-models":
        return env.show(c.get("/v1/models/decision"), lambda d: table(d["decision_models"]))
    if a == "prices":
        if args.refresh:
            return env.show(c.post("/v1/models/prices/refresh"), lambda d: table(
                [dict(source=s, **r) for s, r in d["sources"].items()]))
        out = c.get("/v1/models/prices", model=args.model)
        if args.model:
            return env.show(out, lambda d: _price(d["price"]) if d["price"] == "unpriced" else pairs(d["price"]))
        return env.show(out, lambda d: table(
            [{"source": s, "kind": "fetched", **r} for s, r in d["lists"].items()]
            + [{"source": s, "kind": "shipped snapshot", **r} for s, r in d["snapshots"].items()]))
    if a == "token":
        body = {"cid": args.cid, "role": args.role}
        if args.model:
            body["model"] = args.model
        if args.task:
            body["task"] = args.task
        return env.show(c.post("/v1/models/gateway-tokens", body), lambda d: pairs(
            {"agent": d["cid"], "tier": d["tier"], "api_key": d["api_key"], **d["base_urls"]}))
    if a == "tokens":
        return env.show(c.get("/v1/models/gateway-tokens"), lambda d: table(d["tokens"]))
    if a == "revoke":
        return env.show(c.request("DELETE", f"/v1/models/gateway-tokens/{args.cid}"), lambda d: f"revoked {d['revoked']}")
    return refuse(f"unknown action {a}")


def _price(p) -> str:
    if p == "unpriced":
        return "unpriced"
    return f"{p['input']}:{p['output']} ({p['source']})"
