"""The hub's vault on a real store (SQLite and PostgreSQL): envelope encryption, seal and
unseal, slots, rekey, crypto-shredding, tamper evidence, the audit chain and recorded uses."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat

import pytest

from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Refusal
from agentplaza.domain.vault import Denied
from agentplaza.events.store import EventStore
from agentplaza.vault import KeyFileExposed, VaultService

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
LOW_COST = dict(passphrase_n=2**10, recovery_n=2**10)  # real scrypt, cheaper parameters for tests
KEY = "sk-ant-api03-THE-real-value-0123456789"


class Rig:
    def __init__(self, folders, database_url):
        self.folders, self.url = folders, database_url
        self.now = T0
        self.open()

    def open(self):
        self.store = EventStore.open(state_dir=self.folders.state, database_url=self.url)
        self.cmds = Commands(self.store, clock=lambda: self.now)
        self.vault = VaultService.open(self.folders, self.cmds, **LOW_COST)
        return self.vault

    def reopen(self):
        self.close()
        return self.open()

    def close(self):
        self.vault.close()
        self.store.close()

    def ctx(self):
        return self.cmds.context("owner")

    def doc(self):
        return json.loads((self.folders.state / "vault.json").read_text())

    def write_doc(self, doc):
        (self.folders.state / "vault.json").write_text(json.dumps(doc))

    def kinds(self):
        return [r.kind for r in self.store.read()]


@pytest.fixture
def rig(folders, database_url):
    r = Rig(folders, database_url)
    yield r
    r.close()


def test_first_start_makes_the_vault_with_a_private_key_file_and_unseals_itself(rig, folders):
    assert rig.vault.status()["state"] == "unsealed"
    key = folders.config / "vault.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((folders.state / "vault.json").stat().st_mode) == 0o600
    e = rig.vault.set(rig.ctx(), "ANTHROPIC_API_KEY", KEY, bindings=["provider:anthropic"])
    v = rig.reopen()
    assert v.status()["state"] == "unsealed"
    assert v.reveal("ANTHROPIC_API_KEY", consumer="provider:anthropic") == KEY
    assert e.public()["hint"] == "6789"


def test_without_the_key_file_it_starts_sealed_and_any_secret_call_fails_clearly(rig, folders):
    rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    rig.vault.add_passphrase(rig.ctx(), "a long enough passphrase")
    rig.close()
    (folders.config / "vault.key").rename(folders.data / "elsewhere.key")
    v = rig.open()
    assert v.status()["state"] == "sealed"
    with pytest.raises(Refusal) as r:
        v.reveal("K", consumer="hf")
    assert r.value.code == "vault_sealed" and "agentplaza vault unseal" in r.value.message
    with pytest.raises(Refusal) as r:
        v.set(rig.ctx(), "OTHER", "x", bindings=["hf"])
    assert r.value.code == "vault_sealed"
    v.unseal("passphrase", "a long enough passphrase")
    assert v.reveal("K", consumer="hf") == KEY


def test_a_group_readable_key_file_stops_the_vault(rig, folders):
    rig.close()
    os.chmod(folders.config / "vault.key", 0o640)
    with pytest.raises(KeyFileExposed) as e:
        rig.open()
    assert "chmod 600" in str(e.value)
    rig.store.close()
    os.chmod(folders.config / "vault.key", 0o600)
    rig.open()


def test_five_wrong_passphrases_in_a_minute_lock_unsealing_for_ten_minutes(rig):
    rig.vault.add_passphrase(rig.ctx(), "the right passphrase")
    rig.vault.seal()
    for i in range(5):
        rig.now = T0 + dt.timedelta(seconds=i)
        with pytest.raises(Refusal) as r:
            rig.vault.unseal("passphrase", f"wrong guess number {i}")
        assert r.value.code == "unseal_failed"
    rig.now = T0 + dt.timedelta(minutes=5)
    with pytest.raises(Refusal) as r:
        rig.vault.unseal("passphrase", "the right passphrase")
    assert r.value.code == "vault_locked"
    assert rig.vault.status()["locked_until"]
    rig.now = T0 + dt.timedelta(minutes=10, seconds=5)
    rig.vault.unseal("passphrase", "the right passphrase")
    assert rig.kinds().count("Vault.UnsealFailed") == 5 and "Vault.UnsealLocked" in rig.kinds()
    lines = rig.vault.audit_lines(limit=500)
    assert [x["action"] for x in lines].count("unseal_failed") == 5


def test_recovery_code_shown_once_and_a_new_one_replaces_the_old(rig):
    first = rig.vault.new_recovery_code(rig.ctx())["code"]
    second = rig.vault.new_recovery_code(rig.ctx())["code"]
    assert len(first) == 52 + 12 and first != second
    rig.vault.seal()
    with pytest.raises(Refusal):
        rig.vault.unseal("recovery", first)
    rig.vault.unseal("recovery", second.lower().replace("-", " "))
    assert first not in (rig.folders.state / "vault.json").read_text()
    assert [s["kind"] for s in rig.vault.status()["slots"]] == ["keyfile", "recovery"]


def test_lost_key_file_recover_with_passphrase_then_new_key_file_slot(rig, folders):
    rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    rig.vault.add_passphrase(rig.ctx(), "a long enough passphrase")
    rig.close()
    (folders.config / "vault.key").unlink()
    v = rig.open()
    v.unseal("passphrase", "a long enough passphrase")
    old = next(s["id"] for s in v.status()["slots"] if s["kind"] == "keyfile")
    v.remove_slot(rig.ctx(), old)
    v.add_keyfile(rig.ctx())
    assert (folders.config / "vault.key").exists()
    v = rig.reopen()
    assert v.status()["state"] == "unsealed" and v.reveal("K", consumer="hf") == KEY
    with pytest.raises(Refusal) as r:
        only = [s["id"] for s in v.status()["slots"]]
        for sid in only:
            v.remove_slot(rig.ctx(), sid)
    assert r.value.code == "last_slot"


def test_rotation_destroys_old_versions_by_destroying_their_data_keys(rig):
    e = rig.vault.set(rig.ctx(), "K", "value-1", bindings=["hf"])
    for i in range(2, 6):
        rig.vault.rotate(rig.ctx(), e.id, f"value-{i}")
    doc = rig.doc()
    assert sorted(doc["material"][e.id]) == ["3", "4", "5"]
    assert rig.vault.peek_version(e.id, 2) is None and rig.vault.peek_version(e.id, 3) == "value-3"
    rig.vault.rollback(rig.ctx(), e.id, 3)
    assert rig.vault.reveal("K", consumer="hf") == "value-3"
    assert rig.vault.entry(e.id).kept == (3, 4, 5)
    rig.vault.remove(rig.ctx(), e.id)
    assert e.id not in rig.doc()["material"]
    with pytest.raises(Denied):
        rig.vault.reveal("K", consumer="hf")


def test_rebinding_reencrypts_inside_the_vault(rig):
    e = rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    before = rig.doc()["material"][e.id]["1"]
    rig.vault.rebind(rig.ctx(), e.id, bindings=["mcp:github"], nodes=["n2"])
    after = rig.doc()["material"][e.id]["1"]
    assert before["ct"] != after["ct"] and before["dk"] != after["dk"]
    with pytest.raises(Denied):
        rig.vault.reveal("K", consumer="hf", node="n2")
    with pytest.raises(Denied):
        rig.vault.reveal("K", consumer="mcp:github", node="n0")
    assert rig.vault.reveal("K", consumer="mcp:github", node="n2") == KEY


def test_an_edited_scope_or_binding_in_the_document_makes_the_vault_tampered(rig):
    e = rig.vault.set(rig.ctx(), "K", KEY, nodes=["n1"], bindings=["hf"])
    rig.close()
    doc = rig.doc()
    doc["head"]["index"][e.id]["nodes"] = ["n1", "n2"]
    rig.write_doc(doc)
    v = rig.open()
    assert v.status()["state"] == "tampered" and "checksum" in v.tampered
    with pytest.raises(Refusal) as r:
        v.reveal("K", consumer="hf", node="n1")
    assert r.value.code == "vault_tampered"
    assert "Vault.TamperFound" in rig.kinds()


def test_an_edited_binding_in_the_store_makes_the_vault_tampered(rig, folders, database_url):
    rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    rig.close()
    # rewrite the stored event as an intruder with database access would
    import sqlite3

    if database_url is None:
        con = sqlite3.connect(folders.state / "plaza.sqlite")
        rows = con.execute("SELECT rowid, state FROM stored_events WHERE topic LIKE '%SecretAdded'").fetchall()
        for rowid, state in rows:
            con.execute("UPDATE stored_events SET state=? WHERE rowid=?",
                        (state.replace(b'"hf"', b'"mcp:evil"'), rowid))
        con.commit()
        con.close()
    else:
        import psycopg

        with psycopg.connect(database_url, autocommit=True) as con:
            table = [r[0] for r in con.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE '%events'")
                     if "chain" not in r[0]][0]
            rows = con.execute(f"SELECT notification_id, state FROM {table} WHERE topic LIKE '%%SecretAdded'").fetchall()
            for nid, state in rows:
                con.execute(f"UPDATE {table} SET state=%s WHERE notification_id=%s",
                            (bytes(state).replace(b'"hf"', b'"mcp:evil"'), nid))
    v = rig.open()
    assert v.status()["state"] == "tampered" and "disagree" in v.tampered
    with pytest.raises(Refusal):
        v.reveal("K", consumer="mcp:evil")


def test_a_ciphertext_moved_to_another_entry_does_not_decrypt(rig):
    a = rig.vault.set(rig.ctx(), "A_KEY", "value of a", bindings=["hf"])
    b = rig.vault.set(rig.ctx(), "B_KEY", "value of b", bindings=["hf"])
    doc = rig.doc()
    moved = dict(doc["material"][a.id]["1"])
    vault = rig.vault
    vault._doc["material"][b.id]["1"] = moved  # an intruder swaps the records
    assert vault.peek_version(b.id, 1) is None
    # even with the data key re-locked for B's slot by the master key, the value's ties refuse it
    from agentplaza.vault import crypto
    from agentplaza.vault.service import b64, unb64

    mk = bytes(vault._mk)
    vid = doc["vault_id"]
    dk = crypto.decrypt(mk, unb64(moved["dk_nonce"]), unb64(moved["dk"]), vault._dk_aad(vid, a.id, 1))
    n, c = crypto.encrypt(mk, dk, vault._dk_aad(vid, b.id, 1))
    vault._doc["material"][b.id]["1"] = dict(moved, dk_nonce=b64(n), dk=b64(c))
    assert vault.peek_version(b.id, 1) is None
    assert vault.peek_version(a.id, 1) == "value of a"


def test_audit_chain_names_an_edited_line_and_a_deleted_line(rig, folders):
    e = rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    rig.vault.rotate(rig.ctx(), e.id, "second value")
    rig.vault.rebind(rig.ctx(), e.id, bindings=["hf", "egress"])
    assert rig.vault.audit_verify()["intact"] is True
    path = folders.state / "vault-audit.jsonl"
    good = path.read_text().splitlines(keepends=True)
    edited = list(good)
    assert '"hf"' in edited[1]
    edited[1] = edited[1].replace('"hf"', '"mcp:x"')
    path.write_text("".join(edited))
    v = rig.vault.audit_verify()
    assert (v["intact"], v["broken_at"]) == (False, 2) and "line 2" in v["problem"]
    path.write_text("".join(good[:2] + good[3:]))
    v = rig.vault.audit_verify()
    assert (v["intact"], v["broken_at"]) == (False, 3) and "line 3" in v["problem"]
    path.write_text("".join(good))
    assert rig.vault.audit_verify()["intact"]


def test_audit_lines_are_caught_up_from_the_store_after_a_crash(rig, folders):
    rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    path = folders.state / "vault-audit.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    rig.close()
    path.write_text("".join(lines[:-1]))  # the last line never reached the disk
    v = rig.open()
    assert v.audit_verify()["intact"]
    assert [x["action"] for x in v.audit_lines(limit=500)][:2] == ["vault_created", "secret_added"]


def test_uses_grouped_per_minute_and_denials_one_by_one(rig):
    rig.vault.set(rig.ctx(), "K", KEY, bindings=["provider:anthropic"])
    for s in range(0, 50, 10):
        rig.now = T0 + dt.timedelta(seconds=s)
        rig.vault.reveal("K", consumer="provider:anthropic", node="n0")
    rig.vault.reveal("K", consumer="provider:anthropic", node="n3")
    for _ in range(3):
        with pytest.raises(Denied):
            rig.vault.reveal("K", consumer="provider:openai", node="n0")
    assert rig.kinds().count("VaultUsage.UseDenied") == 3
    assert "VaultUsage.SecretUsed" not in rig.kinds()  # the minute is not over
    rig.now = T0 + dt.timedelta(minutes=1, seconds=1)
    rig.vault.flush_uses()
    used = [r.data for r in rig.store.read() if r.kind == "VaultUsage.SecretUsed"]
    assert sorted((u["node"], u["count"]) for u in used) == [("n0", 5), ("n3", 1)]
    acts = [x["action"] for x in rig.vault.audit_lines(limit=500)]
    assert acts.count("use_denied") == 3 and acts.count("secret_used") == 2


def test_rekey_relocks_everything_and_puts_the_old_key_file_back_when_a_step_fails(rig, folders):
    e = rig.vault.set(rig.ctx(), "K", KEY, bindings=["hf"])
    rig.vault.add_passphrase(rig.ctx(), "a long enough passphrase")
    key_before = (folders.config / "vault.key").read_bytes()
    doc_before = rig.doc()
    with pytest.raises(Refusal) as r:
        rig.vault.rekey(rig.ctx())
    assert r.value.code == "rekey_needs_secret"
    with pytest.raises(Refusal) as r:
        rig.vault.rekey(rig.ctx(), passphrase="not the passphrase")
    assert r.value.code == "rekey_wrong_secret"
    for step in ("key_file", "document"):
        with pytest.raises(OSError):
            rig.vault.rekey(rig.ctx(), passphrase="a long enough passphrase", fail_after=step)
        assert (folders.config / "vault.key").read_bytes() == key_before
        assert rig.doc()["slots"] == doc_before["slots"]
        assert rig.vault.reveal("K", consumer="hf") == KEY
    assert rig.vault.rekey(rig.ctx(), passphrase="a long enough passphrase")["generation"] == 2
    assert (folders.config / "vault.key").read_bytes() != key_before
    assert rig.doc()["material"][e.id]["1"]["dk"] != doc_before["material"][e.id]["1"]["dk"]
    assert rig.doc()["material"][e.id]["1"]["ct"] == doc_before["material"][e.id]["1"]["ct"]
    v = rig.reopen()
    assert v.reveal("K", consumer="hf") == KEY
    v.seal()
    v.unseal("passphrase", "a long enough passphrase")
    assert v.reveal("K", consumer="hf") == KEY


def test_a_change_interrupted_between_document_and_store_settles_on_the_next_unseal(rig):
    e = rig.vault.set(rig.ctx(), "K", "value-1", bindings=["hf"])
    v = rig.vault
    # the document got the new version staged, then the hub died before the events were stored
    vault = v._vault()
    ent, _ = vault.rotate(rig.ctx(), e.id, "value-2")
    v._stage(bytes(v._mk), v._head(vault), {e.id: {"2": v._seal_value(bytes(v._mk), ent, 2, "value-2")}})
    v = rig.reopen()
    assert v.status()["state"] == "unsealed" and v.reveal("K", consumer="hf") == "value-1"
    assert rig.doc()["next"] is None and sorted(rig.doc()["material"][e.id]) == ["1"]


def test_import_then_shred_rules_and_names_deleted_before(rig):
    out = rig.vault.import_env(rig.ctx(), "A_KEY=one\nB_KEY=two\n", bindings={"A_KEY": ["hf"]})
    assert out["imported"] == ["A_KEY", "B_KEY"] and out["all_imported"] and out["unbound"] == ["B_KEY"]
    assert "discouraged" in out["warning"]
    rig.vault.remove(rig.ctx(), rig.vault.entries()[0].id)
    again = rig.vault.import_env(rig.ctx(), "A_KEY=one\nB_KEY=two\n")
    assert {s["reason"] for s in again["skipped"]} == {"deleted before", "already present in that scope"}
    assert not again["all_imported"]
