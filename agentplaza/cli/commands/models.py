"""agentplaza models providers | presets | add ID ... | edit ID ... | rm ID | key ID --value - | test ID
| list | policy show | policy set ... | decision-models | prices [MODEL] | token CID --role R | tokens | revoke CID."""

from __future__ import annotations

import getpass
import sys

from ..actions import Action, Area, arg, choose, confirm, one_of
from ..env import Env
from ..output import pairs, refuse, table

KEY_FLAGS = one_of(
    arg("--key-stdin", action="store_true", help="read the key from standard input into the vault"),
    arg("--env", metavar="NAME", help="read the key from the hub's environment variable NAME"),
    arg("--secret", metavar="NAME", help="use the existing vault entry NAME"),
    arg("--command", dest="key_command", metavar="CMD", help="run CMD; its output is a bearer token"),
)
KEY_COMMAND_YES = arg("--yes", action="store_true", help="do not ask before setting a key --command")
PROVIDER_COLUMNS = ["id", "preset", "endpoint", "key_status", "enabled", "models"]
PRESET_COLUMNS = ["id", "name", "endpoint", "auth", "local", "starts", "models"]
MODEL_COLUMNS = ["model", "orchestrator", "worker", "contributor", "price"]


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
    if confirm(f"The hub will run this command as its own user, to read the key:\n  {key['command']}\nSet it?"):
        return None
    return refuse(f"key command {key['command']!r} not confirmed; pass --yes to skip the question", "not_confirmed")


def _providers(d: dict) -> str:
    return table(d["providers"], PROVIDER_COLUMNS)


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
        "vm_auto_checkpoints": "on" if p.get("vm_auto_checkpoints", True) else "off",
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
    if args.vm_auto_checkpoints:
        body["vm_auto_checkpoints"] = args.vm_auto_checkpoints == "on"
    return body


def add(env: Env) -> int:
    args, c = env.args, env.client
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


def edit(env: Env) -> int:
    args, c = env.args, env.client
    body: dict = {}
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


def store_key(env: Env) -> int:
    args = env.args
    if args.value != "-":
        return refuse("a key is read from standard input only: use --value -", "key_on_command_line")
    value = _read_secret(f"{args.id} key: ")
    if not value:
        return refuse("no key on standard input", "no_key")
    out = env.client.request("PUT", f"/v1/models/providers/{args.id}/key", json={"value": value})
    return env.show(out, lambda d: f"stored the key of {d['id']} in the vault ({d['key_status']})")


def test(env: Env) -> int:
    args = env.args
    out = env.client.post(f"/v1/models/providers/{args.id}/test", {"model": args.model} if args.model else {})
    env.show(out, lambda d: pairs(d))
    return 0 if out["ok"] else 1


def policy(env: Env) -> int:
    args, c = env.args, env.client
    if args.policy_action in (None, "show"):
        return env.show(c.get("/v1/models/policy"), _policy)
    try:
        body = _policy_body(args)
    except ValueError as e:
        return refuse(str(e), "invalid_request")
    if not body:
        return refuse("nothing to set; see agentplaza models policy set --help", "no_change")
    if body.get("allow_training_models") and not args.yes \
            and not confirm("Contributor models may be trained on what they are sent. Allow them?"):
        return refuse("allow_training_models not confirmed; pass --yes to skip the question", "not_confirmed")
    return env.show(c.request("PATCH", "/v1/models/policy", json=body), _policy)


def prices(env: Env) -> int:
    args, c = env.args, env.client
    if args.refresh:
        return env.show(c.post("/v1/models/prices/refresh"), lambda d: table(
            [dict(source=s, **r) for s, r in d["sources"].items()]))
    out = c.get("/v1/models/prices", model=args.model)
    if args.model:
        return env.show(out, lambda d: _price(d["price"]) if d["price"] == "unpriced" else pairs(d["price"]))
    return env.show(out, lambda d: table(
        [{"source": s, "kind": "fetched", **r} for s, r in d["lists"].items()]
        + [{"source": s, "kind": "shipped snapshot", **r} for s, r in d["snapshots"].items()]))


def _token_body(a) -> dict:
    return {"cid": a.cid, "role": a.role, **({"model": a.model} if a.model else {}),
            **({"task": a.task} if a.task else {})}


def _price(p) -> str:
    if p == "unpriced":
        return "unpriced"
    return f"{p['input']}:{p['output']} ({p['source']})"


POLICY_SET = (
    arg("--orchestrator", help="the whole orchestrator list, comma-separated"),
    arg("--worker", help="the whole worker list, comma-separated"),
    arg("--effort", help="the effort of requests that name none ('' clears it)"),
    arg("--default-model", help="the worker default"),
    arg("--orchestrator-model", help="the orchestrator's model"),
    arg("--role-model", action="append", default=[], metavar="ROLE=MODEL",
        help="a role's model; an empty model clears it (repeat for each role)"),
    arg("--price", action="append", default=[], metavar="MODEL=IN:OUT[:CACHE_READ[:CACHE_WRITE]]",
        help="your price in credits per million tokens; MODEL= removes it (repeat)"),
    arg("--allow-training-models", choices=["on", "off"]),
    arg("--idle-sleep-min", type=int, help="idle minutes before an agent sleeps (0: never)"),
    arg("--sleep-never-roles", help="roles that never sleep on their own, comma-separated"),
    arg("--decision-models", help="the decision models, comma-separated"),
    arg("--fetch-blocklist", metavar="HOSTS",
        help="the hosts agents may not fetch from, comma-separated (example.com: the host and its "
             "subdomains; *.example.net: the subdomains only); '' clears it"),
    arg("--vm-auto-checkpoints", choices=["on", "off"],
        help="a checkpoint of the agent's machine before each high-risk tool call (on by default)"),
    arg("--yes", action="store_true", help="confirm --allow-training-models on"),
)

AREA = Area("models", "providers, keys, the model policy, prices and decision models", (
    Action("providers", "the providers and their key status", "GET", "/v1/models/providers", render=_providers,
           default=True),
    Action("presets", "every provider the hub knows how to reach", "GET", "/v1/models/presets",
           render=lambda d: table(d["presets"], PRESET_COLUMNS)),
    Action("add", "add a provider from a preset", run=add, args=(
        arg("id"),
        arg("--preset", help="the preset (default: the id)"),
        arg("--base-url", help="the endpoint (a local runner's address)"),
        arg("--models", help="comma-separated model names (default: the preset's)"),
        KEY_FLAGS, KEY_COMMAND_YES)),
    Action("edit", "change a provider", run=edit, args=(
        arg("id"), arg("--base-url"), arg("--models"),
        arg("--enable", dest="enabled", action="store_const", const=True),
        arg("--disable", dest="enabled", action="store_const", const=False),
        arg("--vault", action="store_true", help="keep the key in the vault (provider:<id>)"),
        KEY_FLAGS, KEY_COMMAND_YES)),
    Action("rm", "remove a provider", "DELETE", "/v1/models/providers/{id}", args=(arg("id"),),
           render=lambda d: f"removed {d['removed']}"),
    Action("key", "store a provider's key in the vault (read from stdin)", run=store_key, args=(
        arg("id"), arg("--value", required=True, help="'-': read the key from standard input"))),
    Action("test", "make one short call to the provider", run=test, args=(arg("id"), arg("--model"))),
    Action("list", "every model, its tiers and its price", "GET", "/v1/models",
           render=lambda d: table([dict(m, price=_price(m["price"])) for m in d["models"]], MODEL_COLUMNS)),
    Action("policy", "the model policy", run=policy, args=(choose("policy_action", show=(), set=POLICY_SET),)),
    Action("decision-models", "the plaza's decision models", "GET", "/v1/models/decision",
           render=lambda d: table(d["decision_models"])),
    Action("prices", "where prices come from; the price of one model", run=prices, args=(
        arg("model", nargs="?"), arg("--refresh", action="store_true", help="fetch the public lists now"))),
    Action("token", "issue an agent's gateway token (shown once)", "POST", "/v1/models/gateway-tokens",
           args=(arg("cid"), arg("--role", required=True), arg("--model"), arg("--task")), body=_token_body,
           render=lambda d: pairs({"agent": d["cid"], "tier": d["tier"], "api_key": d["api_key"], **d["base_urls"]})),
    Action("tokens", "the gateway's connection table", "GET", "/v1/models/gateway-tokens",
           render=lambda d: table(d["tokens"])),
    Action("revoke", "revoke an agent's gateway token", "DELETE", "/v1/models/gateway-tokens/{cid}",
           args=(arg("cid"),), render=lambda d: f"revoked {d['revoked']}"),
))
