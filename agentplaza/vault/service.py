"""The running vault the hub owns: envelope encryption, slots, seal and unseal,
the vault document, the audit file, and ``reveal`` for the hub's consumers.

Where things are (see docs/vault.md):

* the event store: every change and use, as ``Vault`` and ``VaultUsage``
  events (names, scopes, bindings, versions, hints; never a value, never a key);
* ``vault.json`` in the state folder: the slots (the master key locked by each
  unlock method), each version's data key locked by the master key, each value
  locked by its data key, and the index (names, scopes, bindings, versions)
  with an HMAC checksum under a key derived from the master key;
* ``vault.key`` in the config folder (0600): the key that opens the key-file slot;
* ``vault-audit.jsonl`` in the state folder: the MAC-chained audit lines.

A change is written in two steps so a crash never leaves the document and the
store disagreeing: the document first gets the change as ``next`` (new
material beside the old, and the new index with its checksum), then the
events are committed, then ``next`` is folded in and the destroyed data keys
are dropped.  Whichever of the two indexes the store agrees with wins when the
vault is next unsealed; any other disagreement marks the vault tampered.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..commands.nodes import node_revoked
from ..commands.unit import Commands
from ..config import Folders
from ..domain.base import Context, Refusal
from ..domain.vault import (
    HUB_NODE,
    NODE_PATTERN,
    RECOVERY_ALPHABET,
    RECOVERY_CODE_CHARS,
    SEALED_MESSAGE,
    TAMPERED_MESSAGE,
    VAULT_ID,
    Denied,
    Entry,
    UseGroup,
    UseGroups,
    Vault,
    VaultUsage,
    check_binding,
    check_bindings,
    check_name,
    check_passphrase,
    check_scope,
    format_recovery_code,
    index_of,
    matrix,
    normalize_recovery_code,
    parse_dotenv,
    plan_import,
    resolve,
    usage_id,
)
from ..wire import AUDIT_MAX_LIMIT, DOTENV_WARNING
from . import crypto
from .audit import AUDIT_FILE, AUDIT_KEY_FILE, AuditLog
from .files import KeyFileExposed, check_key_file, read_json, write_json, write_private
from .scrub import Scrubber

VAULT_DOCUMENT = "vault.json"
KEY_FILE = "vault.key"
DOCUMENT_FORMAT = "apz-vault/1"
KEY_FILE_FORMAT = "apz-vault-key/1"
#: The index checksum's key is derived from the master key for this purpose only.
INDEX_KEY_PURPOSE = "agentplaza vault index checksum v1"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


class VaultService:
    def __init__(self, folders: Folders, commands: Commands, *, passphrase_n: int = crypto.PASSPHRASE_SCRYPT_N,
                 recovery_n: int = crypto.RECOVERY_SCRYPT_N, scrubber: Scrubber | None = None,
                 random_source: crypto.RandomSource | None = None):
        self.folders = folders
        #: Where the vault's keys, salts, nonces and recovery codes come from: the system's random bytes
        #: (``crypto.random_bytes``) unless a caller injects another (the simulator draws them from its seed).
        self.random: crypto.RandomSource = random_source or (lambda n: crypto.random_bytes(n))
        self.cmds = commands
        self.store = commands.store
        self.doc_path = folders.state / VAULT_DOCUMENT
        self.key_path = folders.config / KEY_FILE
        self.audit = AuditLog(folders.state / AUDIT_FILE, folders.config / AUDIT_KEY_FILE, self.random)
        self.passphrase_n = passphrase_n
        self.recovery_n = recovery_n
        self._lock = threading.RLock()
        self._mk: bytearray | None = None
        self._doc: dict | None = None
        self._entries: list[Entry] = []
        self.tampered: str | None = None
        self.groups = UseGroups()
        #: Fed every value the vault holds while it is unsealed (and none while sealed): every text the
        #: hub passes on from outside goes through it (see ``scrub``).
        self.scrubber = scrubber or Scrubber()

    # -- start ---------------------------------------------------------------------------

    @classmethod
    def open(cls, folders: Folders, commands: Commands, **kw: Any) -> VaultService:
        """Make the vault on the first start; else load it, and unseal it with the key file if it can.

        Raises ``KeyFileExposed`` when other users can read the key file.
        """
        svc = cls(folders, commands, **kw)
        check_key_file(svc.key_path)
        svc.audit.open()
        with svc._lock:
            vault = svc._vault()
            doc = read_json(svc.doc_path)
            if vault is None and (doc is None or _unfinished_creation(doc)):
                svc._create()
                return svc
            svc._doc = doc
            svc._entries = vault.all_entries() if vault else []
            svc._catch_up_audit()
            if doc is None:
                svc._tamper(vault, "the vault document vault.json is missing from the state folder")
            elif vault is None:
                svc._tamper(None, "vault.json belongs to another event store (this store has no vault)")
            elif svc._keyfile_slots() and svc.key_path.exists():
                try:
                    svc.unseal("keyfile", actor="hub", reason="hub start")
                except Refusal:
                    pass
        return svc

    def _create(self) -> None:
        mk = bytearray(crypto.new_key(self.random))
        vault_id = self.cmds.new_id()
        slot_id = "slot_" + self.cmds.new_id()[:16]
        kek = crypto.new_key(self.random)
        doc = {"format": DOCUMENT_FORMAT, "vault_id": vault_id, "slots": {}, "material": {}, "next": None,
               "head": {"generation": 1, "slots": {slot_id: "keyfile"}, "index": {}}}
        doc["slots"][slot_id] = self._wrap_slot(vault_id, slot_id, "keyfile", kek, bytes(mk))
        doc["checksum"] = self._checksum(bytes(mk), vault_id, doc["head"])
        self._write_key_file(vault_id, kek)
        write_json(self.doc_path, doc)
        vault = Vault.create(self.cmds.context("hub", "the vault is made on the hub's first start"), slot_id)
        positions = self.store.commit(vault)
        self._doc, self._mk, self._entries = doc, mk, []
        self._audit(positions)

    # -- little helpers -----------------------------------------------------------------------

    def _vault(self) -> Vault | None:
        return self.store.get(VAULT_ID)

    def _catch_up_audit(self) -> None:
        self.audit.append(self.store.read(after=self.audit.last_pos))

    def _audit(self, positions: list[int]) -> None:
        if positions:
            self.audit.append(self.store.read(after=min(positions) - 1, upto=max(positions)))

    def _commit(self, *aggregates: Any) -> list[int]:
        positions = self.store.commit(*aggregates)
        self._audit(positions)
        return positions

    def _commit_staged(self, vault: Vault) -> list[int]:
        """Commit the vault's events for the change staged in the document, then fold it in;
        if the commit fails, the staged change is dropped and nothing changed."""
        try:
            positions = self.store.commit(vault)
        except BaseException:
            self._unstage()
            raise
        self._fold_next()
        return positions

    def _tamper(self, vault: Vault | None, problem: str) -> None:
        first = self.tampered != problem
        self.tampered = problem
        if vault is not None and first:
            vault.tamper_found(self.cmds.context("hub"), problem)
            self._commit(vault)

    def _keyfile_slots(self) -> list[str]:
        if not self._doc:
            return []
        slots = dict(self._doc["slots"], **((self._doc.get("next") or {}).get("slots") or {}))
        return [i for i, s in slots.items() if s["kind"] == "keyfile"]

    def _need_unsealed(self) -> bytes:
        if self._mk is None:
            raise Refusal("vault_sealed", SEALED_MESSAGE)
        if self.tampered:
            raise Refusal("vault_tampered", TAMPERED_MESSAGE.format(problem=self.tampered))
        return bytes(self._mk)

    # -- crypto on the document ------------------------------------------------------------------

    @staticmethod
    def _checksum(mk: bytes, vault_id: str, head: dict) -> str:
        return b64(crypto.mac(crypto.subkey(mk, INDEX_KEY_PURPOSE), crypto.canonical({"vault_id": vault_id, "head": head})))

    @staticmethod
    def _checksum_ok(mk: bytes, vault_id: str, head: dict, checksum: str) -> bool:
        try:
            return crypto.mac_ok(crypto.subkey(mk, INDEX_KEY_PURPOSE), crypto.canonical({"vault_id": vault_id, "head": head}), unb64(checksum))
        except (ValueError, TypeError):
            return False

    @staticmethod
    def _slot_aad(vault_id: str, slot_id: str, kind: str) -> bytes:
        return crypto.canonical({"use": "slot", "vault_id": vault_id, "slot_id": slot_id, "kind": kind})

    def _wrap_slot(self, vault_id: str, slot_id: str, kind: str, kek: bytes, mk: bytes, kdf: dict | None = None) -> dict:
        nonce, wrapped = crypto.encrypt(kek, mk, self._slot_aad(vault_id, slot_id, kind), self.random)
        return {"kind": kind, **(kdf or {}), "nonce": b64(nonce), "wrapped": b64(wrapped)}

    def _kdf_slot(self, vault_id: str, slot_id: str, kind: str, secret: str, mk: bytes) -> dict:
        n = self.passphrase_n if kind == "passphrase" else self.recovery_n
        salt = self.random(crypto.SALT_BYTES)
        kek = crypto.stretch(secret, salt, n)
        kdf = {"kdf": "scrypt", "salt": b64(salt), "n": n, "r": crypto.SCRYPT_R, "p": crypto.SCRYPT_P}
        return self._wrap_slot(vault_id, slot_id, kind, kek, mk, kdf)

    def _open_slot(self, vault_id: str, slot_id: str, slot: dict, secret: str | bytes) -> bytes | None:
        try:
            if slot["kind"] == "keyfile":
                kek = secret
            else:
                kek = crypto.stretch(secret, unb64(slot["salt"]), int(slot["n"]), int(slot["r"]), int(slot["p"]))
            return crypto.decrypt(kek, unb64(slot["nonce"]), unb64(slot["wrapped"]), self._slot_aad(vault_id, slot_id, slot["kind"]))
        except (crypto.CryptoError, KeyError, ValueError, TypeError):
            return None

    def _write_key_file(self, vault_id: str, kek: bytes) -> None:
        write_json(self.key_path, {"format": KEY_FILE_FORMAT, "vault_id": vault_id, "key": b64(kek)})

    @staticmethod
    def _dk_aad(vault_id: str, secret_id: str, v: int) -> bytes:
        return crypto.canonical({"use": "data key", "vault_id": vault_id, "secret_id": secret_id, "v": v})

    @staticmethod
    def _value_aad(vault_id: str, e: Entry, v: int) -> bytes:
        """Every value is tied to its entry, name, version, scope and bindings."""
        return crypto.canonical({"use": "value", "vault_id": vault_id, "secret_id": e.id, "name": e.name, "v": v,
                                 "scope": e.scope, "nodes": list(e.nodes), "bindings": list(e.bindings)})

    def _seal_value(self, mk: bytes, e: Entry, v: int, value: str) -> dict:
        vault_id = self._doc["vault_id"]
        dk = crypto.new_key(self.random)
        nonce, ct = crypto.encrypt(dk, value.encode("utf-8"), self._value_aad(vault_id, e, v), self.random)
        dk_nonce, dk_ct = crypto.encrypt(mk, dk, self._dk_aad(vault_id, e.id, v), self.random)
        return {"dk_nonce": b64(dk_nonce), "dk": b64(dk_ct), "nonce": b64(nonce), "ct": b64(ct)}

    def _material(self, secret_id: str, v: int) -> dict | None:
        return (self._doc["material"].get(secret_id) or {}).get(str(v))

    def _open_value(self, mk: bytes, e: Entry, v: int, rec: dict | None = None) -> str:
        rec = rec or self._material(e.id, v)
        if rec is None:
            raise crypto.CryptoError("no such version")
        vault_id = self._doc["vault_id"]
        dk = crypto.decrypt(mk, unb64(rec["dk_nonce"]), unb64(rec["dk"]), self._dk_aad(vault_id, e.id, v))
        return crypto.decrypt(dk, unb64(rec["nonce"]), unb64(rec["ct"]), self._value_aad(vault_id, e, v)).decode("utf-8")

    @staticmethod
    def _head(vault: Vault) -> dict:
        return {"generation": vault.generation, "slots": vault.slot_kinds(), "index": index_of(vault.all_entries())}

    # -- the two-step write ---------------------------------------------------------------------------

    def _stage(self, mk: bytes, head: dict, material: dict, slots: dict | None = None) -> None:
        doc = self._doc
        doc["next"] = {"head": head, "checksum": self._checksum(mk, doc["vault_id"], head),
                       "material": material, "slots": slots}
        write_json(self.doc_path, doc)

    def _unstage(self) -> None:
        self._doc["next"] = None
        write_json(self.doc_path, self._doc)

    def _fold_next(self) -> None:
        """Make ``next`` the document's head, and drop every data key the head no longer names."""
        doc = self._doc
        nxt = doc["next"]
        doc["head"], doc["checksum"] = nxt["head"], nxt["checksum"]
        if nxt.get("slots") is not None:
            doc["slots"] = nxt["slots"]
        for sid, versions in nxt["material"].items():
            doc["material"].setdefault(sid, {}).update(versions)
        doc["next"] = None
        self._prune()
        write_json(self.doc_path, doc)

    def _prune(self) -> None:
        """Crypto-shredding: the data keys of destroyed versions leave the document."""
        doc = self._doc
        index = doc["head"]["index"]
        for sid in list(doc["material"]):
            keep = {str(v) for v, _ in index[sid]["versions"]} if sid in index else set()
            doc["material"][sid] = {v: r for v, r in doc["material"][sid].items() if v in keep}
            if not doc["material"][sid]:
                del doc["material"][sid]
        for sid in list(doc["slots"]):
            if sid not in doc["head"]["slots"]:
                del doc["slots"][sid]

    def _change(self, decide: Callable[[Vault, bytes, dict], Any]) -> Any:
        """Decide on the domain, stage the material, commit the events, fold the change in."""
        with self._lock:
            mk = self._need_unsealed()
            vault = self._vault()
            material: dict = {}
            result = decide(vault, mk, material)
            if not vault.pending_events:
                return result
            self._stage(mk, self._head(vault), material)
            positions = self._commit_staged(vault)
            self._entries = vault.all_entries()
            self._audit(positions)
            self._feed_scrubber()
            return result

    # -- unseal, seal ------------------------------------------------------------------------

    def unseal(self, method: str, secret: str | None = None, *, actor: str = "owner", reason: str | None = None) -> dict:
        if method not in ("passphrase", "recovery", "keyfile"):
            raise Refusal("invalid_request", "unseal with passphrase, recovery or keyfile")
        with self._lock:
            if self._mk is not None:
                raise Refusal("vault_unsealed", "the vault is already unsealed")
            vault = self._vault()
            ctx = self.cmds.context(actor, reason)
            if vault is None or self._doc is None:
                raise Refusal("vault_tampered", TAMPERED_MESSAGE.format(problem=self.tampered))
            vault.check_unseal(ctx.at)
            doc = self._doc
            slots = dict(doc["slots"], **((doc.get("next") or {}).get("slots") or {}))
            mine = {i: s for i, s in slots.items() if s["kind"] == method}
            if not mine:
                what = {"keyfile": "key-file", "passphrase": "passphrase", "recovery": "recovery-code"}[method]
                raise Refusal("no_such_slot", f"the vault has no {what} slot")
            if method == "keyfile":
                try:
                    check_key_file(self.key_path)
                except KeyFileExposed as e:
                    raise Refusal("key_file_exposed", str(e)) from None
                kf = read_json(self.key_path) if self.key_path.exists() else None
                if kf is None:
                    raise Refusal("key_file_missing", f"the key file {self.key_path} is missing")
                secret_b: Any = unb64(kf.get("key", ""))
            elif method == "recovery":
                secret_b = normalize_recovery_code(secret or "") or ""
            else:
                secret_b = secret or ""
            found = None
            if secret_b:
                for sid, slot in mine.items():
                    found = self._open_slot(doc["vault_id"], sid, slot, secret_b)
                    if found is not None:
                        break
            if found is None:
                locked = vault.unseal_failed(ctx, method)
                self._commit(vault)
                what = {"keyfile": "the key file does not open the vault", "passphrase": "wrong passphrase",
                        "recovery": "wrong recovery code"}[method]
                if locked:
                    what += "; five failed attempts in a minute lock unsealing for ten minutes"
                raise Refusal("unseal_failed", what)
            self._mk = bytearray(found)
            self._reconcile(vault)
            vault.unsealed_by(ctx, method)
            self._commit(vault)
            return self.status()

    def _reconcile(self, vault: Vault) -> None:
        """After an unseal: settle a half-done change, check the checksum and the store, drop leftovers."""
        mk, doc = bytes(self._mk), self._doc
        head = self._head(vault)
        nxt = doc.get("next")
        cur_ok = self._checksum_ok(mk, doc["vault_id"], doc["head"], doc.get("checksum", ""))
        nxt_ok = bool(nxt) and self._checksum_ok(mk, doc["vault_id"], nxt["head"], nxt.get("checksum", ""))
        problem = None
        if nxt_ok and nxt["head"] == head:
            self._fold_next()
        elif cur_ok and doc["head"] == head:
            if nxt is not None:
                doc["next"] = None
            self._prune()
            write_json(self.doc_path, doc)
        elif not cur_ok:
            problem = "the checksum of the vault's index does not match: a name, scope, binding or slot in vault.json was changed"
        else:
            problem = "vault.json and the event store disagree about " + _difference(doc["head"], head)
        if problem is None:
            for sid, e in doc["head"]["index"].items():
                for v, _ in e["versions"]:
                    if self._material(sid, v) is None:
                        problem = f"version {v} of {e['name']} ({sid}) has no data in vault.json"
        self._entries = vault.all_entries()
        self._feed_scrubber()
        if problem:
            self._tamper(vault, problem)
        else:
            self.tampered = None

    def _feed_scrubber(self) -> None:
        """The scrubber holds every kept version of every entry (in memory only; a version that does not
        open is left out: the vault could not give it out either)."""
        if self._mk is None or self._doc is None:
            self.scrubber.forget_all()
            return
        mk, values = bytes(self._mk), []
        for e in self._entries:
            for v in e.kept:
                try:
                    values.append(self._open_value(mk, e, v))
                except (crypto.CryptoError, KeyError, ValueError, TypeError):
                    pass
        self.scrubber.hold(values)

    def seal(self, *, actor: str = "owner", reason: str | None = None) -> dict:
        with self._lock:
            if self._mk is None:
                raise Refusal("vault_sealed", "the vault is already sealed")
            self.flush_uses(everything=True)
            crypto.wipe(self._mk)
            self._mk = None
            self.scrubber.forget_all()
            vault = self._vault()
            vault.sealed_by(self.cmds.context(actor, reason))
            self._commit(vault)
            return self.status()

    @property
    def sealed(self) -> bool:
        return self._mk is None

    def status(self) -> dict:
        with self._lock:
            vault = self._vault()
            now = self.cmds.clock()
            state = "tampered" if self.tampered else ("sealed" if self._mk is None else "unsealed")
            slots = []
            if vault:
                for sid, s in sorted(vault.slots.items(), key=lambda kv: kv[1]["kind"]):
                    row = {"id": sid, "kind": s["kind"], "at": s["at"]}
                    if s["kind"] == "keyfile":
                        row["file"] = str(self.key_path)
                        row["file_present"] = self.key_path.exists()
                    slots.append(row)
            entries = self._entries
            return {
                "state": state, "sealed": self._mk is None, "tampered": self.tampered,
                "locked_until": vault.unseal_blocked_until(now) if vault else None,
                "slots": slots, "entries": len(entries),
                "nodes": sorted({HUB_NODE, *(n for e in entries for n in e.nodes)}),
                "generation": vault.generation if vault else None,
                "document": str(self.doc_path), "audit": str(self.audit.path),
            }

    # -- entries -----------------------------------------------------------------------------

    def _new_secret_id(self) -> str:
        return "sec_" + self.cmds.new_id()[:20]

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def entry(self, secret_id: str) -> Entry:
        for e in self._entries:
            if e.id == secret_id:
                return e
        raise Refusal("unknown_secret", f"no vault entry {secret_id}")

    def set(self, ctx: Context, name: str, value: str, *, kind: str | None = None, label: str | None = None,
            scope: str | None = None, nodes: list[str] | None = None, bindings: list[str] | None = None) -> Entry:
        def decide(vault: Vault, mk: bytes, material: dict) -> Entry:
            sid = self._new_secret_id()
            e = vault.add_secret(ctx, sid, name, value, kind=kind, label=label, scope=scope, nodes=nodes, bindings=bindings)
            material[sid] = {"1": self._seal_value(mk, e, 1, value)}
            return e

        return self._change(decide)

    def rotate(self, ctx: Context, secret_id: str, value: str) -> Entry:
        def decide(vault: Vault, mk: bytes, material: dict) -> Entry:
            e, _ = vault.rotate(ctx, secret_id, value)
            material[secret_id] = {str(e.current): self._seal_value(mk, e, e.current, value)}
            return e

        return self._change(decide)

    def rollback(self, ctx: Context, secret_id: str, v: int) -> Entry:
        return self._change(lambda vault, mk, material: vault.rollback(ctx, secret_id, v))

    def rebind(self, ctx: Context, secret_id: str, *, label: str | None = None, scope: str | None = None,
               nodes: list[str] | None = None, bindings: list[str] | None = None) -> Entry:
        """New scope or bindings: every kept version is re-encrypted under its new ties, inside the vault."""

        def decide(vault: Vault, mk: bytes, material: dict) -> Entry:
            old = vault.entry(secret_id)
            e = vault.rebind(ctx, secret_id, label=label, scope=scope, nodes=nodes, bindings=bindings)
            if (e.scope, e.nodes, e.bindings) != (old.scope, old.nodes, old.bindings):
                material[secret_id] = {str(v): self._seal_value(mk, e, v, self._open_value(mk, old, v)) for v in e.kept}
            return e

        return self._change(decide)

    def remove(self, ctx: Context, secret_id: str) -> list[int]:
        return self._change(lambda vault, mk, material: vault.delete(ctx, secret_id))

    def import_env(self, ctx: Context, text: str, *, nodes: list[str] | None = None,
                   bindings: dict[str, list[str]] | None = None) -> dict:
        scope, node_list = check_scope(None, nodes)
        binds = {}
        for name, bs in (bindings or {}).items():
            binds[check_name(name)] = check_bindings(bs)

        def decide(vault: Vault, mk: bytes, material: dict) -> dict:
            take, skipped = plan_import(vault, parse_dotenv(text), scope, node_list)
            for ln in take:
                sid = self._new_secret_id()
                e = vault.add_secret(ctx, sid, ln.name, ln.value, scope=scope, nodes=node_list,
                                     bindings=binds.get(ln.name, []), imported=True)
                material[sid] = {"1": self._seal_value(mk, e, 1, ln.value)}
            names = [ln.name for ln in take]
            vault.imported(ctx, names, skipped)
            unbound = [n for n in names if not binds.get(n)]
            return {"imported": names, "skipped": skipped, "all_imported": not skipped,
                    "unbound": unbound, "warning": DOTENV_WARNING}

        return self._change(decide)

    # -- slots, recovery, rekey ------------------------------------------------------------------

    def _slot_change(self, ctx: Context, kind: str, make: Callable[[str, bytes], dict]) -> str:
        with self._lock:
            mk = self._need_unsealed()
            vault = self._vault()
            slot_id = "slot_" + self.cmds.new_id()[:16]
            vault.add_slot(ctx, slot_id, kind)
            slots = {i: s for i, s in self._doc["slots"].items() if i in vault.slots}
            slots[slot_id] = make(slot_id, mk)
            self._stage(mk, self._head(vault), {}, slots)
            positions = self._commit_staged(vault)
            self._audit(positions)
            return slot_id

    def add_passphrase(self, ctx: Context, passphrase: str) -> dict:
        check_passphrase(passphrase)
        vid = self._doc["vault_id"] if self._doc else ""
        slot_id = self._slot_change(ctx, "passphrase", lambda sid, mk: self._kdf_slot(vid, sid, "passphrase", passphrase, mk))
        return {"slot": slot_id, "kind": "passphrase"}

    def new_recovery_code(self, ctx: Context) -> dict:
        """A new recovery code; it replaces the old one.  Returned once, kept nowhere."""
        raw = self.random(RECOVERY_CODE_CHARS)
        symbols = "".join(RECOVERY_ALPHABET[b % len(RECOVERY_ALPHABET)] for b in raw)  # 256 % 32 == 0: unbiased
        code = format_recovery_code(symbols)
        vid = self._doc["vault_id"] if self._doc else ""
        slot_id = self._slot_change(ctx, "recovery", lambda sid, mk: self._kdf_slot(vid, sid, "recovery", symbols, mk))
        return {"slot": slot_id, "code": code}

    def add_keyfile(self, ctx: Context) -> dict:
        """A new key-file slot, which writes a new key file."""
        vid = self._doc["vault_id"] if self._doc else ""
        kek = crypto.new_key(self.random)
        backup = self._backup_key_file()
        try:
            slot_id = self._slot_change(ctx, "keyfile", lambda sid, mk: self._wrap_slot(vid, sid, "keyfile", kek, mk))
        except BaseException:
            self._restore_key_file(backup)
            raise
        self._write_key_file(vid, kek)
        self._drop_backup(backup)
        return {"slot": slot_id, "kind": "keyfile", "file": str(self.key_path)}

    def remove_slot(self, ctx: Context, slot_id: str) -> dict:
        with self._lock:
            mk = self._need_unsealed()
            vault = self._vault()
            kind = vault.remove_slot(ctx, slot_id)
            slots = {i: s for i, s in self._doc["slots"].items() if i in vault.slots}
            self._stage(mk, self._head(vault), {}, slots)
            positions = self._commit_staged(vault)
            self._audit(positions)
            if kind == "keyfile" and self.key_path.exists():
                self.key_path.unlink()
            return {"removed": slot_id, "kind": kind}

    def _backup_key_file(self) -> Path | None:
        if not self.key_path.exists():
            return None
        backup = self.key_path.with_name(self.key_path.name + ".old")
        write_private(backup, self.key_path.read_bytes())
        return backup

    def _restore_key_file(self, backup: Path | None) -> None:
        if backup is not None and backup.exists():
            write_private(self.key_path, backup.read_bytes())
            backup.unlink()

    @staticmethod
    def _drop_backup(backup: Path | None) -> None:
        if backup is not None and backup.exists():
            backup.unlink()

    def rekey(self, ctx: Context, *, passphrase: str | None = None, recovery: str | None = None,
              fail_after: str | None = None) -> dict:
        """A new master key: every data key and every slot locked again under it.

        Each slot other than the key file needs its secret, and each one given
        is checked against its slot first.  If a step fails, the old key file
        and the old document are put back.  (``fail_after`` lets the tests make
        a step fail: "key_file" or "document".)
        """
        with self._lock:
            old_mk = self._need_unsealed()
            vault = self._vault()
            doc = self._doc
            vid = doc["vault_id"]
            given = {"passphrase": passphrase, "recovery": normalize_recovery_code(recovery or "") if recovery else None}
            for sid, slot in doc["slots"].items():
                kind = slot["kind"]
                if kind == "keyfile":
                    continue
                if not given.get(kind):
                    what = "passphrase" if kind == "passphrase" else "recovery code"
                    raise Refusal("rekey_needs_secret", f"rekey needs the {what} of the vault's {what} slot")
                opened = self._open_slot(vid, sid, slot, given[kind])
                if opened is None or opened != old_mk:
                    what = "passphrase" if kind == "passphrase" else "recovery code"
                    raise Refusal("rekey_wrong_secret", f"the {what} given does not open its slot; nothing was changed")
            new_mk = crypto.new_key(self.random)
            new_kek = crypto.new_key(self.random)
            slots = {}
            for sid, slot in doc["slots"].items():
                kind = slot["kind"]
                if kind == "keyfile":
                    slots[sid] = self._wrap_slot(vid, sid, kind, new_kek, new_mk)
                else:
                    slots[sid] = self._kdf_slot(vid, sid, kind, given[kind], new_mk)
            material: dict = {}
            for sid, versions in doc["material"].items():
                for v, rec in versions.items():
                    dk = crypto.decrypt(old_mk, unb64(rec["dk_nonce"]), unb64(rec["dk"]), self._dk_aad(vid, sid, int(v)))
                    n2, c2 = crypto.encrypt(new_mk, dk, self._dk_aad(vid, sid, int(v)), self.random)
                    material.setdefault(sid, {})[v] = dict(rec, dk_nonce=b64(n2), dk=b64(c2))
            vault.rekeyed(ctx)
            head = self._head(vault)
            backup = self._backup_key_file()
            saved = copy.deepcopy(doc)
            try:
                if any(s["kind"] == "keyfile" for s in slots.values()):
                    self._write_key_file(vid, new_kek)
                if fail_after == "key_file":
                    raise OSError("rekey stopped after the key file (test)")
                self._stage(new_mk, head, material, slots)
                if fail_after == "document":
                    raise OSError("rekey stopped after the document (test)")
                positions = self.store.commit(vault)
            except BaseException:
                self._restore_key_file(backup)
                self._doc = saved
                saved["next"] = None
                write_json(self.doc_path, saved)
                raise
            self._fold_next()
            self._drop_backup(backup)
            crypto.wipe(self._mk)
            self._mk = bytearray(new_mk)
            self._audit(positions)
            return {"generation": vault.generation, "slots": sorted(slots)}

    # -- uses ---------------------------------------------------------------------------------

    def reveal(self, name: str, *, consumer: str, node: str = HUB_NODE, actor: str = "hub") -> str:
        """The current value of ``name`` for a bound consumer on a node; the use is recorded.

        Successful uses are recorded grouped (one event and audit line per
        secret, consumer and node per minute); a denied use is recorded at once.
        Raises ``Refusal`` when sealed or tampered, ``Denied`` when the consumer
        may not have it.
        """
        with self._lock:
            mk = self._need_unsealed()
            check_binding(consumer)
            if not NODE_PATTERN.fullmatch(node or ""):
                raise Refusal("invalid_node", f"{node!r} is not a node id")
            now = self.cmds.clock()
            try:
                if node != HUB_NODE and node_revoked(self.cmds, node):  # "the vault stops giving it secrets"
                    raise Denied(name, consumer, node, "node_revoked")
                e = resolve(self._entries, name, consumer, node)
            except Denied as d:
                self._record_denial(d, actor, now)
                raise
            value = self._open_value(mk, e, e.current)
            due = self.groups.add(e, consumer, node, now)
            if due:
                self._record_uses(due, now)
            return value

    def _usage(self, ctx: Context, day: dt.date) -> VaultUsage:
        return self.store.get(usage_id(day)) or VaultUsage.of_day(ctx, day)

    def _record_denial(self, d: Denied, actor: str, now: dt.datetime) -> None:
        ctx = Context(actor if actor.split(":", 1)[0] in ("owner", "agent", "node", "hub", "token") else "hub",
                      now, self.cmds.new_id())
        usage = self._usage(ctx, now.date())
        usage.denied_use(ctx, d)
        self._commit(usage)

    def _record_uses(self, groups: list[UseGroup], now: dt.datetime) -> None:
        ctx = Context("hub", now, self.cmds.new_id())
        days: dict[dt.date, VaultUsage] = {}
        for g in groups:
            day = g.minute.date()
            if day not in days:
                days[day] = self._usage(ctx, day)
            days[day].used(ctx, g.secret_id, g.name, g.consumer, g.node, g.minute, g.count)
        self._commit(*days.values())

    def flush_uses(self, everything: bool = False) -> int:
        """Record the use groups whose minute has ended (or all of them, at seal and shutdown)."""
        with self._lock:
            now = self.cmds.clock()
            due = self.groups.drain() if everything else self.groups.due(now)
            if due:
                self._record_uses(due, now)
            return len(due)

    def consumers(self) -> dict:
        return matrix(list(self._entries))

    # -- the audit -------------------------------------------------------------------------------

    def audit_lines(self, after: int = 0, limit: int = 100) -> list[dict]:
        if not 1 <= limit <= AUDIT_MAX_LIMIT:
            raise Refusal("invalid_request", f"limit is 1 to {AUDIT_MAX_LIMIT}")
        self.flush_uses()
        return self.audit.read(after, limit)

    def audit_verify(self) -> dict:
        self.flush_uses()
        return self.audit.verify()

    # -- tests and benchmarks --------------------------------------------------------------------

    def peek_version(self, secret_id: str, v: int, *, entry: Entry | None = None) -> str | None:
        """A kept version's value, or None when it cannot be read (destroyed, sealed, moved).  Not recorded:
        for tests and benchmarks only, never routed."""
        with self._lock:
            if self._mk is None or self._doc is None:
                return None
            try:
                e = entry or self.entry(secret_id)
                return self._open_value(bytes(self._mk), e, v)
            except (crypto.CryptoError, Refusal):
                return None

    def close(self) -> None:
        with self._lock:
            try:
                self.flush_uses(everything=True)
            except Exception:  # noqa: BLE001 - a store already closed loses at most the last minute's count
                pass
            crypto.wipe(self._mk)
            self._mk = None
            self.scrubber.forget_all()


def _unfinished_creation(doc: dict) -> bool:
    """A document made on a first start that crashed before its event was stored: safe to make again."""
    return doc.get("head", {}).get("index") == {} and doc.get("head", {}).get("generation") == 1 and not doc.get("material")


def _difference(doc_head: dict, store_head: dict) -> str:
    if doc_head.get("generation") != store_head.get("generation"):
        return "the master key's generation"
    if doc_head.get("slots") != store_head.get("slots"):
        return "the unlock slots"
    a, b = doc_head.get("index", {}), store_head.get("index", {})
    for sid in sorted(set(a) | set(b)):
        if a.get(sid) != b.get(sid):
            name = (b.get(sid) or a.get(sid) or {}).get("name", "?")
            return f"entry {sid} ({name})"
    return "the index"
