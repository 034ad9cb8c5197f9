"""Read models of the vault: its entries (no value, ever) with their use counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..domain.base import Refusal
from ..events.records import EventRecord
from .framework import Projection, Rows, metadata

if TYPE_CHECKING:
    from .runner import ReadModels

vault_entries = sa.Table(
    "rm_vault_entries",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("scope", sa.Text, nullable=False),  # "plaza" or "n1,n3"
    sa.Column("bindings", sa.JSON, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("versions", sa.JSON, nullable=False),  # [{"v", "hint", "at"}]
    sa.Column("hint", sa.String(8)),
    sa.Column("imported", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("uses", sa.BigInteger, nullable=False),
    sa.Column("last_used_at", sa.String(40)),
    sa.Column("denied", sa.BigInteger, nullable=False),
)


def _scope(data: dict) -> str:
    return "plaza" if data["scope"] == "plaza" else ",".join(data["nodes"])


class VaultProjection(Projection):
    name = "vault"
    version = 1
    tables = (vault_entries,)

    def on_Vault_SecretAdded(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        rows.put("rm_vault_entries", {
            "id": d["secret_id"], "name": d["name"], "kind": d["kind"], "label": d["label"], "scope": _scope(d),
            "bindings": list(d["bindings"]), "version": d["v"], "versions": [{"v": d["v"], "hint": d["hint"], "at": e.at}],
            "hint": d["hint"], "imported": d["imported"], "created_at": e.at, "updated_at": e.at,
            "uses": 0, "last_used_at": None, "denied": 0,
        })

    def _change(self, e: EventRecord, rows: Rows, **changes) -> None:
        row = rows.get("rm_vault_entries", e.data["secret_id"])
        if row is not None:
            rows.put("rm_vault_entries", dict(row, updated_at=e.at, **changes))

    def on_Vault_SecretRotated(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        row = rows.get("rm_vault_entries", d["secret_id"])
        if row is not None:
            versions = [v for v in row["versions"] if v["v"] not in d["destroyed"]] + [{"v": d["v"], "hint": d["hint"], "at": e.at}]
            self._change(e, rows, version=d["v"], versions=versions, hint=d["hint"])

    def on_Vault_SecretRolledBack(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_vault_entries", e.data["secret_id"])
        if row is not None:
            hint = next((v["hint"] for v in row["versions"] if v["v"] == e.data["v"]), None)
            self._change(e, rows, version=e.data["v"], hint=hint)

    def on_Vault_SecretRebound(self, e: EventRecord, rows: Rows) -> None:
        d = e.data
        self._change(e, rows, label=d["label"], scope=_scope(d), bindings=list(d["bindings"]))

    def on_Vault_SecretDeleted(self, e: EventRecord, rows: Rows) -> None:
        rows.delete("rm_vault_entries", e.data["secret_id"])

    def on_VaultUsage_SecretUsed(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_vault_entries", e.data["secret_id"])
        if row is not None:
            rows.put("rm_vault_entries", dict(row, uses=row["uses"] + e.data["count"], last_used_at=e.data["minute"]))

    def on_VaultUsage_UseDenied(self, e: EventRecord, rows: Rows) -> None:
        row = rows.get("rm_vault_entries", e.data.get("secret_id") or "")
        if row is not None:
            rows.put("rm_vault_entries", dict(row, denied=row["denied"] + 1))


# -- the queries of the vault's screens (names, kinds, scopes, bindings, versions; never a value) ---------


def entry_rows(models: ReadModels) -> list[dict]:
    return models.rows(vault_entries, order_by=vault_entries.c.name)


def entry_row(models: ReadModels, secret_id: str) -> dict:
    rows = models.rows(vault_entries, vault_entries.c.id == secret_id)
    if not rows:
        raise Refusal("unknown_secret", f"no vault entry {secret_id}")
    return rows[0]
