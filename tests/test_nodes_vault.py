"""The guide, "Draining and revoking": a revoked node's "CIDs fail closed ... and the vault stops giving it
secrets". A secret bound to a joined node is revealed for it until it is revoked, never after (on both
store backends)."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from agentplaza.commands import nodes as cmd
from agentplaza.commands.unit import Commands
from agentplaza.domain.vault import Denied
from agentplaza.events.store import EventStore
from agentplaza.vault import VaultService

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
KEY = base64.urlsafe_b64encode(bytes(range(32))).decode().rstrip("=")


@pytest.fixture
def plaza(folders, database_url):
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    cmds = Commands(store, clock=lambda: T0)
    vault = VaultService.open(folders, cmds, passphrase_n=2**10, recovery_n=2**10)
    yield cmds, vault
    vault.close()
    store.close()


def test_a_revoked_node_gets_no_more_secrets(plaza):
    cmds, vault = plaza
    made = cmd.make_code(cmds, cmds.context("owner"), "atlas", 15, "https://10.0.0.1:7700", None).value
    from agentplaza.joincode import parse

    c = parse(made["code"])
    name = cmd.redeem(cmds, cmds.context("hub"), c.id, c.secret, KEY, "10.0.0.2").value.name
    vault.set(cmds.context("owner"), "HF_TOKEN", "hf_the_real_value_0123456789", nodes=[name], bindings=["hf"])
    assert vault.reveal("HF_TOKEN", consumer="hf", node=name) == "hf_the_real_value_0123456789"
    cmd.revoke(cmds, cmds.context("owner"), name)
    with pytest.raises(Denied) as e:
        vault.reveal("HF_TOKEN", consumer="hf", node=name)
    assert e.value.why == "node_revoked" and "hf_the_real" not in e.value.message
