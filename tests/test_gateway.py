"""The gateway through the official SDKs, unchanged: against the mock and a fake upstream of each wire.

A real apid, the ``anthropic`` and ``openai`` SDKs pointed at it with
``base_url`` and ``api_key="plaza"``; Gemini over plain HTTP in its own shape.
"""

from __future__ import annotations

import uuid

import anthropic
import httpx
import openai
import pytest
from support.deadline import until
from support.fake_upstream import KEYS, FakeUpstream
from support.hubproc import HubProcess, cli
from support.treasury import Teller

from agentplaza.domain.base import Refusal

ENV_KEYS = {"anthropic": "APZ_TEST_ANTHROPIC_KEY", "openai": "APZ_TEST_OPENAI_KEY", "gemini": "APZ_TEST_GEMINI_KEY"}


@pytest.fixture
def upstream():
    with FakeUpstream() as up:
        yield up


@pytest.fixture
def hub(folders, upstream):
    h = HubProcess(folders)
    h.env.update({ENV_KEYS[w]: KEYS[w] for w in ENV_KEYS})
    h.start()
    with h.client() as c:
        assert c.post("/v1/models/providers", json={"id": "mock"}).status_code == 200
        for wire in ("anthropic", "openai", "gemini"):
            r = c.patch(f"/v1/models/providers/{wire}", json={
                "base_url": upstream.url + ("/v1" if wire == "openai" else ""),
                "key": {"kind": "env", "name": ENV_KEYS[wire]}})
            assert r.status_code == 200, r.text
            assert r.json()["key_status"] == f"Key from env {ENV_KEYS[wire]}"
        r = c.patch("/v1/models/policy", json={
            "worker": ["deepseek/deepseek-flash", "mock/echo", "mock/tool", "mock/fail", "mock/reply@low",
                       "anthropic/claude-haiku-5-5@high", "openai/gpt-6-luna", "gemini/gemini-2.5-flash"],
            "prices": {"mock/echo": [1000, 2000]}})
        assert r.status_code == 200, r.text
    yield h
    h.stop()


def give_wallet(h: HubProcess, cid: str, credits: int = 0, role: str = "builder") -> None:
    """Open the agent's wallet (the treasury's open_wallet) and let it earn ``credits`` the only way there is:
    a passed task's margin (20% of the metered cost)."""
    with Teller(h) as teller:
        try:
            teller.wallet(cid, f"agent-{cid}", role)
        except Refusal as r:
            assert r.code == "wallet_exists", r.message
        if credits:
            task = f"earn-{cid}-{uuid.uuid4().hex[:8]}"
            teller.escrow(task, credits * 5)
            teller.settle(task, True, worker=cid, metered_cost=credits * 5)


def token(h: HubProcess, cid: str = "7", role: str = "builder", credits: int = 1000, **extra) -> dict:
    """A gateway token for agent ``cid``; the agent gets a wallet holding ``credits`` first."""
    give_wallet(h, cid, credits, role)
    with h.client() as c:
        r = c.post("/v1/models/gateway-tokens", json={"cid": cid, "role": role, **extra})
        assert r.status_code == 200, r.text
        return r.json()


def calls(h: HubProcess, **params) -> list[dict]:
    """The recorded calls matching ``params``, once there is one."""
    with h.client() as c:
        return until("a call recorded", lambda: c.get("/v1/usage/calls", params={**params, "settled": 1}).json()["calls"])


def wait_calls(h: HubProcess, n: int) -> list[dict]:
    with h.client() as c:
        return until(f"{n} calls recorded", lambda: (got := c.get("/v1/usage/calls").json()["calls"]) and len(got) >= n and got)


def test_anthropic_sdk_against_the_mock(hub):
    t = token(hub)
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    m = a.messages.create(model="echo", max_tokens=64, messages=[{"role": "user", "content": "hello plaza"}])
    assert m.content[0].text == "hello plaza" and m.usage.input_tokens == 2
    with a.messages.stream(model="mock/echo", max_tokens=64, messages=[{"role": "user", "content": "one two three"}]) as s:
        assert "".join(s.text_stream) == "one two three"
        final = s.get_final_message()
    assert final.usage.output_tokens == 3
    tool = a.messages.create(model="tool", max_tokens=64, tools=[{"name": "search", "input_schema": {"type": "object"}}],
                             messages=[{"role": "user", "content": 'go [mock:tool search {"q": "x"}]'}])
    assert tool.stop_reason == "tool_use" and tool.content[0].name == "search" and tool.content[0].input == {"q": "x"}
    with pytest.raises(anthropic.InternalServerError) as e:
        a.messages.create(model="fail", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert "always fails" in str(e.value)
    # a pin wins over the request's effort: the mock echoes the effort it was given
    pinned = a.messages.create(model="reply", max_tokens=8, messages=[{"role": "user", "content": "x"}],
                               extra_body={"output_config": {"effort": "max"}})
    assert pinned.content[0].text == "mock reply (effort: low)"
    got = wait_calls(hub, 5)
    first = got[-1]
    assert (first["agent"], first["role"], first["tier"], first["provider"], first["model"], first["route"]) == \
        ("7", "builder", "worker", "mock", "echo", "gateway")
    assert first["cost_source"] == "owner" and first["cost_micro"] == 2 * 1000 + 2 * 2000  # owner's 1000:2000 per M
    streamed = got[-2]
    assert streamed["stream"] and streamed["ttft_us"] is not None and streamed["latency_us"] >= streamed["ttft_us"]
    assert got[-4]["status"] == "error" and got[-4]["http_status"] == 500


def test_openai_sdk_against_the_mock_with_a_reported_cost(hub):
    t = token(hub)
    o = openai.OpenAI(base_url=t["base_urls"]["openai"], api_key="plaza", max_retries=0)
    r = o.chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi [mock:cost 0.25] [mock:tokens 10 5 3]"}])
    assert r.choices[0].message.content == "hi" and r.usage.prompt_tokens == 13
    chunks = list(o.chat.completions.create(model="mock/echo", messages=[{"role": "user", "content": "a b c"}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "a b c"
    tool = o.chat.completions.create(model="tool", messages=[{"role": "user", "content": "x"}],
                                     tools=[{"type": "function", "function": {"name": "lookup", "parameters": {}}}])
    assert tool.choices[0].message.tool_calls[0].function.name == "lookup"
    got = wait_calls(hub, 3)
    reported = got[-1]
    assert reported["cost_source"] == "reported" and reported["reported_cost_micro"] == 250 * 10**6  # $0.25 = 250 credits
    assert (reported["input_tokens"], reported["output_tokens"], reported["cache_read_tokens"]) == (10, 5, 3)


def test_gemini_shape_against_the_mock(hub):
    t = token(hub)
    url = t["base_urls"]["gemini"] + "/v1beta/models/mock/echo:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi gemini"}]}]}
    with httpx.Client() as c:
        r = c.post(url.replace("mock/echo", "echo"), json=body, headers={"x-goog-api-key": "plaza"})
        assert r.status_code == 200, r.text
        assert r.json()["candidates"][0]["content"]["parts"][0]["text"] == "hi gemini"
        s = c.post(t["base_urls"]["gemini"] + "/v1beta/models/echo:streamGenerateContent?alt=sse&key=plaza", json=body)
        assert s.status_code == 200 and s.text.count("data: ") == 2


def test_every_wire_against_a_fake_upstream_with_the_real_key(hub, upstream):
    t = token(hub)
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    m = a.messages.create(model="claude-haiku-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert m.content[0].text == FakeUpstream.text
    sent = upstream.requests[-1]
    assert sent["headers"]["x-api-key"] == KEYS["anthropic"] and "plaza" not in sent["headers"].values()
    assert sent["body"]["model"] == "claude-haiku-5-5" and sent["body"]["output_config"] == {"effort": "high"}
    with a.messages.stream(model="anthropic/claude-haiku-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as s:
        assert "".join(s.text_stream) == FakeUpstream.text
    o = openai.OpenAI(base_url=t["base_urls"]["openai"], api_key="plaza", max_retries=0)
    r = o.chat.completions.create(model="gpt-6-luna", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == FakeUpstream.text
    assert upstream.requests[-1]["headers"]["authorization"] == f"Bearer {KEYS['openai']}"
    text = "".join(c.choices[0].delta.content or "" for c in o.chat.completions.create(
        model="openai/gpt-6-luna", messages=[{"role": "user", "content": "hi"}], stream=True) if c.choices)
    assert text == FakeUpstream.text
    assert upstream.requests[-1]["body"]["stream_options"] == {"include_usage": True}
    with httpx.Client() as c:
        g = c.post(t["base_urls"]["gemini"] + "/v1beta/models/gemini-2.5-flash:generateContent",
                   json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, headers={"x-goog-api-key": "plaza"})
        assert g.status_code == 200 and g.json()["candidates"][0]["content"]["parts"][0]["text"] == FakeUpstream.text
        gs = c.post(t["base_urls"]["gemini"] + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                    json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, headers={"x-goog-api-key": "plaza"})
        assert gs.status_code == 200
    assert upstream.requests[-1]["headers"]["x-goog-api-key"] == KEYS["gemini"]
    got = {(c["wire"], c["stream"]): c for c in wait_calls(hub, 6)}
    assert len(got) == 6
    whole = got[("anthropic", False)]
    assert (whole["input_tokens"], whole["output_tokens"], whole["cache_read_tokens"], whole["cache_write_tokens"]) == \
        (2095, 503, 1000, 100)
    assert whole["cost_source"] in ("openrouter", "litellm") and whole["cost_micro"] > 0
    streamed = got[("anthropic", True)]
    assert (streamed["input_tokens"], streamed["output_tokens"], streamed["cache_read_tokens"]) == (25, 15, 10)
    o_whole = got[("openai", False)]
    assert (o_whole["input_tokens"], o_whole["cache_read_tokens"], o_whole["output_tokens"]) == (15, 4, 10)
    assert got[("openai", True)]["output_tokens"] == 10
    assert (got[("gemini", False)]["input_tokens"], got[("gemini", False)]["output_tokens"]) == (8, 12)
    assert got[("gemini", True)]["output_tokens"] == len(FakeUpstream.text.split())
    with hub.client() as c:
        s = c.get("/v1/usage/summary").json()
        assert s["totals"]["calls"] == 6 and {r["provider"] for r in s["by"]["provider"]} == {"anthropic", "openai", "gemini"}
        series = c.get("/v1/usage/series", params={"bucket": "day", "by": "model"}).json()["series"]
        assert sum(p["calls"] for p in series) == 6 and all(len(p["bucket"]) == 10 for p in series)


def test_fail_closed_nothing_reaches_a_provider(hub, upstream):
    t = token(hub)
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    before = len(upstream.requests)
    with pytest.raises(anthropic.PermissionDeniedError) as e:  # an orchestrator-only model, for a worker
        a.messages.create(model="claude-opus-5-5", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert "not on the worker list" in str(e.value)
    o = openai.OpenAI(base_url=t["base_urls"]["openai"], api_key="plaza", max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        o.chat.completions.create(model="gpt-6-astra", messages=[{"role": "user", "content": "x"}])
    # a model on the list whose provider does not serve the caller's shape
    with pytest.raises(anthropic.BadRequestError) as e:
        a.messages.create(model="gpt-6-luna", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert "does not serve the anthropic shape" in str(e.value)
    # the default worker model's provider has no key: refused before anything is sent
    with pytest.raises(openai.PermissionDeniedError) as e:
        o.chat.completions.create(model="deepseek-flash", messages=[{"role": "user", "content": "x"}])
    assert "Key missing" in str(e.value)
    # the orchestrator tier is its own list
    orch = token(hub, "1", "orchestrator")
    a2 = anthropic.Anthropic(base_url=orch["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    with pytest.raises(anthropic.PermissionDeniedError):
        a2.messages.create(model="echo", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert len(upstream.requests) == before
    with hub.client() as c:
        assert c.get("/v1/usage/calls", params={"settled": 1}).json()["calls"] == []  # a refusal records nothing


def test_identity_comes_from_the_token_and_the_key_is_the_placeholder(hub):
    t = token(hub)
    with httpx.Client() as c:
        body = {"model": "echo", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
        wrong_key = c.post(t["base_urls"]["anthropic"] + "/v1/messages", json=body, headers={"x-api-key": "sk-real"})
        assert wrong_key.status_code == 401 and wrong_key.json()["error"]["code"] == "placeholder_key"
        bad = c.post(hub.url + "/v1/gateway/apz_gw_nobody/anthropic/v1/messages", json=body, headers={"x-api-key": "plaza"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "unknown_gateway_token"
        # a body that claims another agent changes nothing
        ok = c.post(t["base_urls"]["anthropic"] + "/v1/messages", json=dict(body, metadata={"user_id": "orchestrator"}),
                    headers={"x-api-key": "plaza"})
        assert ok.status_code == 200
    assert calls(hub)[0]["agent"] == "7"
    with hub.client() as c:
        assert c.delete("/v1/models/gateway-tokens/7").status_code == 200
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        a.messages.create(model="echo", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    # a reissued token replaces the old one
    t2 = token(hub)
    assert t2["token"] != t["token"]


def test_stop_all_refuses_every_model_call(hub, upstream):
    t = token(hub)
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    o = openai.OpenAI(base_url=t["base_urls"]["openai"], api_key="plaza", max_retries=0)
    with hub.client() as c:
        assert c.post("/v1/plaza/stop", json={"reason": "checking"}).status_code == 200
    before = len(upstream.requests)
    with pytest.raises(anthropic.APIStatusError) as e:
        a.messages.create(model="echo", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 423 and "the plaza is held" in str(e.value)
    with pytest.raises(openai.APIStatusError) as e:
        o.chat.completions.create(model="gpt-6-luna", messages=[{"role": "user", "content": "x"}], stream=True)
    assert "the plaza is held" in str(e.value)
    with httpx.Client() as c:
        g = c.post(t["base_urls"]["gemini"] + "/v1beta/models/echo:generateContent", headers={"x-goog-api-key": "plaza"},
                   json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]})
        assert g.status_code == 423 and "the plaza is held" in g.json()["error"]["message"]
    assert len(upstream.requests) == before
    with hub.client() as c:
        assert c.get("/v1/models/decision").json()["decision_models"][0]["held"] is True
        c.post("/v1/plaza/resume", json={})
    assert a.messages.create(model="echo", max_tokens=8, messages=[{"role": "user", "content": "back"}]).content[0].text == "back"


def test_the_models_and_usage_commands(hub, upstream):
    r = cli(hub, "models", "providers")
    assert r.returncode == 0 and "Key missing" in r.stdout and "deepseek" in r.stdout
    assert "ollama" in cli(hub, "models", "presets").stdout
    r = cli(hub, "models", "add", "ollama", "--base-url", upstream.url)
    assert r.returncode == 0, r.stderr
    r = cli(hub, "models", "add", "ollama")
    assert r.returncode == 1 and "already added" in r.stderr and "(provider_exists)" in r.stderr
    assert cli(hub, "models", "edit", "ollama", "--models", "llama4").returncode == 0
    assert cli(hub, "models", "rm", "ollama").returncode == 0
    r = cli(hub, "models", "test", "anthropic")
    assert r.returncode == 0 and "answered" in r.stdout, r.stdout + r.stderr
    r = cli(hub, "models", "test", "deepseek")
    assert r.returncode == 1 and "Key missing" in r.stdout
    r = cli(hub, "models", "key", "anthropic", "--value", "sk-on-the-command-line")
    assert r.returncode == 1 and "standard input" in r.stderr
    r = cli(hub, "models", "policy", "set", "--effort", "medium", "--idle-sleep-min", "30",
            "--role-model", "builder=anthropic/claude-haiku-5-5", "--price", "my-local-model=0:0")
    assert r.returncode == 0, r.stderr
    show = cli(hub, "models", "policy", "show").stdout
    assert "builder=anthropic/claude-haiku-5-5" in show and "my-local-model=0:0" in show and "30" in show
    r = cli(hub, "models", "policy", "set", "--worker", "deepseek/deepseek-flash,meta/muse-spark-1.3-contributor")
    assert r.returncode == 1 and "(training_model_refused)" in r.stderr
    r = cli(hub, "models", "policy", "set", "--idle-sleep-min", "2000")
    assert r.returncode == 1
    r = cli(hub, "models", "policy", "set", "--role-model", "builder=")
    assert r.returncode == 0 and "role_models            (none)" in r.stdout
    assert "deepseek/deepseek-flash" in cli(hub, "models", "decision-models").stdout
    listing = cli(hub, "models", "list").stdout
    assert "unpriced" in listing and "muse-spark-1.3" in listing
    price = cli(hub, "models", "prices", "anthropic/claude-opus-5-5").stdout
    assert "litellm" in price
    t = token(hub)
    anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0).messages.create(
        model="echo", max_tokens=8, messages=[{"role": "user", "content": "count me"}])
    wait_calls(hub, 1)
    r = cli(hub, "usage", "--by", "model")
    assert r.returncode == 0 and "calls" in r.stdout and "echo" in r.stdout
    assert "echo" in cli(hub, "usage", "--calls", "5").stdout
    series = cli(hub, "usage", "--series", "hour", "--by", "agent")
    assert series.returncode == 0 and "BUCKET" in series.stdout and ":00" in series.stdout


def test_a_model_call_taken_by_the_gateways_door_is_answered_as_through_the_whole_stack(hub):
    """The door (routes.gateway.Door) answers a model call before Starlette's stack: the edge's checks
    still refuse a web page, the edge's headers are still on every answer, and whatever the door does
    not take (another method, an unknown Gemini method, a path one step longer) gets the same answers."""
    t = token(hub)
    url = t["base_urls"]["openai"] + "/chat/completions"
    body = {"model": "mock/echo", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30) as c:
        r = c.post(url, json=body, headers={"authorization": "Bearer plaza"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi"
        assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
        assert r.headers["x-content-type-options"] == "nosniff" and "frame-ancestors 'none'" in \
            r.headers["content-security-policy"]
        page = c.post(url, json=body, headers={"authorization": "Bearer plaza", "origin": "http://evil.example"})
        assert page.status_code == 403 and page.json()["error"]["code"] == "foreign_origin"
        plain = c.post(url, content=b"{}", headers={"authorization": "Bearer plaza", "content-type": "text/plain"})
        assert plain.status_code == 415
        assert c.get(url).status_code == 405 and c.get(url).json()["error"]["code"] == "method_not_allowed"
        assert c.post(url + "/more", json=body).status_code == 404
        gem = c.post(t["base_urls"]["gemini"] + "/v1beta/models/echo:countTokens", json={},
                     headers={"x-goog-api-key": "plaza"})
        assert gem.status_code == 404 and "no Gemini method countTokens" in gem.text
        assert gem.headers["x-frame-options"] == "DENY"
        stranger = c.post(url, json=body, headers={"authorization": "Bearer sk-real"})
        assert stranger.status_code == 401 and "placeholder" in stranger.text
