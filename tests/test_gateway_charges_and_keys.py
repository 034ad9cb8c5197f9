"""The gateway with the real treasury and the real vault: every charging path, the key path, STOP ALL.

A real apid; callers use the official SDKs.  Costs are told to the mock with
``[mock:cost USD]`` (1 credit = $0.001), so each charge is exact.  Keys go in
through the CLI from standard input and must reach the local fake upstream,
which refuses any other key.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from support.deadline import until
from support.fake_upstream import KEYS, FakeUpstream
from support.hubproc import HubProcess
from support.treasury import Teller
from test_gateway import cli, token

MSG = [{"role": "user", "content": "x"}]


@pytest.fixture
def upstream():
    with FakeUpstream() as up:
        yield up


@pytest.fixture
def hub(folders, upstream):
    h = HubProcess(folders)
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start()
    with h.client() as c:
        assert c.post("/v1/models/providers", json={"id": "mock"}).status_code == 200
        for wire in ("anthropic", "openai"):  # the key stays where a new install keeps it: the vault
            r = c.patch(f"/v1/models/providers/{wire}", json={"base_url": upstream.url + ("/v1" if wire == "openai" else "")})
            assert r.status_code == 200, r.text
        r = c.patch("/v1/models/policy", json={
            "worker": ["deepseek/deepseek-flash", "mock/echo", "anthropic/claude-haiku-5-5", "openai/gpt-6-luna"]})
        assert r.status_code == 200, r.text
    yield h
    h.stop()


def openai_client(t: dict) -> openai.OpenAI:
    return openai.OpenAI(base_url=t["base_urls"]["openai"], api_key="plaza", max_retries=0)


def ask(o: openai.OpenAI, usd: str) -> str:
    r = o.chat.completions.create(model="echo", messages=[{"role": "user", "content": f"hi [mock:cost {usd}]"}])
    return r.choices[0].message.content


def recorded(h: HubProcess, n: int, **params) -> list[dict]:
    """The last ``n`` calls, oldest first, once the hub has recorded them."""
    with h.client() as c:
        got = until(f"{n} calls recorded",
                    lambda: (got := c.get("/v1/usage/calls", params=params).json()["calls"]) and len(got) >= n and got)
        return list(reversed(got[:n]))


def balance(h: HubProcess, account: str) -> int:
    with h.client() as c:
        r = until(f"account {account} known", lambda: (r := c.get(f"/v1/treasury/accounts/{account}/explain"))
                  .status_code == 200 and r)
        return r.json()["balance"]


def settled(h: HubProcess, account: str, expected: int) -> bool:
    """The account's balance reaches ``expected`` (the recorder charges a moment after each call)."""
    try:
        return until(f"account {account} at {expected}", lambda: balance(h, account) == expected, timeout=5)
    except AssertionError:
        return False


def fund_task(h: HubProcess, task: str, amount: int) -> None:
    with Teller(h) as teller:
        teller.escrow(task, amount)


def test_charged_to_the_escrow_while_it_holds_money_then_to_the_wallet(hub):
    fund_task(hub, "t1", 10)
    t = token(hub, "7", credits=100, task="t1")
    o = openai_client(t)
    assert ask(o, "0.004") == "hi"  # 4 credits: the escrow holds 10
    assert ask(o, "0.008") == "hi"  # 8 credits: the escrow holds 6, pays 6, 2 short
    assert ask(o, "0.003") == "hi"  # the escrow is empty: the wallet pays
    calls = recorded(hub, 3)
    assert [(c["payer"], c["charged"], c["shortfall"]) for c in calls] == \
        [("escrow:t1", 4, 0), ("escrow:t1", 6, 2), ("wallet:7", 3, 0)]
    assert all(c["entry"] and c["task"] == "t1" and c["cost_source"] == "reported" for c in calls)
    assert settled(hub, "escrow:t1", 0) and settled(hub, "wallet:7", 97)
    with hub.client() as c:
        journal = c.get("/v1/treasury/journal", params={"kind": "Model call", "task": "t1"}).json()
        entries = journal["entries"]
        assert sorted(e["id"] for e in entries) == sorted(c["entry"] for c in calls)
        assert sorted(e["shortfall"] for e in entries) == [0, 0, 2]
        assert c.get("/v1/treasury").json()["model_costs"] == 4 + 6 + 3


def test_a_priced_call_is_charged_to_the_wallet(hub):
    t = token(hub, "8", credits=50)
    with hub.client() as c:
        c.patch("/v1/models/policy", json={"prices": {"mock/echo": [1_000_000, 2_000_000]}})  # 1 and 2 credits a token
    r = openai_client(t).chat.completions.create(model="echo", messages=[{"role": "user", "content": "one two"}])
    assert r.usage.prompt_tokens == 2 and r.usage.completion_tokens == 2
    (call,) = recorded(hub, 1)
    assert (call["cost_source"], call["payer"], call["charged"], call["shortfall"]) == ("owner", "wallet:8", 6, 0)
    assert settled(hub, "wallet:8", 44)


def test_a_partial_payer_pays_what_it_has_then_is_refused_before_the_call(hub, upstream):
    t = token(hub, "9", credits=5)
    o = openai_client(t)
    assert ask(o, "0.008") == "hi"  # 8 credits; the wallet holds 5
    (call,) = recorded(hub, 1)
    assert (call["payer"], call["charged"], call["shortfall"]) == ("wallet:9", 5, 3)
    assert settled(hub, "wallet:9", 0)
    before = len(upstream.requests)
    with pytest.raises(openai.APIStatusError) as e:
        o.chat.completions.create(model="gpt-6-luna", messages=MSG)
    assert e.value.status_code == 402 and e.value.body["code"] == "payer_empty"
    assert "the wallet of agent 9 holds 0" in str(e.value) and "top up" in str(e.value)
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as e:
        a.messages.create(model="echo", max_tokens=8, messages=MSG)
    assert e.value.status_code == 402
    assert len(upstream.requests) == before
    with hub.client() as c:
        assert len(c.get("/v1/usage/calls", params={"settled": 1}).json()["calls"]) == 1  # a refusal records nothing


def test_refused_before_the_call_without_a_wallet_or_with_an_empty_escrow_and_wallet(hub, upstream):
    with hub.client() as c:  # an agent the treasury does not know
        r = c.post("/v1/models/gateway-tokens", json={"cid": "11", "role": "builder"})
    o = openai_client(r.json())
    with pytest.raises(openai.APIStatusError) as e:
        ask(o, "0.001")
    assert e.value.status_code == 402 and "no wallet for agent 11" in str(e.value)
    fund_task(hub, "t2", 1)
    t = token(hub, "12", credits=0, task="t2")
    o = openai_client(t)
    assert ask(o, "0.001") == "hi"  # the escrow's one credit
    assert settled(hub, "escrow:t2", 0)
    with pytest.raises(openai.APIStatusError) as e:
        ask(o, "0.001")
    assert e.value.status_code == 402
    assert "the wallet of agent 12 holds 0 and the escrow of task t2 holds 0" in str(e.value)
    with hub.client() as c:
        calls = c.get("/v1/usage/calls", params={"settled": 1}).json()["calls"]
        assert [(x["agent"], x["charged"]) for x in calls] == [("12", 1)]


def test_stop_all_refuses_before_the_payer_is_asked_and_charges_nothing(hub, upstream):
    t = token(hub, "13", credits=20)
    o = openai_client(t)
    with hub.client() as c:
        assert c.post("/v1/plaza/stop", json={"reason": "charges"}).status_code == 200
    with pytest.raises(openai.APIStatusError) as e:
        ask(o, "0.005")
    assert e.value.status_code == 423 and "the plaza is held" in str(e.value)
    assert balance(hub, "wallet:13") == 20
    with hub.client() as c:
        assert c.get("/v1/usage/calls", params={"settled": 1}).json()["calls"] == []
        assert c.post("/v1/plaza/resume", json={}).status_code == 200
    assert ask(o, "0.005") == "hi"
    assert settled(hub, "wallet:13", 15)


# -- keys --------------------------------------------------------------------------------------------


def _encodings(value: str) -> list[str]:
    raw = value.encode()
    return [value, base64.b64encode(raw).decode(), base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode().rstrip("="), raw.hex(), json.dumps(value)[1:-1]]


def _files(*folders: Path) -> list[Path]:
    return [p for f in folders for p in Path(f).rglob("*") if p.is_file()]


def test_a_key_stored_from_stdin_reaches_the_provider_through_the_vault(hub, upstream, folders):
    seen: list[str] = []  # every answer the CLI and the API gave
    r = cli(hub, "models", "providers")
    assert r.returncode == 0 and "Key missing" in r.stdout
    seen.append(r.stdout + r.stderr)
    t = token(hub, "21", credits=100)
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    with pytest.raises(anthropic.PermissionDeniedError) as e:
        a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG)
    assert "Key missing" in str(e.value)
    # on the command line it is refused; from stdin it goes into the vault, bound to provider:anthropic
    r = cli(hub, "models", "key", "anthropic", "--value", KEYS["anthropic"])
    assert r.returncode == 1 and "standard input" in r.stderr
    r = cli(hub, "models", "key", "anthropic", "--value", "-", stdin=KEYS["anthropic"])
    assert r.returncode == 0, r.stderr
    assert "stored the key of anthropic in the vault (Key set)" in r.stdout
    seen.append(r.stdout + r.stderr)
    with hub.client() as c:
        providers = {p["id"]: p for p in c.get("/v1/models/providers").json()["providers"]}
        assert providers["anthropic"]["key_status"] == "Key set" and providers["anthropic"]["key"] == {"kind": "vault"}
        assert providers["openai"]["key_status"] == "Key missing"
        entries = c.get("/v1/vault/secrets").json()
        seen.append(json.dumps(entries))
        entry = next(e for e in entries["secrets"] if e["name"] == "ANTHROPIC_API_KEY")
        assert entry["bindings"] == ["provider:anthropic"] and entry["scope"] == "plaza"
    # the gateway reads the real key through the vault; the fake upstream refuses any other
    m = a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG)
    assert m.content[0].text == FakeUpstream.text
    assert upstream.requests[-1]["headers"]["x-api-key"] == KEYS["anthropic"]
    r = cli(hub, "models", "test", "anthropic")
    assert r.returncode == 0 and "answered" in r.stdout, r.stdout + r.stderr
    seen.append(r.stdout)
    # a second key replaces the first (a new version of the same entry)
    r = cli(hub, "models", "key", "anthropic", "--value", "-", stdin="sk-ant-the-old-one-is-gone")
    assert r.returncode == 0
    with pytest.raises(anthropic.AuthenticationError):
        a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG)
    assert cli(hub, "models", "key", "anthropic", "--value", "-", stdin=KEYS["anthropic"]).returncode == 0
    assert a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG).content[0].text == FakeUpstream.text
    # sealed: the call fails clearly and nothing is sent; sealing records the minute's uses
    before = len(upstream.requests)
    with hub.client() as c:
        assert c.post("/v1/vault/seal", json={}).status_code == 200
        assert {p["id"]: p for p in c.get("/v1/models/providers").json()["providers"]}["anthropic"]["key_status"] \
            == "Key set (the vault is sealed)"
    with pytest.raises(anthropic.APIStatusError) as e:
        a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG)
    # The code is in the answer's body (anthropic 2.17's str() of an error quotes the message alone).
    assert e.value.status_code == 423 and e.value.body["error"]["code"] == "vault_sealed" and "unseal" in str(e.value)
    assert len(upstream.requests) == before
    with hub.client() as c:
        assert c.post("/v1/vault/unseal", json={"method": "keyfile"}).status_code == 200
        lines = c.get("/v1/vault/audit", params={"limit": 500}).json()["lines"]
        seen.append(json.dumps(lines))
        uses = [ln for ln in lines if ln["action"] == "secret_used"]
        assert uses and all(u["consumer"] == "provider:anthropic" for u in uses)
        assert sum(u["count"] for u in uses) >= 3
        seen.append(c.get("/v1/events", params={"limit": 1000}).text)
        seen.append(c.get("/v1/usage/calls").text)
        seen.append(c.get("/v1/models/providers").text)
    assert a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG).content[0].text == FakeUpstream.text
    hub.stop()
    seen.append(hub.output)
    # the key appears in no answer, no event, no log line, no file of the hub (the vault keeps it encrypted)
    for value in (KEYS["anthropic"], "sk-ant-the-old-one-is-gone"):
        for enc in _encodings(value):
            for text in seen:
                assert enc not in text
            for path in _files(folders.state, folders.config):
                assert enc.encode() not in path.read_bytes(), path


def test_add_with_key_stdin_and_secret_binds_an_existing_entry(hub, upstream):
    r = cli(hub, "models", "add", "together", "--key-stdin", stdin="tg-key-from-stdin-123")
    assert r.returncode == 0, r.stderr
    assert "Key set" in r.stdout and "tg-key-from-stdin-123" not in r.stdout + r.stderr
    with hub.client() as c:
        secrets = {e["name"]: e for e in c.get("/v1/vault/secrets").json()["secrets"]}
        assert secrets["TOGETHER_API_KEY"]["bindings"] == ["provider:together"]
        # an entry the owner already keeps, named with --secret: bound to the provider, then used
        r = c.post("/v1/vault/secrets", json={"name": "TEAM_OPENAI_KEY", "value": KEYS["openai"], "bindings": []})
        assert r.status_code == 201, r.text
    r = cli(hub, "models", "edit", "openai", "--secret", "NO_SUCH_ENTRY")
    assert r.returncode == 1 and "(unknown_secret)" in r.stderr
    r = cli(hub, "models", "edit", "openai", "--secret", "TEAM_OPENAI_KEY")
    assert r.returncode == 0, r.stderr
    assert "Key set (vault entry TEAM_OPENAI_KEY)" in r.stdout
    with hub.client() as c:
        entry = next(e for e in c.get("/v1/vault/secrets").json()["secrets"] if e["name"] == "TEAM_OPENAI_KEY")
        assert entry["bindings"] == ["provider:openai"]
    t = token(hub, "31", credits=100)
    r = openai_client(t).chat.completions.create(model="gpt-6-luna", messages=MSG)
    assert r.choices[0].message.content == FakeUpstream.text
    assert upstream.requests[-1]["headers"]["authorization"] == f"Bearer {KEYS['openai']}"
    # a key that is not bound is not read: a denied use, and "Key missing"
    with hub.client() as c:
        r = c.post("/v1/vault/secrets", json={"name": "DEEPSEEK_API_KEY", "value": "ds-unbound-key-000", "bindings": []})
        assert r.status_code == 201
        ds = {p["id"]: p for p in c.get("/v1/models/providers").json()["providers"]}["deepseek"]
        assert ds["key_status"] == "Key missing"
        r = c.put("/v1/models/providers/deepseek/key", json={"value": "ds-other-key-000"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "secret_not_bound"
        assert "ds-other-key-000" not in r.text
        with httpx.Client() as h:
            g = h.post(t["base_urls"]["openai"] + "/chat/completions", headers={"authorization": "Bearer plaza"},
                       json={"model": "deepseek-flash", "messages": MSG})
        assert g.status_code == 403 and "Key missing" in g.text
