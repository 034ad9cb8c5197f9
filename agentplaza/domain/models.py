"""Models: the providers the plaza has, the two-tier model policy, and each model call.

The policy decides which model each agent may use.  Every agent is in one of
two tiers: the orchestrator tier (the agent whose role is ``orchestrator``)
and the worker tier (every other role).  Each tier has a list of entries
``provider/model``, optionally pinned to an effort with ``@effort``; a pin
wins over what a request asks.  An agent's model is, in this order, its own,
its role's, else its tier's default, and is reported with that source.

Meta's contributor models may be trained on what they are sent; while
``allow_training_models`` is off (the default) none may be saved as a
default, the orchestrator's model, a role's model, or in a tier list.

Aggregates: ``ModelSettings`` (one: providers and policy), ``GatewayLink``
(one per agent: the hash of its gateway token), ``Usage`` (one per model
call, its single event ``ModelCalled``) and ``PriceList`` (one per source and
day: a fetched public price list).  Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .base import Context, PlazaAggregate, Refusal, _validator_for, fixed_id
from .names import check_cid, role_name

MODELS_ID = fixed_id("models")

# -- the guide's names and numbers --------------------------------------------------

ORCHESTRATOR, WORKER = "orchestrator", "worker"
TIERS = (ORCHESTRATOR, WORKER)
#: The role whose agents are in the orchestrator tier; every other role is a worker.
ORCHESTRATOR_ROLE = "orchestrator"
#: "The allowed efforts are none, minimal, low, medium, high, xhigh and max."
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: "The shipped defaults are anthropic/claude-opus-5-5 for the orchestrator and deepseek/deepseek-flash for workers."
DEFAULT_ORCHESTRATOR_MODEL = "anthropic/claude-opus-5-5"
DEFAULT_WORKER_MODEL = "deepseek/deepseek-flash"
#: The tier lists that ship (the guide's own table did not survive; these hold the defaults and the guide's examples).
SHIPPED_ORCHESTRATOR_LIST = ("anthropic/claude-opus-5-5", "openai/gpt-6-astra", "anthropic/claude-haiku-5-5")
SHIPPED_WORKER_LIST = ("deepseek/deepseek-flash", "anthropic/claude-haiku-5-5", "gemini/gemini-3.5-flash-lite",
                       "meta/muse-spark-1.3")
#: idle_sleep_min: "The default is 10. The value 0 means agents never sleep on their own. The largest value is 1440."
DEFAULT_IDLE_SLEEP_MIN = 10
MAX_IDLE_SLEEP_MIN = 1440
#: sleep_never_roles: "The default is orchestrator only."
DEFAULT_SLEEP_NEVER_ROLES = (ORCHESTRATOR_ROLE,)
#: The plaza's decision model (agentplaza decide) answers with the worker default unless set.
DEFAULT_DECISION_MODELS = (DEFAULT_WORKER_MODEL,)
#: Meta's Muse models; the contributor variants may be trained on what they are sent.
MUSE_MODELS = ("muse-wonder-1.0", "muse-spark-1.1", "muse-spark-1.2", "muse-spark-1.3")
MUSE_CONTRIBUTOR_MODELS = ("muse-spark-1.2-contributor", "muse-spark-1.3-contributor")
#: The most entries one tier list holds.
MAX_TIER_ENTRIES = 64
#: The most models a provider lists, and the longest name of anything here.
MAX_PROVIDER_MODELS = 500
MAX_NAME_CHARS = 200
#: A price is at most this many credits per million tokens (a million dollars a million tokens).
MAX_PRICE = 1_000_000_000
#: The most entries the fetch blocklist holds.
MAX_FETCH_BLOCKLIST = 1000
#: The longest host name (DNS); a ``*.`` entry may add its two characters.
MAX_HOST_CHARS = 253

ROUTES = ("gateway", "loop")  # a call came through the gateway, or from the agent's own harness
GATEWAY_ROUTE, LOOP_ROUTE = ROUTES

_PROVIDER_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}\Z")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+@-]{0,199}\Z")
#: A fetch blocklist entry: a bare host name (``example.com``), or ``*.`` and one (``*.example.net``).
BLOCK_ENTRY_RE = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))*\Z")


def is_contributor(model: str) -> bool:
    """A contributor model (by its full or short name): its provider may train on what it is sent."""
    return model.rsplit("@", 1)[0].rsplit("/", 1)[-1] in MUSE_CONTRIBUTOR_MODELS


def tier_of(role: str | None) -> str:
    return ORCHESTRATOR if role == ORCHESTRATOR_ROLE else WORKER


def check_provider_id(pid: str) -> str:
    if not isinstance(pid, str) or not _PROVIDER_ID.match(pid):
        raise Refusal("invalid_provider", f"{pid!r} is not a provider id: lower-case letters, digits, '.', '_' and '-'")
    return pid


@dataclass(frozen=True)
class Entry:
    """One tier entry: provider/model, with an effort pin or none."""

    provider: str
    model: str
    pin: str | None = None

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    def __str__(self) -> str:
        return self.name + (f"@{self.pin}" if self.pin else "")


def parse_entry(text: str, *, pins: bool = True) -> Entry:
    """``provider/model[@effort]``; an ``@`` suffix that is no effort stays part of the name."""
    if not isinstance(text, str):
        raise Refusal("invalid_model", "a model is written provider/model")
    raw = text.strip()
    pin = None
    if "@" in raw:
        head, _, tail = raw.rpartition("@")
        if tail in EFFORTS:
            raw, pin = head, tail
    provider, sep, model = raw.partition("/")
    if not sep or not model or len(raw) > MAX_NAME_CHARS or not _MODEL.match(model):
        raise Refusal("invalid_model", f"{text!r} is not a model entry: write provider/model, e.g. {DEFAULT_WORKER_MODEL}")
    check_provider_id(provider)
    if pin is not None and not pins:
        raise Refusal("invalid_model", f"{text!r}: an effort pin belongs in a tier list, not here")
    return Entry(provider, model, pin)


def blocklist_entry(entry: Any) -> str | None:
    """A fetch blocklist entry, trimmed and lower-cased; None when it is not a bare host name.

    ``example.com`` blocks the host and all of its subdomains; ``*.example.net`` the subdomains only.
    """
    if not isinstance(entry, str):
        return None
    e = entry.strip().lower()
    if len(e) > MAX_HOST_CHARS + (2 if e.startswith("*.") else 0) or not BLOCK_ENTRY_RE.match(e):
        return None
    return e


def check_fetch_blocklist(entries: Any) -> list[str]:
    """The whole blocklist: each entry a bare host name, lower-cased, duplicates removed (first kept)."""
    if not isinstance(entries, list) or len(entries) > MAX_FETCH_BLOCKLIST:
        raise Refusal("invalid_policy", f"fetch_blocklist is a list of at most {MAX_FETCH_BLOCKLIST} host names")
    out: dict[str, None] = {}
    for entry in entries:
        e = blocklist_entry(entry)
        if e is None:
            raise Refusal("invalid_blocklist_entry",
                          f"fetch_blocklist entry {entry!r} is not a bare host name: write example.com "
                          "(the host and its subdomains) or *.example.net (the subdomains only)")
        out[e] = None
    return list(out)


#: An ``@`` suffix of letters only is meant as an effort pin (a suffix with digits, such as a Vertex
#: model's date, is part of the model's name).
_PIN_LIKE = re.compile(r"[A-Za-z]+")


def check_pin(text: Any) -> Any:
    """A tier list's entry whose ``@`` suffix reads as an effort pin names one of the efforts."""
    if isinstance(text, str) and "@" in text:
        tail = text.strip().rpartition("@")[2]
        if _PIN_LIKE.fullmatch(tail) and tail not in EFFORTS:
            raise Refusal("invalid_effort", f"{text.strip()!r} pins {tail!r}, which is not an effort: "
                          f"use one of {', '.join(EFFORTS)}")
    return text


def check_effort(effort: str | None) -> str | None:
    if effort is None:
        return None
    if effort not in EFFORTS:
        raise Refusal("invalid_effort", f"{effort!r} is not an effort: use one of {', '.join(EFFORTS)}")
    return effort


def check_price(model: str, price: Any) -> list[int]:
    """A price of your own: [input, output] or [input, output, cache_read, cache_write], credits per million."""
    if (not isinstance(price, list) or len(price) not in (2, 3, 4)
            or any(type(p) is not int or p < 0 or p > MAX_PRICE for p in price)):
        raise Refusal("invalid_price", f"the price of {model} is input:output[:cache_read[:cache_write]] whole credits per million tokens")
    return list(price)


# -- the policy --------------------------------------------------------------------------

POLICY_FIELDS = ("orchestrator", "worker", "effort", "default_model", "orchestrator_model", "role_models",
                 "allow_training_models", "prices", "idle_sleep_min", "sleep_never_roles", "decision_models",
                 "fetch_blocklist", "vm_auto_checkpoints")
#: vm_auto_checkpoints: "The vm_auto_checkpoints setting is on by default. With it on, the hub takes a
#: checkpoint before any tool call in the high-risk class" (``jhrl.catalog.high_risk``).
DEFAULT_VM_AUTO_CHECKPOINTS = True
#: Fields added after policies were first stored, with the value an older stored policy reads as.
LATER_POLICY_FIELDS = {"fetch_blocklist": (), "vm_auto_checkpoints": DEFAULT_VM_AUTO_CHECKPOINTS}


def shipped_policy() -> dict:
    return {
        "orchestrator": list(SHIPPED_ORCHESTRATOR_LIST),
        "worker": list(SHIPPED_WORKER_LIST),
        "effort": None,
        "default_model": DEFAULT_WORKER_MODEL,
        "orchestrator_model": DEFAULT_ORCHESTRATOR_MODEL,
        "role_models": {},
        "allow_training_models": False,
        "prices": {},
        "idle_sleep_min": DEFAULT_IDLE_SLEEP_MIN,
        "sleep_never_roles": list(DEFAULT_SLEEP_NEVER_ROLES),
        "decision_models": list(DEFAULT_DECISION_MODELS),
        "fetch_blocklist": [],
        "vm_auto_checkpoints": DEFAULT_VM_AUTO_CHECKPOINTS,
    }


def stored_policy(p: dict) -> dict:
    """A policy as stored by any version: fields added later read as their defaults."""
    out = dict(p)
    for k, default in LATER_POLICY_FIELDS.items():
        out.setdefault(k, list(default) if isinstance(default, tuple) else default)
    return out


def _on_list(entries: list[str], model: str) -> bool:
    target = parse_entry(model, pins=False).name
    return any(parse_entry(e).name == target for e in entries)


def check_policy(p: dict) -> dict:
    """The whole policy, checked as one: every rule the guide gives. Returns it normalised."""
    if set(p) != set(POLICY_FIELDS):
        raise Refusal("invalid_policy", f"a policy has exactly the fields {', '.join(POLICY_FIELDS)}")
    allow = p["allow_training_models"]
    if type(allow) is not bool:
        raise Refusal("invalid_policy", "allow_training_models is true or false")

    def no_contributor(model: str, where: str) -> None:
        if not allow and is_contributor(model):
            raise Refusal("training_model_refused",
                          f"{model} is a contributor model: its provider may train on what it is sent; "
                          f"turn allow_training_models on to use it {where}")

    out = dict(p)
    for tier in TIERS:
        entries = p[tier]
        if not isinstance(entries, list) or not entries or len(entries) > MAX_TIER_ENTRIES:
            raise Refusal("invalid_policy", f"the {tier} list holds 1 to {MAX_TIER_ENTRIES} entries")
        parsed = [parse_entry(check_pin(e)) for e in entries]
        names = [e.name for e in parsed]
        if len(set(names)) != len(names):
            raise Refusal("invalid_policy", f"the {tier} list names a model twice")
        for e in parsed:
            no_contributor(e.name, f"in the {tier} list")
        out[tier] = [str(e) for e in parsed]
    out["effort"] = check_effort(p["effort"])
    for key, tier, what in (("default_model", WORKER, "as the worker default"),
                            ("orchestrator_model", ORCHESTRATOR, "as the orchestrator's model")):
        name = parse_entry(p[key], pins=False).name
        no_contributor(name, what)
        if not _on_list(out[tier], name):
            raise Refusal("model_not_allowed", f"{name} is not on the {tier} list, so it cannot be the model {what[3:]}")
        out[key] = name
    roles = p["role_models"]
    if not isinstance(roles, dict):
        raise Refusal("invalid_policy", "role_models maps a role to a model")
    out["role_models"] = {}
    for role, model in sorted(roles.items()):
        role_name(role)
        name = parse_entry(model, pins=False).name
        no_contributor(name, f"as the model of role {role}")
        tier = tier_of(role)
        if not _on_list(out[tier], name):
            raise Refusal("model_not_allowed", f"{name} is not on the {tier} list, so role {role} cannot use it")
        out["role_models"][role] = name
    prices = p["prices"]
    if not isinstance(prices, dict):
        raise Refusal("invalid_policy", "prices maps a model to its price")
    for model, price in prices.items():
        if not isinstance(model, str) or not model or len(model) > MAX_NAME_CHARS:
            raise Refusal("invalid_price", f"{model!r} is not a model name")
        check_price(model, price)
    minutes = p["idle_sleep_min"]
    if type(minutes) is not int or not 0 <= minutes <= MAX_IDLE_SLEEP_MIN:
        raise Refusal("invalid_policy", f"idle_sleep_min is whole minutes from 0 to {MAX_IDLE_SLEEP_MIN}")
    never = p["sleep_never_roles"]
    if not isinstance(never, list):
        raise Refusal("invalid_policy", "sleep_never_roles is a list of roles")
    out["sleep_never_roles"] = sorted({role_name(r) for r in never})
    decision = p["decision_models"]
    if not isinstance(decision, list) or not decision:
        raise Refusal("invalid_policy", "decision_models lists one model or more")
    out["decision_models"] = []
    for m in decision:
        name = parse_entry(m, pins=False).name
        no_contributor(name, "as a decision model")
        out["decision_models"].append(name)
    out["fetch_blocklist"] = check_fetch_blocklist(p["fetch_blocklist"])
    if type(p["vm_auto_checkpoints"]) is not bool:
        raise Refusal("invalid_policy", "vm_auto_checkpoints is true or false")
    return out


@dataclass(frozen=True)
class Resolved:
    model: str
    source: str  # "agent", "role" or "default"
    tier: str


def resolve(policy: dict, role: str | None, agent_model: str | None = None) -> Resolved:
    """An agent's model: its own, else its role's, else its tier's default."""
    tier = tier_of(role)
    if agent_model:
        return Resolved(agent_model, "agent", tier)
    if role and role in policy["role_models"]:
        return Resolved(policy["role_models"][role], "role", tier)
    return Resolved(policy["orchestrator_model" if tier == ORCHESTRATOR else "default_model"], "default", tier)


def check_agent_model(policy: dict, role: str | None, model: str | None) -> str | None:
    """A per-agent model must be allowed for the agent's tier (and never a refused contributor)."""
    if model is None:
        return None
    name = parse_entry(model, pins=False).name
    tier = tier_of(role)
    if not policy["allow_training_models"] and is_contributor(name):
        raise Refusal("training_model_refused", f"{name} is a contributor model and allow_training_models is off")
    if not _on_list(policy[tier], name):
        raise Refusal("model_not_allowed", f"{name} is not on the {tier} list")
    return name


@dataclass(frozen=True)
class Permit:
    """What the policy lets one call do."""

    provider: str
    model: str
    effort: str | None
    effort_source: str  # "pin", "request", "default" or "none"
    entry: str
    tier: str


def permit(policy: dict, tier: str, requested: str, requested_effort: str | None = None) -> Permit:
    """Check a call against the caller's tier. Fail closed: anything not on the list is refused.

    ``requested`` is ``provider/model`` or a bare model name; a full name is
    matched first across the list, then a bare one, in list order.
    """
    if tier not in TIERS:
        raise Refusal("model_not_allowed", f"unknown tier {tier!r}")
    if not isinstance(requested, str) or not requested.strip():
        raise Refusal("model_not_allowed", "the call names no model")
    entries = [parse_entry(e) for e in policy[tier]]
    wanted = requested.strip()
    found = next((e for e in entries if e.name == wanted), None)
    if found is None:
        found = next((e for e in entries if e.model == wanted), None)
    if found is None:
        raise Refusal("model_not_allowed", f"{wanted} is not on the {tier} list; nothing was sent to a provider")
    if not policy["allow_training_models"] and is_contributor(found.name):
        raise Refusal("training_model_refused", f"{found.name} is a contributor model and allow_training_models is off")
    if found.pin:
        effort, source = found.pin, "pin"
    elif requested_effort is not None:
        if requested_effort not in EFFORTS:
            raise Refusal("invalid_effort", f"{requested_effort!r} is not an effort: use one of {', '.join(EFFORTS)}")
        effort, source = requested_effort, "request"
    elif policy["effort"]:
        effort, source = policy["effort"], "default"
    else:
        effort, source = None, "none"
    return Permit(found.provider, found.model, effort, source, str(found), tier)


# -- providers ------------------------------------------------------------------------------

KEY_KINDS = ("vault", "env", "secret", "command", "none")
#: A key stored with ``models key ID`` (kind "vault") is the vault entry of this name, bound to provider:<id>.
VAULT_KEY_SUFFIX = "_API_KEY"


def vault_key_name(pid: str) -> str:
    """The vault entry that holds provider ``pid``'s key: ANTHROPIC_API_KEY for anthropic, AZURE_OPENAI_API_KEY ..."""
    stem = re.sub(r"[^A-Z0-9]", "_", pid.upper())
    return (stem if stem[:1].isalpha() else "P_" + stem) + VAULT_KEY_SUFFIX


def key_binding(pid: str) -> str:
    """The vault consumer a provider reads its key as."""
    return f"provider:{pid}"


def check_provider(cfg: dict) -> dict:
    """A provider's settings as an event carries them: never a key's value, only where it is."""
    check_provider_id(cfg.get("id", ""))
    wires = cfg.get("wires")
    if not isinstance(wires, dict) or not wires or any(w not in ("anthropic", "openai", "gemini") for w in wires):
        raise Refusal("invalid_provider", "a provider serves one wire or more: anthropic, openai, gemini")
    for _w, url in wires.items():
        if not isinstance(url, str) or not (url.startswith(("http://", "https://")) or url == "mock:"):
            raise Refusal("invalid_base_url", f"{url!r} is not an http(s) address")
    models = cfg.get("models")
    if not isinstance(models, list) or len(models) > MAX_PROVIDER_MODELS:
        raise Refusal("invalid_provider", f"a provider lists at most {MAX_PROVIDER_MODELS} models")
    for m in models:
        if not isinstance(m, str) or not _MODEL.match(m):
            raise Refusal("invalid_model", f"{m!r} is not a model name")
    key = cfg.get("key")
    if not isinstance(key, dict) or key.get("kind") not in KEY_KINDS:
        raise Refusal("invalid_provider", f"a provider's key is one of {', '.join(KEY_KINDS)}")
    if key["kind"] in ("env", "secret") and not isinstance(key.get("name"), str):
        raise Refusal("invalid_provider", "--env and --secret name where the key is")
    if key["kind"] == "command" and not isinstance(key.get("command"), str):
        raise Refusal("invalid_provider", "--command names the command that prints the token")
    if "value" in key:
        raise Refusal("invalid_provider", "a provider's settings never hold a key's value")
    return cfg


class ModelSettings(PlazaAggregate):
    """The providers the plaza has and its model policy: one aggregate, changed by the owner."""

    family = "models"

    class Created(PlazaAggregate.Created):
        providers: dict[str, dict]
        policy: dict

    class ProviderAdded(PlazaAggregate.Event):
        provider: dict

        def apply(self, s: ModelSettings) -> None:
            s.providers[self.provider["id"]] = dict(self.provider)

    class ProviderEdited(PlazaAggregate.Event):
        provider: dict
        changed: list[str]

        def apply(self, s: ModelSettings) -> None:
            s.providers[self.provider["id"]] = dict(self.provider)

    class ProviderRemoved(PlazaAggregate.Event):
        provider_id: str

        def apply(self, s: ModelSettings) -> None:
            s.providers.pop(self.provider_id, None)

    class PolicySet(PlazaAggregate.Event):
        policy: dict
        changed: list[str]

        def apply(self, s: ModelSettings) -> None:
            s.policy = stored_policy(self.policy)

    def __init__(self, providers: dict[str, dict], policy: dict):
        self.providers = {k: dict(v) for k, v in providers.items()}
        self.policy = stored_policy(policy)

    @classmethod
    def create(cls, ctx: Context, providers: Iterable[dict]) -> ModelSettings:
        provs = {p["id"]: check_provider(dict(p)) for p in providers}
        return cls.start(ctx, id=MODELS_ID, providers=provs, policy=check_policy(shipped_policy()))

    def provider(self, pid: str) -> dict:
        found = self.providers.get(pid)
        if found is None:
            raise Refusal("no_provider", f"no provider {pid}; see agentplaza models providers")
        return found

    def add_provider(self, ctx: Context, cfg: dict) -> None:
        check_provider(cfg)
        if cfg["id"] in self.providers:
            raise Refusal("provider_exists", f"provider {cfg['id']} is already added; use models edit")
        self.record(self.ProviderAdded, ctx, provider=cfg)

    def edit_provider(self, ctx: Context, pid: str, changes: dict) -> None:
        old = self.provider(pid)
        new = dict(old, **changes)
        check_provider(new)
        changed = sorted(k for k in changes if old.get(k) != changes[k])
        if not changed:
            raise Refusal("no_change", f"provider {pid} already has those settings")
        self.record(self.ProviderEdited, ctx, provider=new, changed=changed)

    def remove_provider(self, ctx: Context, pid: str) -> None:
        self.provider(pid)
        self.record(self.ProviderRemoved, ctx, provider_id=pid)

    def set_policy(self, ctx: Context, changes: dict) -> dict:
        unknown = set(changes) - set(POLICY_FIELDS)
        if unknown:
            raise Refusal("invalid_policy", f"no policy setting {', '.join(sorted(unknown))}")
        new = check_policy(dict(self.policy, **changes))
        changed = sorted(k for k in POLICY_FIELDS if new[k] != self.policy.get(k))
        if not changed:
            raise Refusal("no_change", "the policy already says that")
        self.record(self.PolicySet, ctx, policy=new, changed=changed)
        return new


# -- gateway links: who a gateway caller is ------------------------------------------------------


def link_id(cid: str):
    return fixed_id(f"gateway-link:{cid}")


class GatewayLink(PlazaAggregate):
    """One agent's entry in the hub's connection table: the hash of its gateway token.

    The gateway learns a caller's agent, role and task from here, never from
    the request.  The token itself is shown once, when it is issued.  ``route``
    says how its calls are charged: "gateway" (an SDK or engine given the
    gateway's address: Model call, escrow else wallet) or "loop" (the agent's
    own harness, relayed by the hub: Spend, from the task's escrow only).
    """

    family = "models"

    class Created(PlazaAggregate.Created):
        cid: str
        role: str
        token_sha256: str
        model: str | None
        task: str | None
        route: str = GATEWAY_ROUTE

    class Reissued(PlazaAggregate.Event):
        role: str
        token_sha256: str
        model: str | None
        task: str | None
        route: str = GATEWAY_ROUTE

        def apply(self, link: GatewayLink) -> None:
            link.role, link.token_sha256, link.model, link.task = self.role, self.token_sha256, self.model, self.task
            link.route = self.route
            link.revoked = False

    class Revoked(PlazaAggregate.Event):
        def apply(self, link: GatewayLink) -> None:
            link.revoked = True

    def __init__(self, cid: str, role: str, token_sha256: str, model: str | None, task: str | None,
                 route: str = GATEWAY_ROUTE):
        self.cid, self.role, self.token_sha256, self.model, self.task = cid, role, token_sha256, model, task
        self.route = route
        self.revoked = False


def issue_link(ctx: Context, existing: GatewayLink | None, policy: dict, cid: str, role: str,
               token_sha256: str, model: str | None, task: str | None, route: str = GATEWAY_ROUTE) -> GatewayLink:
    cid = check_cid(cid)
    if route not in ROUTES:
        raise Refusal("invalid_request", "a gateway link's route is gateway or loop")
    role_name(role)
    model = check_agent_model(policy, role, model)
    if existing is None:
        return GatewayLink.start(ctx, id=link_id(cid), cid=cid, role=role, token_sha256=token_sha256,
                                 model=model, task=task, route=route)
    existing.record(GatewayLink.Reissued, ctx, role=role, token_sha256=token_sha256, model=model, task=task,
                    route=route)
    return existing


# -- one model call -------------------------------------------------------------------------------


class Usage(PlazaAggregate):
    """One model call, metered: one aggregate, one event, so calls never contend."""

    family = "usage"

    class ModelCalled(PlazaAggregate.Created):
        route: str  # "gateway" or "loop"
        wire: str
        cid: str
        role: str
        tier: str
        task: str | None
        provider: str
        model: str
        effort: str | None
        stream: bool
        status: str  # "ok" or "error"
        http_status: int
        input_tokens: int
        output_tokens: int
        cache_read_tokens: int
        cache_write_tokens: int
        latency_us: int
        ttft_us: int | None
        reported_cost_micro: int | None  # the provider's own figure, in millionths of a credit
        cost_micro: int  # what the call cost, in millionths of a credit (the reported figure, else the estimate)
        cost_source: str  # "reported", "owner", "muse", "openrouter", "litellm", "unpriced" or "flat" (loop)
        charged: int  # whole credits charged
        shortfall: int  # what the payer could not pay
        payer: str | None
        entry: str | None  # the journal entry of the charge

    def __init__(self, route, wire, cid, role, tier, task, provider, model, effort, stream, status, http_status,
                 input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, latency_us, ttft_us,
                 reported_cost_micro, cost_micro, cost_source, charged, shortfall, payer, entry):
        self.call = dict(locals())
        del self.call["self"]
        self.model, self.cid, self.task = model, cid, task


def _create(cls: type, created: type, ctx: Context, id, **fields: Any):
    """Create an aggregate with a named creation event (``Usage.ModelCalled``, ``PriceList.Fetched``)."""
    payload = dict(fields, actor=ctx.actor, reason=ctx.reason, correlation_id=ctx.correlation_id)
    _validator_for(created)(payload)
    return cls._create(created, id=id, timestamp=ctx.at, **payload)


USAGE_FIELDS = tuple(k for k in Usage.ModelCalled.__annotations__)


def record_call(ctx: Context, call_id, **fields: Any) -> Usage:
    if fields.get("route") not in ROUTES:
        raise Refusal("invalid_request", "a call's route is gateway or loop")
    for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_micro", "charged", "shortfall"):
        if type(fields.get(k)) is not int or fields[k] < 0:
            raise Refusal("invalid_request", f"{k} is a whole number, 0 or more")
    return _create(Usage, Usage.ModelCalled, ctx, call_id, **fields)


# -- fetched public price lists -----------------------------------------------------------------


def price_list_id(source: str, day: str):
    return fixed_id(f"prices:{source}:{day}")


class PriceList(PlazaAggregate):
    """A public price list as fetched on one day: model -> [input, output, cache_read, cache_write] USD per million."""

    family = "models"

    class Fetched(PlazaAggregate.Created):
        source: str
        day: str
        prices: dict[str, list]
        digest: str

    def __init__(self, source: str, day: str, prices: dict, digest: str):
        self.source, self.day, self.prices, self.digest = source, day, prices, digest


def fetched_list(ctx: Context, source: str, day: str, prices: dict, digest: str) -> PriceList:
    return _create(PriceList, PriceList.Fetched, ctx, price_list_id(source, day), source=source, day=day,
                   prices=prices, digest=digest)
