"""The treasury over HTTP and the command line, and two hubs on one PostgreSQL paying at once."""

from __future__ import annotations

import json
import threading

import pytest
from support.hubproc import HubProcess, cli, ok
from support.treasury import Teller

from agentplaza.api.errors import status_of
from agentplaza.domain.base import Refusal


def refused(status: int, code: str, fn, *args, **kw) -> Refusal:
    """A teller's command is refused with ``code``, which the hub answers with ``status``."""
    with pytest.raises(Refusal) as info:
        fn(*args, **kw)
    assert (status_of(info.value), info.value.code) == (status, code), info.value.message
    return info.value


def test_treasury_routes_and_refusals_over_http(hub):
    with hub.client() as c, Teller(hub) as teller:
        assert ok(c.get("/v1/treasury/balances"))["budget"] == 100_000
        teller.wallet(7, "ann", "builder")
        teller.wallet("8", "bob", "critic")
        refused(409, "wallet_exists", teller.wallet, 7, "ann")
        teller.earn("7", 1000, "t1")
        held = teller.pay(7, 8, 501, "report")
        assert held["status"] == "held"
        pending = ok(c.get("/v1/treasury/payments"))["payments"]
        assert [p["amount"] for p in pending] == [501]
        assert ok(c.get("/v1/overview"))["treasury"]["pending_payments"] == 1
        done = ok(c.post(f"/v1/treasury/payments/{pending[0]['id']}/approve", json={"reason": "agreed"}))
        assert done["entries"][0]["kind"] == "Transfer" and done["payment"]["status"] == "approved"
        assert ok(c.get("/v1/treasury/payments"))["payments"] == []
        assert refused(409, "budget_exhausted", teller.charge, 7, "t1").message == "budget exhausted"
        r = c.post("/v1/treasury/mint", json={"amount": 0})
        assert r.status_code == 422 and r.json()["error"]["code"] == "mint_whole_units"
        r = c.post("/v1/treasury/mint", json={"amount": 1.5})
        assert r.status_code == 422
        refused(409, "insufficient_budget", teller.escrow, "huge", 10**9)
        wallets = {w["cid"]: w for w in ok(c.get("/v1/treasury/wallets"))["wallets"]}
        assert (wallets["7"]["balance"], wallets["8"]["balance"]) == (499, 501)
        assert wallets["7"]["share"] == "49.9%" and wallets["8"]["earned"] == 501
        j = ok(c.get("/v1/treasury/journal", params={"wallet": "8"}))["entries"]
        assert [e["kind"] for e in j] == ["Transfer"]
        j = ok(c.get("/v1/treasury/journal", params={"task": "t1", "limit": 2}))
        assert [e["kind"] for e in j["entries"]] == ["Payment", "Model call"] and j["older"]
        older = ok(c.get("/v1/treasury/journal", params={"task": "t1", "before": j["older"]}))["entries"]
        assert [e["kind"] for e in older] == ["Subcontract"]
        assert c.get("/v1/treasury/journal", params={"kind": "Nope"}).status_code == 422
        ex = ok(c.get("/v1/treasury/accounts/budget/explain"))
        assert sum(p["amount"] for p in ex["postings"]) == ex["balance"]
        assert c.get("/v1/treasury/accounts/wallet:99/explain").json()["error"]["code"] == "no_account"
        f = ok(c.get("/v1/treasury/flows"))["flows"]
        assert (f["minted"], f["escrowed"], f["paid"], f["model_calls"], f["in_circulation"]) == (100_000, 6000, 1000, 5000, 1000)
        day = ok(c.get("/v1/treasury/series", params={"by": "day"}))["series"]
        assert len(day) == 1 and day[0]["wallets"] == 1000


def test_treasury_cli(hub):
    with Teller(hub) as teller:
        teller.wallet(7, "ann", "builder")
        teller.earn("7", 200, "t1")
    r = cli(hub, "treasury", "mint", "5000")
    assert r.returncode == 0 and "budget+5000" in r.stdout and "minted            105000" in r.stdout
    r = cli(hub, "--json", "treasury", "balances")
    assert json.loads(r.stdout)["minted"] == 105_000
    r = cli(hub, "treasury", "wallets")
    assert r.returncode == 0 and "ann" in r.stdout and "builder" in r.stdout and "SHARE" in r.stdout
    r = cli(hub, "treasury", "fine", "7", "50", "--memo", "Sent the wrong figures to the client")
    assert r.returncode == 0 and "wallet:7-50 treasury+50" in r.stdout
    r = cli(hub, "treasury", "fine", "7", "5000", "--memo", "too much")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "(fine_exceeds_wallet)" in r.stderr
    r = cli(hub, "treasury", "fine", "7", "5")
    assert r.returncode == 2  # --memo is required
    r = cli(hub, "treasury", "journal", "--kind", "Fine")
    assert r.returncode == 0 and "Sent the wrong figures" in r.stdout and "Mint" not in r.stdout
    r = cli(hub, "treasury", "journal", "--wallet", "7", "--limit", "1")
    assert r.returncode == 0 and "Fine" in r.stdout and "--before" in r.stdout
    r = cli(hub, "treasury", "journal", "--task", "t1")
    assert "Subcontract" in r.stdout and "Fine" not in r.stdout
    r = cli(hub, "treasury", "explain", "7")
    assert r.returncode == 0 and "wallet:7" in r.stdout and "balance   150" in r.stdout
    r = cli(hub, "treasury", "explain", "nosuch")
    assert r.returncode == 1 and "(no_account)" in r.stderr
    r = cli(hub, "treasury", "flows")
    assert "Minted" in r.stdout and "In circulation  150" in r.stdout
    r = cli(hub, "treasury", "payments")
    assert r.returncode == 0 and "(none)" in r.stdout


def pay_loop(teller: Teller, payer: str, amount: int, rounds: int, moved: list, errors: list) -> None:
    for _ in range(rounds):
        try:
            teller.pay(payer, "8", amount, "race")
            moved.append(amount)
        except Refusal as r:
            if status_of(r) != 409 or r.code not in ("insufficient_funds", "daily_limit"):
                errors.append(f"{r.code}: {r.message}")


def test_two_writers_paying_from_one_wallet_cannot_overdraw_it_or_break_the_daily_limit(folders, postgres, tmp_path):
    """The payment tool run by two writers on one PostgreSQL at once (one beside each of two hubs); both
    hubs then show the same books."""
    from agentplaza.config import Folders

    url = postgres.new_database()
    a = HubProcess(folders, url).start()
    other = Folders(tmp_path / "b-state", tmp_path / "b-config", tmp_path / "b-data").make()
    b = HubProcess(other, url).start()
    tellers = [Teller(a), Teller(b)]
    try:
        for cid in ("7", "8", "9"):
            tellers[0].wallet(cid, f"a{cid}", "builder")
        tellers[0].earn("7", 600, "t7")  # 7 holds 600: its balance binds
        tellers[0].earn("9", 3000, "t9")  # 9 holds 3,000: the daily limit of 1,000 binds
        moved: dict[str, list] = {"7": [], "9": []}
        errors: list = []
        threads = [
            threading.Thread(target=pay_loop, args=(teller, payer, amount, 12, moved[payer], errors))
            for teller in tellers for payer, amount in (("7", 70), ("9", 90)) for _ in range(3)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        assert 0 < sum(moved["7"]) <= 600 and 600 - sum(moved["7"]) < 70  # it paid until it could not
        assert 0 < sum(moved["9"]) <= 1000 and 1000 - sum(moved["9"]) < 90  # to the daily limit, not past it
        for h in (a, b):
            with h.client() as c:
                ok(c.post("/v1/treasury/mint", json={"amount": 1}))  # the next command reads its own writes
                wallets = {w["cid"]: w["balance"] for w in ok(c.get("/v1/treasury/wallets"))["wallets"]}
                assert wallets == {"7": 600 - sum(moved["7"]), "9": 3000 - sum(moved["9"]),
                                   "8": sum(moved["7"]) + sum(moved["9"])}
                entries = ok(c.get("/v1/treasury/journal", params={"kind": "Transfer", "limit": 1000}))["entries"]
                assert len(entries) == len(moved["7"]) + len(moved["9"])
                assert all(sum(e["postings"].values()) == 0 for e in entries)
    finally:
        for teller in tellers:
            teller.close()
        a.stop()
        b.stop()
