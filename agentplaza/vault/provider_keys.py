"""A model provider's key in the vault: binding an existing entry to the provider, or putting
its key in (a new entry bound to ``provider:<id>``, or a new version of the bound one)."""

from __future__ import annotations

from ..domain.base import Context, Refusal
from ..domain.vault import PLAZA
from .service import VaultService


def bind_secret(vault: VaultService, ctx: Context, name: str, binding: str) -> None:
    """``--secret NAME``: bind the existing vault entry NAME (each of its entries) to ``binding``."""
    entries = [e for e in vault.entries() if e.name == name]
    if not entries:
        raise Refusal("unknown_secret", f"the vault has no entry {name}; add it with agentplaza vault set {name}")
    for e in entries:
        if binding not in e.bindings:
            vault.rebind(ctx, e.id, bindings=[*e.bindings, binding])


def put_key(vault: VaultService, ctx: Context, name: str, binding: str, value: str, pid: str) -> None:
    """The key of provider ``pid`` into the vault entry ``name`` (plaza-wide), bound to ``binding``."""
    plaza_entries = [e for e in vault.entries() if e.name == name and e.scope == PLAZA]
    if not plaza_entries:
        vault.set(ctx, name, value, kind="api_key", label=f"key of provider {pid}", scope=PLAZA, bindings=[binding])
        return
    e = plaza_entries[0]
    if binding not in e.bindings:
        raise Refusal("secret_not_bound",
                      f"the vault entry {name} exists and is not bound to {binding}; bind it with "
                      f"agentplaza models edit {pid} --secret {name}, then set the key again")
    vault.rotate(ctx, e.id, value)
