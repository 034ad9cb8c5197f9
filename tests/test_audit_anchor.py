"""agentplaza audit verify fails loudly, against the hub's signed checkpoints and an anchor kept elsewhere.

The attacker here can write the database (and, for the last test, the hub's files
too): an event edited with its chain recomputed, and a log with its last transaction
cut off, both read "intact" to the chain alone; the signed checkpoint, or a head the
owner kept, catches them, and the real command exits non-zero, offline and through the hub.
"""

from __future__ import annotations

import json

from support.hubproc import HubProcess, cli
from support.tamper import cut_last_transaction, open_writable, rewrite

from agentplaza.events.anchor import ANCHOR_FILE, ANCHOR_KEY_FILE

NO_NODE = ("--node", "off")


def hub(folders, database_url) -> HubProcess:
    return HubProcess(folders, database_url, args=NO_NODE).start()


def a_day(h: HubProcess) -> None:
    with h.client() as c:
        for reason in ("before the night", "the second stop"):
            assert c.post("/v1/plaza/stop", json={"reason": reason}).status_code == 200
            assert c.post("/v1/plaza/resume", json={}).status_code == 200


def verdict(h: HubProcess, *args: str) -> tuple[int, dict]:
    r = cli(h, "audit", "verify", *args, "--json")
    return r.returncode, json.loads(r.stdout)


def position_of(store, text: bytes) -> int:
    return next(p for p, _o, _v, _t, state in store._chain_events(0) if text in bytes(state))


def test_an_edited_event_with_its_chain_recomputed_is_reported_against_the_checkpoint(folders, database_url):
    h = hub(folders, database_url)
    a_day(h)
    h.stop()  # a clean stop signs the head
    rc, v = verdict(h, "--offline")
    assert rc == 0 and v["intact"] and v["anchors"][0]["source"] == "checkpoint"
    checkpoint = v["anchors"][0]["position"]
    assert checkpoint == v["position"]  # the clean stop anchored the very head

    store = open_writable(folders, database_url)
    try:
        edited = position_of(store, b"before the night")
        rewrite(store, edited, lambda s: s.replace(b"before the night", b"nothing happened"))
        assert store.verify().intact  # the chain alone cannot tell
    finally:
        store.close()

    rc, v = verdict(h, "--offline")
    assert rc == 1 and not v["intact"] and v["broken_at"] == checkpoint
    assert "differs from the signed checkpoint" in v["problem"]
    r = cli(h, "audit", "verify", "--offline")
    assert r.returncode == 1 and r.stdout.startswith(f"BROKEN at position {checkpoint}: ")

    signed = (folders.state / ANCHOR_FILE).read_text()
    again = hub(folders, database_url)
    try:
        assert "does not match its signed checkpoints" in again.output
        rc, v = verdict(again)
        assert rc == 1 and v["broken_at"] == checkpoint and "signed checkpoint" in v["problem"]
        r = cli(again, "audit", "anchor")  # no head of a tampered log is handed out for keeping
        assert r.returncode == 1 and "(chain_broken)" in r.stderr
    finally:
        again.stop()
    assert (folders.state / ANCHOR_FILE).read_text() == signed  # nothing was signed over the edit


def test_a_log_with_its_last_transaction_cut_off_is_reported(folders, database_url):
    h = hub(folders, database_url)
    a_day(h)
    h.stop()
    store = open_writable(folders, database_url)
    try:
        first = cut_last_transaction(store)
        assert store.verify().intact  # the chain alone cannot tell
    finally:
        store.close()

    rc, v = verdict(h, "--offline")
    assert rc == 1 and not v["intact"] and "were removed" in v["problem"]
    assert v["position"] == first - 1

    again = hub(folders, database_url)
    try:
        rc, v = verdict(again)  # (a hub's own new events may have taken the cut positions again)
        assert rc == 1 and "signed checkpoint" in v["problem"]
        r = cli(again, "audit", "verify")
        assert r.returncode == 1 and r.stdout.startswith("BROKEN at position ")
    finally:
        again.stop()

    # The documented way out, once the owner has the log they trust (docs/operations.md).
    (folders.state / ANCHOR_FILE).rename(folders.state / "chain-anchors.kept")
    (folders.config / ANCHOR_KEY_FILE).rename(folders.config / "chain-anchor.kept")
    fresh = hub(folders, database_url)
    try:
        rc, v = verdict(fresh)
        assert rc == 0 and v["intact"] and v["anchors"][0]["source"] == "checkpoint"
    finally:
        fresh.stop()


def test_an_anchor_kept_elsewhere_catches_an_attacker_who_also_holds_the_hub_files(folders, database_url):
    h = hub(folders, database_url)
    try:
        r = cli(h, "audit", "anchor")
        assert r.returncode == 0
        kept = r.stdout.strip()
        head, _, position = kept.partition("@")
        assert len(head) == 64 and int(position) > 0
        a_day(h)  # the log grows past the kept anchor
        rc, v = verdict(h, "--anchor", kept)
        assert rc == 0 and v["intact"] and {"given", "checkpoint"} == {a["source"] for a in v["anchors"]}
        assert any(a["anchor"] == kept for a in v["anchors"])
        r = cli(h, "audit", "verify", "--anchor", "not-a-hash@12")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "HASH@POSITION" in r.stderr
        assert r.stdout == ""
        with h.client() as c:
            refused = c.get("/v1/audit/verify", params={"anchor": "12@abc"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_anchor"
    finally:
        h.kill()  # a kill -9: the latest checkpoint may be behind the head, and that is fine
    rc, v = verdict(h, "--offline")
    assert rc == 0 and v["intact"]

    # This attacker can also remove the hub's checkpoints and their key.
    (folders.state / ANCHOR_FILE).unlink()
    (folders.config / ANCHOR_KEY_FILE).unlink()
    store = open_writable(folders, database_url)
    try:
        rewrite(store, int(position), lambda s: s[:-1] + b" }")
    finally:
        store.close()
    rc, v = verdict(h, "--offline")
    assert rc == 0 and v["intact"]  # nothing on this machine can tell any more
    rc, v = verdict(h, "--offline", "--anchor", kept)
    assert rc == 1 and v["broken_at"] == int(position) and "differs from the anchor given" in v["problem"]
    r = cli(h, "audit", "verify", "--anchor", "0" * 64 + "@x", "--offline")
    assert r.returncode == 2 and "invalid_anchor" in r.stderr


def test_a_checkpoint_whose_signature_fails_is_reported(folders):
    h = hub(folders, None)
    h.stop()
    path = folders.state / ANCHOR_FILE
    lines = path.read_text().splitlines()
    forged = json.loads(lines[-1])
    forged["position"] += 1
    path.write_text("\n".join([*lines[:-1], json.dumps(forged)]) + "\n")
    rc, v = verdict(h, "--offline")
    assert rc == 1 and not v["intact"] and "signature does not match" in v["problem"]
    path.unlink()  # checkpoints removed while their key stays
    rc, v = verdict(h, "--offline")
    assert rc == 1 and "holds no checkpoint" in v["problem"]


def test_verify_names_an_event_whose_stored_bytes_cannot_be_read(folders, database_url):
    h = hub(folders, database_url)
    h.stop()
    store = open_writable(folders, database_url)
    try:
        last = store.max_position()
        rewrite(store, last, lambda s: s[:-1] + b',"x":NaN}')  # as a damaged disk, or a poisoned write
    finally:
        store.close()
    rc, v = verdict(h, "--offline")
    assert rc == 1 and v["broken_at"] == last and "cannot be read" in v["problem"]
    r = cli(h, "audit", "verify", "--offline")
    assert r.returncode == 1 and f"BROKEN at position {last}: the event's stored bytes cannot be read" in r.stdout


def test_vault_audit_verify_exits_non_zero_through_the_hub_and_offline(folders):
    h = hub(folders, None)
    try:
        r = cli(h, "vault", "audit", "--verify")
        assert r.returncode == 0 and r.stdout.startswith("intact: ")
        path = folders.state / "vault-audit.jsonl"
        first, *rest = path.read_text().splitlines(keepends=True)
        path.write_text(first.replace('"vault_created"', '"vault_edited"') + "".join(rest))
        r = cli(h, "vault", "audit", "--verify", "--json")
        assert r.returncode == 1
        shown = json.loads(r.stdout)
        assert shown["intact"] is False and shown["broken_at"] == 1 and "MAC" in shown["problem"]
    finally:
        h.stop()
    r = cli(h, "vault", "audit", "--verify", "--offline")
    assert r.returncode == 1 and r.stdout.startswith("BROKEN at line 1: ")


def test_the_hub_signs_the_head_at_most_every_interval_and_never_over_a_cut_log(folders, database_url):
    import datetime as dt

    from support.tally import Tally

    from agentplaza.domain.base import Context
    from agentplaza.events.anchor import CHECKPOINT_EVERY_S, Anchors, check

    c = Context(actor="owner", at=dt.datetime(2026, 11, 29, tzinfo=dt.UTC), correlation_id="c", reason="t")
    now = [1000.0]
    store = open_writable(folders, database_url)
    try:
        tally = Tally.start(c, label="t")
        store.commit(tally)
        anchors = Anchors(store, folders.state, folders.config, clock=lambda: now[0]).open()
        assert anchors.checkpoint().position == store.max_position()
        tally = store.get(tally.id)
        tally.count(c)
        store.commit(tally)
        assert not anchors.due(store.max_position())  # within the interval
        now[0] += CHECKPOINT_EVERY_S
        assert anchors.due(store.max_position())
        assert anchors.checkpoint().position == store.max_position()
        assert not anchors.due(store.max_position())  # nothing new since
        assert check(store, folders.state, folders.config).intact

        cut_last_transaction(store)
        now[0] += CHECKPOINT_EVERY_S
        assert anchors.checkpoint() is None and "removed" in anchors.problem
        assert not anchors.due(10**6)  # it stops signing until the owner has looked
        assert len((folders.state / ANCHOR_FILE).read_text().splitlines()) == 2
    finally:
        store.close()
