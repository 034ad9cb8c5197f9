"""Any sequence of set, rotate, rollback, rebind, delete, seal, unseal and rekey leaves every
current value readable by exactly its bound consumers on the nodes in its scope, and every
destroyed version unreadable.  The model is a plain dict of what each entry should hold."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from agentplaza.commands.unit import Commands
from agentplaza.config import Folders
from agentplaza.domain.base import Refusal
from agentplaza.domain.vault import KEPT_VERSIONS, Denied
from agentplaza.events.store import EventStore
from agentplaza.vault import VaultService

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
PASSPHRASE = "property passphrase"
NAMES = ["ALPHA_KEY", "BETA_TOKEN"]
CONSUMERS = ["provider:anthropic", "mcp:github", "hf", "egress"]
NODES = ["n0", "n1", "n2"]

values = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x24F), min_size=1, max_size=30)
binding_sets = st.lists(st.sampled_from(CONSUMERS), max_size=3, unique=True)
scopes = st.one_of(st.none(), st.lists(st.sampled_from(NODES), min_size=1, max_size=2, unique=True))


class VaultMachine(RuleBasedStateMachine):
    secrets = Bundle("secrets")

    @initialize()
    def open(self):
        self.dir = Path(tempfile.mkdtemp(prefix="apz-vault-prop."))
        self.folders = Folders(self.dir / "s", self.dir / "c", self.dir / "d").make()
        self.now = T0
        self.store = EventStore.open(state_dir=self.folders.state)
        self.cmds = Commands(self.store, clock=lambda: self.now)
        self.vault = VaultService.open(self.folders, self.cmds, passphrase_n=2**8, recovery_n=2**8)
        self.vault.add_passphrase(self.cmds.context("owner"), PASSPHRASE)
        # model: id -> {"name", "nodes" (None = plaza), "bindings", "versions": {v: value}, "current"}
        self.model: dict[str, dict] = {}
        self.destroyed: list[tuple[str, int, object, str]] = []  # (id, v, the entry then, value)
        self.sealed = False

    def teardown(self):
        if hasattr(self, "vault"):
            self.vault.close()
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def ctx(self):
        self.now += dt.timedelta(seconds=7)
        return self.cmds.context("owner")

    def _fits(self, name, nodes, skip=None):
        for sid, m in self.model.items():
            if sid == skip or m["name"] != name:
                continue
            if nodes is None or m["nodes"] is None:
                if nodes is None and m["nodes"] is None:
                    return False
            elif set(nodes) & set(m["nodes"]):
                return False
        return True

    @precondition(lambda self: not self.sealed)
    @rule(target=secrets, name=st.sampled_from(NAMES), value=values, nodes=scopes, bindings=binding_sets)
    def set(self, name, value, nodes, bindings):
        try:
            e = self.vault.set(self.ctx(), name, value, nodes=nodes, bindings=bindings)
        except Refusal as r:
            assert r.code == "secret_exists" and not self._fits(name, nodes)
            return "none"
        assert self._fits(name, nodes)
        self.model[e.id] = {"name": name, "nodes": sorted(nodes) if nodes else None, "bindings": sorted(bindings),
                            "versions": {1: value}, "current": 1}
        return e.id

    @precondition(lambda self: not self.sealed)
    @rule(sid=secrets, value=values)
    def rotate(self, sid, value):
        if sid not in self.model:
            return
        before = self.vault.entry(sid)
        self.vault.rotate(self.ctx(), sid, value)
        m = self.model[sid]
        v = max(m["versions"]) + 1
        m["versions"][v] = value
        m["current"] = v
        for old in sorted(m["versions"])[:-KEPT_VERSIONS]:
            self.destroyed.append((sid, old, before, m["versions"].pop(old)))

    @precondition(lambda self: not self.sealed)
    @rule(sid=secrets, pick=st.integers(0, 5))
    def rollback(self, sid, pick):
        if sid not in self.model:
            return
        m = self.model[sid]
        v = sorted(m["versions"])[pick % len(m["versions"])]
        try:
            self.vault.rollback(self.ctx(), sid, v)
        except Refusal as r:
            assert r.code == "already_current" and v == m["current"]
            return
        m["current"] = v

    @precondition(lambda self: not self.sealed)
    @rule(sid=secrets, nodes=scopes, bindings=binding_sets)
    def rebind(self, sid, nodes, bindings):
        if sid not in self.model:
            return
        m = self.model[sid]
        try:
            self.vault.rebind(self.ctx(), sid, scope="plaza" if nodes is None else None, nodes=nodes, bindings=bindings)
        except Refusal as r:
            assert r.code in ("secret_exists", "no_change")
            if r.code == "secret_exists":
                assert not self._fits(m["name"], nodes, skip=sid)
            return
        m["nodes"], m["bindings"] = (sorted(nodes) if nodes else None), sorted(bindings)

    @precondition(lambda self: not self.sealed)
    @rule(sid=secrets)
    def delete(self, sid):
        if sid not in self.model:
            return
        before = self.vault.entry(sid)
        self.vault.remove(self.ctx(), sid)
        for v, value in self.model.pop(sid)["versions"].items():
            self.destroyed.append((sid, v, before, value))

    @precondition(lambda self: not self.sealed)
    @rule()
    def seal(self):
        self.vault.seal()
        self.sealed = True

    @precondition(lambda self: self.sealed)
    @rule(method=st.sampled_from(["passphrase", "keyfile"]))
    def unseal(self, method):
        self.vault.unseal(method, PASSPHRASE if method == "passphrase" else None)
        self.sealed = False

    @precondition(lambda self: not self.sealed)
    @rule()
    def rekey(self):
        self.vault.rekey(self.ctx(), passphrase=PASSPHRASE)

    @rule()
    def restart(self):
        self.vault.close()
        self.store.close()
        self.store = EventStore.open(state_dir=self.folders.state)
        self.cmds = Commands(self.store, clock=lambda: self.now)
        self.vault = VaultService.open(self.folders, self.cmds, passphrase_n=2**8, recovery_n=2**8)
        self.sealed = False  # the key file unseals it

    @invariant()
    def every_current_value_for_exactly_its_bound_consumers(self):
        if not hasattr(self, "vault"):
            return
        if self.sealed:
            for name in NAMES:
                try:
                    self.vault.reveal(name, consumer="hf")
                except Refusal as r:
                    assert r.code == "vault_sealed"
                else:
                    raise AssertionError("a sealed vault gave out a value")
            return
        assert self.vault.status()["state"] == "unsealed"
        for name in NAMES:
            for consumer in CONSUMERS:
                for node in NODES:
                    bound = [m for m in self.model.values() if m["name"] == name and consumer in m["bindings"]]
                    want = next((m for m in bound if m["nodes"] and node in m["nodes"]), None) or \
                        next((m for m in bound if m["nodes"] is None), None)
                    try:
                        got = self.vault.reveal(name, consumer=consumer, node=node)
                    except Denied:
                        assert want is None, (name, consumer, node)
                    else:
                        assert want is not None and got == want["versions"][want["current"]], (name, consumer, node)

    @invariant()
    def every_kept_version_reads_and_every_destroyed_one_does_not(self):
        if not hasattr(self, "vault") or self.sealed:
            return
        for sid, m in self.model.items():
            for v, value in m["versions"].items():
                assert self.vault.peek_version(sid, v) == value
        for sid, v, entry_then, _value in self.destroyed:
            assert self.vault.peek_version(sid, v, entry=entry_then) is None

    @invariant()
    def the_audit_chain_holds(self):
        if hasattr(self, "vault"):
            assert self.vault.audit.verify()["intact"]


VaultMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_vault_machine = VaultMachine.TestCase
