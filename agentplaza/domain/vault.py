"""The vault's rules: names, kinds, scopes, bindings, versions, hints, slots,
the unseal lockout, which entry a consumer gets on a node, the per-node
matrix, .env parsing and the grouping of uses.

Pure code: no I/O, no clock, no cryptography.  The values themselves never
reach an event; a method that needs one (for its length and hint) takes it as
an argument and records only what the guide calls public (names, scopes,
bindings, versions, the hint of a long value).  The encryption, the vault
document and the audit file live in ``agentplaza.vault``, which the hub owns.

Events of the vault (family ``vault``) go to two kinds of aggregate:

* ``Vault``, one per plaza: the index of entries (names, kinds, labels,
  scopes, bindings, versions), the unlock slots, seal/unseal, the failed
  unseal attempts that lock unsealing, rekeys and tamper findings.
* ``VaultUsage``, one per UTC day: uses of secrets (grouped per secret,
  consumer and node per minute) and denied uses (one by one), so the many use
  events never make the ``Vault`` aggregate slow to load.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..wire import DEFAULT_KIND, VAULT_KINDS, VAULT_PLAZA_SCOPE
from .base import Context, PlazaAggregate, Refusal, fixed_id

VAULT_ID = fixed_id("vault")

#: A secret's name: upper-case letters, digits and underscores, starting with a letter.
NAME_PATTERN = re.compile(r"[A-Z][A-Z0-9_]*")
MAX_NAME_CHARS = 128
#: The kinds of secret; api_key is the default.
KINDS = VAULT_KINDS
MAX_LABEL_CHARS = 200
#: The longest value the vault keeps, in characters.
MAX_VALUE_CHARS = 16 * 1024
#: Scope: every node of the plaza (its name is the wire's), or a list of nodes.
PLAZA = VAULT_PLAZA_SCOPE
NODES = "nodes"
NODE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
MAX_NODES = 256
#: The machine the hub runs on.
HUB_NODE = "n0"
#: Bindings: consumers with an id, and the two that stand alone.
BINDING_KINDS = ("provider", "connector", "mcp", "tool", "engine")
BARE_BINDINGS = ("hf", "egress")
BINDING_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_BINDINGS = 64
#: Rotate keeps the new value and the two versions before it.
KEPT_VERSIONS = 3
#: Values this long or longer keep a hint: their last four characters.
HINT_MIN_CHARS = 20
HINT_CHARS = 4
#: Unlock slots.
SLOT_KINDS = ("keyfile", "passphrase", "recovery")
MIN_PASSPHRASE_CHARS = 12
#: The recovery code: 52 characters in groups of four separated by dashes.
RECOVERY_CODE_CHARS = 52
RECOVERY_GROUP_CHARS = 4
#: Five failed unseal attempts in one minute lock unsealing for ten minutes.
MAX_FAILED_UNSEALS = 5
FAILED_UNSEAL_WINDOW = dt.timedelta(minutes=1)
UNSEAL_LOCKOUT = dt.timedelta(minutes=10)
#: Successful uses are grouped: one record per secret, consumer and node per minute.
USE_GROUP = dt.timedelta(minutes=1)
#: The names some consumers want whatever their bindings say (the matrix's "missing").
WANTED_NAMES = {"hf": "HF_TOKEN", "engine:auggie": "AUGMENT_SESSION_AUTH"}

SEALED_MESSAGE = "the vault is sealed; unseal it with agentplaza vault unseal"
TAMPERED_MESSAGE = "the vault is tampered ({problem}); it gives out no secret"


# -- checks of one field ---------------------------------------------------------


def check_name(name: str) -> str:
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS or not NAME_PATTERN.fullmatch(name):
        raise Refusal(
            "invalid_name",
            "a secret's name is upper-case letters, digits and underscores, starting with a letter "
            f"(at most {MAX_NAME_CHARS} characters), such as ANTHROPIC_API_KEY",
        )
    return name


def check_kind(kind: str | None) -> str:
    kind = kind or DEFAULT_KIND
    if kind not in KINDS:
        raise Refusal("invalid_kind", f"the kind is one of {', '.join(KINDS)}")
    return kind


def check_label(label: str | None) -> str:
    label = (label or "").strip()
    if len(label) > MAX_LABEL_CHARS or any(ord(c) < 32 for c in label):
        raise Refusal("invalid_label", f"a label is one line of at most {MAX_LABEL_CHARS} characters")
    return label


def check_value(value: str) -> str:
    # The messages never quote the value.
    if not isinstance(value, str) or value == "":
        raise Refusal("empty_value", "the value is empty")
    if len(value) > MAX_VALUE_CHARS:
        raise Refusal("value_too_long", f"a value is at most {MAX_VALUE_CHARS} characters")
    if "\x00" in value:
        raise Refusal("invalid_value", "a value may not hold a NUL character")
    return value


def check_scope(scope: str | None, nodes: Iterable[str] | None) -> tuple[str, list[str]]:
    """(PLAZA, []) or (NODES, sorted node ids).  Give a scope or nodes, not both."""
    nodes = [n.strip() for n in (nodes or []) if n.strip()]
    if scope not in (None, "", PLAZA):
        raise Refusal("invalid_scope", "the scope is plaza, or a list of nodes (--nodes n1,n3)")
    if scope == PLAZA and nodes:
        raise Refusal("invalid_scope", "give --scope plaza or --nodes, not both")
    if not nodes:
        return PLAZA, []
    if len(nodes) > MAX_NODES:
        raise Refusal("invalid_scope", f"a scope lists at most {MAX_NODES} nodes")
    for n in nodes:
        if not NODE_PATTERN.fullmatch(n):
            raise Refusal("invalid_node", f"{n!r} is not a node id (such as n0 or n3)")
    if len(set(nodes)) != len(nodes):
        raise Refusal("invalid_scope", "a node is listed twice")
    return NODES, sorted(nodes)


def check_binding(binding: str) -> str:
    b = binding.strip() if isinstance(binding, str) else ""
    if b in BARE_BINDINGS:
        return b
    kind, sep, ident = b.partition(":")
    if sep and kind in BINDING_KINDS and BINDING_ID_PATTERN.fullmatch(ident):
        return b
    raise Refusal(
        "invalid_binding",
        f"{binding!r} is not a binding: use provider:<id>, connector:<id>, mcp:<id>, tool:<id>, "
        "engine:<id>, hf or egress",
    )


def check_bindings(bindings: Iterable[str] | None) -> list[str]:
    out: list[str] = []
    for raw in bindings or []:
        for part in str(raw).split(","):
            if part.strip():
                b = check_binding(part)
                if b not in out:
                    out.append(b)
    if len(out) > MAX_BINDINGS:
        raise Refusal("invalid_binding", f"a secret has at most {MAX_BINDINGS} bindings")
    return sorted(out)


def hint_of(value: str) -> str | None:
    """The last four characters of a value of 20 characters or more; else none."""
    return value[-HINT_CHARS:] if len(value) >= HINT_MIN_CHARS else None


def check_passphrase(passphrase: str) -> str:
    if not isinstance(passphrase, str) or len(passphrase) < MIN_PASSPHRASE_CHARS:
        raise Refusal("passphrase_too_short", f"a passphrase is at least {MIN_PASSPHRASE_CHARS} characters")
    return passphrase


#: Crockford's base32: no I, L, O or U, so a code read aloud is not misread.
RECOVERY_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def format_recovery_code(symbols: str) -> str:
    assert len(symbols) == RECOVERY_CODE_CHARS
    return "-".join(symbols[i:i + RECOVERY_GROUP_CHARS] for i in range(0, RECOVERY_CODE_CHARS, RECOVERY_GROUP_CHARS))


def normalize_recovery_code(code: str) -> str | None:
    """The code's 52 symbols, whatever the case, dashes and spaces; None if it cannot be one."""
    s = "".join(ch for ch in (code or "").upper() if ch not in "- \t\r\n")
    s = s.replace("O", "0").replace("I", "1").replace("L", "1")
    if len(s) != RECOVERY_CODE_CHARS or any(ch not in RECOVERY_ALPHABET for ch in s):
        return None
    return s


# -- entries ---------------------------------------------------------------------


@dataclass(frozen=True)
class Version:
    v: int
    hint: str | None
    at: str


@dataclass(frozen=True)
class Entry:
    """One entry of the vault, as everything outside the aggregate sees it."""

    id: str
    name: str
    kind: str
    label: str
    scope: str
    nodes: tuple[str, ...]
    bindings: tuple[str, ...]
    current: int
    versions: tuple[Version, ...]
    created_at: str
    updated_at: str

    def covers(self, node: str) -> bool:
        return self.scope == PLAZA or node in self.nodes

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(v.v for v in self.versions)

    def scope_text(self) -> str:
        return PLAZA if self.scope == PLAZA else ",".join(self.nodes)

    def public(self) -> dict:
        """What list and the API show: never a value."""
        cur = next((v for v in self.versions if v.v == self.current), None)
        return {
            "id": self.id, "name": self.name, "kind": self.kind, "label": self.label,
            "scope": self.scope_text(), "nodes": list(self.nodes), "bindings": list(self.bindings),
            "version": self.current, "versions": [{"v": v.v, "hint": v.hint, "at": v.at} for v in self.versions],
            "hint": cur.hint if cur else None, "created_at": self.created_at, "updated_at": self.updated_at,
        }


def overlap(a_scope: str, a_nodes: Iterable[str], b_scope: str, b_nodes: Iterable[str]) -> bool:
    """Two entries of one name may not cover the same ground: one plaza entry; disjoint node lists."""
    if a_scope == PLAZA or b_scope == PLAZA:
        return a_scope == b_scope
    return bool(set(a_nodes) & set(b_nodes))


def index_of(entries: Iterable[Entry]) -> dict:
    """The index as the vault document keeps it (and checksums it): no value, no time."""
    return {
        e.id: {
            "name": e.name, "kind": e.kind, "label": e.label, "scope": e.scope, "nodes": list(e.nodes),
            "bindings": list(e.bindings), "current": e.current,
            "versions": [[v.v, v.hint] for v in e.versions],
        }
        for e in sorted(entries, key=lambda e: e.id)
    }


class Denied(Refusal):
    """A consumer asked for a secret it may not have.  ``why`` is for the audit."""

    def __init__(self, name: str, consumer: str, node: str, why: str, secret_id: str | None = None):
        super().__init__("secret_unavailable", f"no secret {name} is available to {consumer} on node {node}")
        self.name, self.consumer, self.node, self.why, self.secret_id = name, consumer, node, why, secret_id


def resolve(entries: Iterable[Entry], name: str, consumer: str, node: str) -> Entry:
    """The entry a consumer gets for a name on a node: a node entry before the plaza entry.

    A secret is invisible to every consumer it is not bound to.  Raises ``Denied``
    with why = no_entry, not_bound or out_of_scope.
    """
    named = [e for e in entries if e.name == name]
    if not named:
        raise Denied(name, consumer, node, "no_entry")
    bound = [e for e in named if consumer in e.bindings]
    if not bound:
        raise Denied(name, consumer, node, "not_bound")
    for e in bound:
        if e.scope == NODES and node in e.nodes:
            return e
    for e in bound:
        if e.scope == PLAZA:
            return e
    raise Denied(name, consumer, node, "out_of_scope", bound[0].id)


def matrix(entries: list[Entry], nodes: Iterable[str] = ()) -> dict:
    """For each consumer and name it wants, the entry each node would use."""
    all_nodes = sorted({HUB_NODE, *nodes, *(n for e in entries for n in e.nodes)}, key=_node_order)
    wants: set[tuple[str, str]] = {(c, n) for c, n in WANTED_NAMES.items()}
    for e in entries:
        for b in e.bindings:
            wants.add((b, e.name))
    rows = []
    for consumer, name in sorted(wants):
        cells = {}
        for node in all_nodes:
            try:
                cells[node] = resolve(entries, name, consumer, node).id
            except Denied as d:
                cells[node] = "out_of_scope" if d.why == "out_of_scope" else "missing"
        rows.append({"consumer": consumer, "name": name, "nodes": cells})
    return {"nodes": all_nodes, "consumers": rows}


def _node_order(n: str):
    return (0, int(n[1:]), n) if n[:1] == "n" and n[1:].isdigit() else (1, 0, n)


# -- the vault aggregate -----------------------------------------------------------


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat()


class Vault(PlazaAggregate):
    family = "vault"

    class Created(PlazaAggregate.Created):
        slot_id: str
        slot_kind: str

        # The library calls __init__ with the Created event's own fields.

    class SecretAdded(PlazaAggregate.Event):
        secret_id: str
        name: str
        kind: str
        label: str
        scope: str
        nodes: list[str]
        bindings: list[str]
        v: int
        hint: str | None
        imported: bool

        def apply(self, vault: Vault) -> None:
            at = _iso(self.timestamp)
            vault.entries[self.secret_id] = {
                "name": self.name, "kind": self.kind, "label": self.label, "scope": self.scope,
                "nodes": list(self.nodes), "bindings": list(self.bindings), "current": self.v,
                "versions": [{"v": self.v, "hint": self.hint, "at": at}], "created_at": at, "updated_at": at,
            }

    class SecretRotated(PlazaAggregate.Event):
        secret_id: str
        name: str
        v: int
        hint: str | None
        destroyed: list[int]

        def apply(self, vault: Vault) -> None:
            e = vault.entries[self.secret_id]
            at = _iso(self.timestamp)
            e["versions"] = [x for x in e["versions"] if x["v"] not in self.destroyed]
            e["versions"].append({"v": self.v, "hint": self.hint, "at": at})
            e["current"] = self.v
            e["updated_at"] = at

    class SecretRolledBack(PlazaAggregate.Event):
        secret_id: str
        name: str
        v: int
        previous: int

        def apply(self, vault: Vault) -> None:
            e = vault.entries[self.secret_id]
            e["current"] = self.v
            e["updated_at"] = _iso(self.timestamp)

    class SecretRebound(PlazaAggregate.Event):
        secret_id: str
        name: str
        label: str
        scope: str
        nodes: list[str]
        bindings: list[str]

        def apply(self, vault: Vault) -> None:
            e = vault.entries[self.secret_id]
            e.update(label=self.label, scope=self.scope, nodes=list(self.nodes), bindings=list(self.bindings))
            e["updated_at"] = _iso(self.timestamp)

    class SecretDeleted(PlazaAggregate.Event):
        secret_id: str
        name: str
        destroyed: list[int]

        def apply(self, vault: Vault) -> None:
            e = vault.entries.pop(self.secret_id)
            if e["name"] not in vault.deleted_names:
                vault.deleted_names.append(e["name"])

    class Imported(PlazaAggregate.Event):
        imported: list[str]
        skipped: list[dict]

        def apply(self, vault: Vault) -> None:
            pass

    class Sealed(PlazaAggregate.Event):
        def apply(self, vault: Vault) -> None:
            vault.unsealed = False

    class Unsealed(PlazaAggregate.Event):
        method: str

        def apply(self, vault: Vault) -> None:
            vault.unsealed = True
            vault.failures = []

    class UnsealFailed(PlazaAggregate.Event):
        method: str

        def apply(self, vault: Vault) -> None:
            now = self.timestamp
            vault.failures = [f for f in vault.failures if dt.datetime.fromisoformat(f) > now - FAILED_UNSEAL_WINDOW]
            vault.failures.append(_iso(now))

    class UnsealLocked(PlazaAggregate.Event):
        until: str

        def apply(self, vault: Vault) -> None:
            vault.locked_until = self.until
            vault.failures = []

    class SlotAdded(PlazaAggregate.Event):
        slot_id: str
        slot_kind: str
        replaced: list[str]

        def apply(self, vault: Vault) -> None:
            for old in self.replaced:
                vault.slots.pop(old, None)
            vault.slots[self.slot_id] = {"kind": self.slot_kind, "at": _iso(self.timestamp)}

    class SlotRemoved(PlazaAggregate.Event):
        slot_id: str
        slot_kind: str

        def apply(self, vault: Vault) -> None:
            vault.slots.pop(self.slot_id, None)

    class Rekeyed(PlazaAggregate.Event):
        generation: int
        slots: list[str]

        def apply(self, vault: Vault) -> None:
            vault.generation = self.generation

    class TamperFound(PlazaAggregate.Event):
        problem: str

        def apply(self, vault: Vault) -> None:
            pass

    def __init__(self, slot_id: str, slot_kind: str):
        self.entries: dict[str, dict] = {}
        self.deleted_names: list[str] = []
        self.slots: dict[str, dict] = {slot_id: {"kind": slot_kind, "at": None}}
        self.failures: list[str] = []
        self.locked_until: str | None = None
        self.unsealed = True
        self.generation = 1

    # -- making the vault ---------------------------------------------------------

    @classmethod
    def create(cls, ctx: Context, slot_id: str) -> Vault:
        vault = cls.start(ctx, id=VAULT_ID, slot_id=slot_id, slot_kind="keyfile")
        vault.slots[slot_id]["at"] = _iso(ctx.at)
        return vault

    # -- reading ----------------------------------------------------------------------

    def entry(self, secret_id: str) -> Entry:
        e = self.entries.get(secret_id)
        if e is None:
            raise Refusal("unknown_secret", f"no vault entry {secret_id}")
        return _entry(secret_id, e)

    def all_entries(self) -> list[Entry]:
        return [_entry(i, e) for i, e in sorted(self.entries.items())]

    def slot_kinds(self) -> dict[str, str]:
        return {i: s["kind"] for i, s in self.slots.items()}

    # -- entries -------------------------------------------------------------------------

    def _check_fits(self, name: str, scope: str, nodes: list[str], skip: str | None = None) -> None:
        for i, e in self.entries.items():
            if i == skip or e["name"] != name:
                continue
            if overlap(scope, nodes, e["scope"], e["nodes"]):
                if scope == PLAZA:
                    raise Refusal("secret_exists", f"{name} already has a plaza-wide entry ({i}); rotate it to change its value")
                both = sorted(set(nodes) & set(e["nodes"])) or nodes
                raise Refusal("secret_exists", f"{name} already has an entry ({i}) for node {', '.join(both)}")

    def add_secret(self, ctx: Context, secret_id: str, name: str, value: str, *, kind: str | None = None,
                   label: str | None = None, scope: str | None = None, nodes: list[str] | None = None,
                   bindings: list[str] | None = None, imported: bool = False) -> Entry:
        name, kind, label = check_name(name), check_kind(kind), check_label(label)
        scope, nodes = check_scope(scope, nodes)
        bindings = check_bindings(bindings)
        check_value(value)
        if secret_id in self.entries:
            raise Refusal("secret_exists", f"the id {secret_id} is taken")
        self._check_fits(name, scope, nodes)
        self.record(self.SecretAdded, ctx, secret_id=secret_id, name=name, kind=kind, label=label, scope=scope,
                    nodes=nodes, bindings=bindings, v=1, hint=hint_of(value), imported=imported)
        return self.entry(secret_id)

    def rotate(self, ctx: Context, secret_id: str, value: str) -> tuple[Entry, list[int]]:
        """A new version; the new one and the two before it are kept, older ones destroyed."""
        e = self.entry(secret_id)
        check_value(value)
        new_v = max(e.kept) + 1
        keep = sorted(e.kept)[-(KEPT_VERSIONS - 1):] if KEPT_VERSIONS > 1 else []
        destroyed = [v for v in e.kept if v not in keep]
        self.record(self.SecretRotated, ctx, secret_id=secret_id, name=e.name, v=new_v,
                    hint=hint_of(value), destroyed=destroyed)
        return self.entry(secret_id), destroyed

    def rollback(self, ctx: Context, secret_id: str, v: int) -> Entry:
        e = self.entry(secret_id)
        if v not in e.kept:
            kept = ", ".join(str(k) for k in e.kept)
            raise Refusal("unknown_version", f"{e.name} keeps versions {kept}; version {v} is not one of them")
        if v == e.current:
            raise Refusal("already_current", f"version {v} of {e.name} is already current")
        self.record(self.SecretRolledBack, ctx, secret_id=secret_id, name=e.name, v=v, previous=e.current)
        return self.entry(secret_id)

    def rebind(self, ctx: Context, secret_id: str, *, label: str | None = None, scope: str | None = None,
               nodes: list[str] | None = None, bindings: list[str] | None = None) -> Entry:
        """Change label, scope or bindings; ``None`` keeps what is there."""
        e = self.entry(secret_id)
        new_label = e.label if label is None else check_label(label)
        if scope is None and nodes is None:
            new_scope, new_nodes = e.scope, list(e.nodes)
        else:
            new_scope, new_nodes = check_scope(scope, nodes)
        new_bindings = list(e.bindings) if bindings is None else check_bindings(bindings)
        if (new_label, new_scope, new_nodes, new_bindings) == (e.label, e.scope, list(e.nodes), list(e.bindings)):
            raise Refusal("no_change", f"{e.name} already has that label, scope and bindings")
        self._check_fits(e.name, new_scope, new_nodes, skip=secret_id)
        self.record(self.SecretRebound, ctx, secret_id=secret_id, name=e.name, label=new_label,
                    scope=new_scope, nodes=new_nodes, bindings=new_bindings)
        return self.entry(secret_id)

    def delete(self, ctx: Context, secret_id: str) -> list[int]:
        e = self.entry(secret_id)
        self.record(self.SecretDeleted, ctx, secret_id=secret_id, name=e.name, destroyed=list(e.kept))
        return list(e.kept)

    def imported(self, ctx: Context, names: list[str], skipped: list[dict]) -> None:
        self.record(self.Imported, ctx, imported=names, skipped=skipped)

    # -- seal, unseal, slots, rekey ---------------------------------------------------------

    def unseal_blocked_until(self, at: dt.datetime) -> str | None:
        if self.locked_until and dt.datetime.fromisoformat(self.locked_until) > at:
            return self.locked_until
        return None

    def check_unseal(self, at: dt.datetime) -> None:
        until = self.unseal_blocked_until(at)
        if until:
            raise Refusal(
                "vault_locked",
                f"too many failed unseal attempts; unsealing is locked until {until[:19].replace('T', ' ')} UTC",
            )

    def unseal_failed(self, ctx: Context, method: str) -> bool:
        """Records the failure; True when it locks unsealing (the fifth in a minute)."""
        self.record(self.UnsealFailed, ctx, method=method)
        if len(self.failures) >= MAX_FAILED_UNSEALS:
            self.record(self.UnsealLocked, ctx, until=_iso(ctx.at + UNSEAL_LOCKOUT))
            return True
        return False

    def unsealed_by(self, ctx: Context, method: str) -> None:
        self.record(self.Unsealed, ctx, method=method)

    def sealed_by(self, ctx: Context) -> None:
        self.record(self.Sealed, ctx)

    def add_slot(self, ctx: Context, slot_id: str, kind: str) -> list[str]:
        """A new slot; it replaces a slot of the same kind (one key file, passphrase, recovery code)."""
        if kind not in SLOT_KINDS:
            raise Refusal("invalid_slot", f"a slot is one of {', '.join(SLOT_KINDS)}")
        replaced = [i for i, s in self.slots.items() if s["kind"] == kind]
        self.record(self.SlotAdded, ctx, slot_id=slot_id, slot_kind=kind, replaced=replaced)
        return replaced

    def remove_slot(self, ctx: Context, slot_id: str) -> str:
        slot = self.slots.get(slot_id)
        if slot is None:
            raise Refusal("unknown_slot", f"no slot {slot_id}")
        if len(self.slots) == 1:
            raise Refusal("last_slot", "the vault's last slot cannot be removed: nothing could open it")
        self.record(self.SlotRemoved, ctx, slot_id=slot_id, slot_kind=slot["kind"])
        return slot["kind"]

    def rekeyed(self, ctx: Context) -> int:
        self.record(self.Rekeyed, ctx, generation=self.generation + 1, slots=sorted(self.slots))
        return self.generation

    def tamper_found(self, ctx: Context, problem: str) -> None:
        self.record(self.TamperFound, ctx, problem=problem)


def _entry(secret_id: str, e: dict) -> Entry:
    return Entry(
        id=secret_id, name=e["name"], kind=e["kind"], label=e["label"], scope=e["scope"],
        nodes=tuple(e["nodes"]), bindings=tuple(e["bindings"]), current=e["current"],
        versions=tuple(Version(x["v"], x["hint"], x["at"]) for x in sorted(e["versions"], key=lambda x: x["v"])),
        created_at=e["created_at"], updated_at=e["updated_at"],
    )


# -- uses ---------------------------------------------------------------------------------


def usage_id(day: dt.date):
    return fixed_id(f"vault-usage:{day.isoformat()}")


def minute_of(at: dt.datetime) -> dt.datetime:
    return at.replace(second=0, microsecond=0)


class VaultUsage(PlazaAggregate):
    """The uses of one UTC day."""

    family = "vault"

    class Created(PlazaAggregate.Created):
        day: str

    class SecretUsed(PlazaAggregate.Event):
        secret_id: str
        name: str
        consumer: str
        node: str
        minute: str
        count: int

        def apply(self, usage: VaultUsage) -> None:
            usage.uses += self.count

    class UseDenied(PlazaAggregate.Event):
        name: str
        consumer: str
        node: str
        why: str
        secret_id: str | None

        def apply(self, usage: VaultUsage) -> None:
            usage.denied += 1

    def __init__(self, day: str):
        self.day = day
        self.uses = 0
        self.denied = 0

    @classmethod
    def of_day(cls, ctx: Context, day: dt.date) -> VaultUsage:
        return cls.start(ctx, id=usage_id(day), day=day.isoformat())

    def used(self, ctx: Context, secret_id: str, name: str, consumer: str, node: str, minute: dt.datetime, count: int) -> None:
        self.record(self.SecretUsed, ctx, secret_id=secret_id, name=name, consumer=consumer, node=node,
                    minute=_iso(minute), count=count)

    def denied_use(self, ctx: Context, d: Denied) -> None:
        self.record(self.UseDenied, ctx, name=d.name, consumer=d.consumer, node=d.node, why=d.why, secret_id=d.secret_id)


@dataclass
class UseGroup:
    secret_id: str
    name: str
    consumer: str
    node: str
    minute: dt.datetime
    count: int = 0


class UseGroups:
    """Successful uses counted per secret, consumer and node per minute.

    ``add`` counts a use and returns the groups whose minute has ended (to be
    recorded); ``due(now)`` returns the ended groups without a new use;
    ``drain()`` returns every group (at seal and shutdown).
    """

    def __init__(self) -> None:
        self.open: dict[tuple[str, str, str, dt.datetime], UseGroup] = {}

    def add(self, entry: Entry, consumer: str, node: str, at: dt.datetime) -> list[UseGroup]:
        minute = minute_of(at)
        key = (entry.id, consumer, node, minute)
        g = self.open.get(key)
        if g is None:
            g = self.open[key] = UseGroup(entry.id, entry.name, consumer, node, minute)
        g.count += 1
        return self.due(at)

    def due(self, now: dt.datetime) -> list[UseGroup]:
        current = minute_of(now)
        ended = [k for k in self.open if k[3] < current]
        return [self.open.pop(k) for k in ended]

    def drain(self) -> list[UseGroup]:
        groups = list(self.open.values())
        self.open.clear()
        return groups


# -- .env files --------------------------------------------------------------------------


@dataclass(frozen=True)
class DotenvLine:
    line: int
    name: str | None  # None when the line is not NAME=value
    value: str


def parse_dotenv(text: str) -> list[DotenvLine]:
    """NAME=value lines; blank lines and # comments skipped; ``export`` and quotes allowed."""
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, sep, value = line.partition("=")
        if not sep:
            out.append(DotenvLine(no, None, ""))
            continue
        name, value = name.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out.append(DotenvLine(no, name, value))
    return out


def plan_import(vault: Vault, lines: list[DotenvLine], scope: str, nodes: list[str]) -> tuple[list[DotenvLine], list[dict]]:
    """Which lines to import, and each skipped one with its reason (never its value)."""
    take: list[DotenvLine] = []
    skipped: list[dict] = []
    counts: dict[str, int] = {}
    for ln in lines:
        if ln.name:
            counts[ln.name] = counts.get(ln.name, 0) + 1
    for ln in lines:
        def skip(reason: str, name: str | None = ln.name) -> None:
            skipped.append({"line": ln.line, "name": name, "reason": reason})

        if ln.name is None:
            skip("invalid: not a NAME=value line", None)
        elif len(ln.name) > MAX_NAME_CHARS or not NAME_PATTERN.fullmatch(ln.name):
            skip("invalid name: upper-case letters, digits and underscores, starting with a letter", None)
        elif ln.value == "":
            skip("empty")
        elif counts[ln.name] > 1:
            skip("repeated in the file")
        elif len(ln.value) > MAX_VALUE_CHARS or "\x00" in ln.value:
            skip("invalid value")
        elif any(e["name"] == ln.name and overlap(scope, nodes, e["scope"], e["nodes"]) for e in vault.entries.values()):
            skip("already present in that scope")
        elif ln.name in vault.deleted_names:
            skip("deleted before")
        else:
            take.append(ln)
    return take, skipped
