"""Prices: every source in the guide's order, USD to credits, cache fallback, unpriced, the daily fetch."""

from __future__ import annotations

import json
from fractions import Fraction

import httpx

from agentplaza.adapters.providers import prices as P
from agentplaza.adapters.providers.prices import PriceBook, parse_litellm, parse_openrouter, snapshots
from agentplaza.api.hub import Hub
from agentplaza.runtime.prices import fetch_prices

OPENROUTER_DOC = {"data": [
    {"id": "anthropic/claude-opus-5-5", "name": "Anthropic: Claude Opus 5.5",
     "pricing": {"prompt": "0.000004", "completion": "0.00002", "request": "0", "image": "0",
                 "input_cache_read": "0.0000004", "input_cache_write": "0.000005"}},
    {"id": "deepseek/deepseek-flash", "pricing": {"prompt": "0.0000002", "completion": "0.000001"}},
    {"id": "broken/no-price", "pricing": {}},
]}
LITELLM_DOC = {
    "sample_spec": {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
    "claude-opus-5-5": {"input_cost_per_token": 5e-06, "output_cost_per_token": 2.5e-05,
                        "cache_read_input_token_cost": 5e-07, "cache_creation_input_token_cost": 6.25e-06,
                        "litellm_provider": "anthropic", "mode": "chat"},
    "deepseek/deepseek-flash": {"input_cost_per_token": 3e-07, "output_cost_per_token": 1.2e-06},
    "deepseek-flash": {"input_cost_per_token": 9e-07, "output_cost_per_token": 9e-06},
    "gpt-6-astra": {"input_cost_per_token": 1e-05, "output_cost_per_token": 5e-05},
}


def book(owner=None, openrouter=True, litellm=True) -> PriceBook:
    lists = {}
    if openrouter:
        lists["openrouter"] = parse_openrouter(OPENROUTER_DOC)
    if litellm:
        lists["litellm"] = parse_litellm(LITELLM_DOC)
    return PriceBook(owner or {}, lists)


def test_the_lists_formats_parse_to_usd_per_million():
    o = parse_openrouter(OPENROUTER_DOC)
    assert Fraction(o["anthropic/claude-opus-5-5"][0]) == 4 and Fraction(o["anthropic/claude-opus-5-5"][2]) == Fraction(2, 5)
    assert "broken/no-price" not in o
    ll = parse_litellm(LITELLM_DOC)
    assert "sample_spec" not in ll and Fraction(ll["claude-opus-5-5"][1]) == 25


def test_owner_price_first_by_full_then_short_name_in_credits():
    b = book(owner={"deepseek/deepseek-flash": [7, 8], "my-local-model": [0, 0]})
    p = b.lookup("deepseek", "deepseek-flash")
    assert (p.source, p.input, p.output) == ("owner", 7, 8)
    assert b.lookup("ollama", "my-local-model").source == "owner"
    assert b.lookup("ollama", "my-local-model").cost_micro(10**6, 10**6) == 0


def test_then_the_builtin_muse_table():
    b = book(owner={})
    p = b.lookup("meta", "muse-spark-1.3")
    assert p.source == "muse" and p.input == P.MUSE_PRICES["muse-spark-1.3"][0]
    assert b.lookup("meta", "muse-spark-1.3-contributor").output == 0
    # the owner's price still wins over the table
    assert book(owner={"muse-spark-1.3": [1, 1]}).lookup("meta", "muse-spark-1.3").source == "owner"


def test_then_openrouter_then_litellm_full_then_short():
    b = book()
    p = b.lookup("anthropic", "claude-opus-5-5")
    assert p.source == "openrouter" and p.input == 4_000 and p.output == 20_000  # $4 = 4,000 credits
    assert (p.cache_read, p.cache_write) == (400, 5_000)
    # through OpenRouter the model itself is the OpenRouter id
    assert b.lookup("openrouter", "anthropic/claude-opus-5-5").source == "openrouter"
    b = book(openrouter=False)
    p = b.lookup("anthropic", "claude-opus-5-5")
    assert (p.source, p.name, p.input) == ("litellm", "claude-opus-5-5", 5_000)  # short name
    p = b.lookup("deepseek", "deepseek-flash")
    assert (p.source, p.name, p.input) == ("litellm", "deepseek/deepseek-flash", 300)  # full name before short


def test_cache_prices_fall_back_to_the_input_price():
    p = book(openrouter=False).lookup("openai", "gpt-6-astra")
    assert p.cache_read == p.input == p.cache_write == 10_000
    # 1M input + 1M output + 1M cache reads: 10,000 + 50,000 + 10,000 credits
    assert p.cost_micro(10**6, 10**6, 10**6) == 70_000 * 10**6
    assert P.credits_from_micro(1) == 1 and P.credits_from_micro(0) == 0  # whole credits, rounded up


def test_a_cost_is_the_exact_price_rounded_up_and_a_book_answers_the_same_each_time():
    # prices with awkward denominators: the cost is the exact sum, in millionths, rounded up once
    p = P.Price(Fraction(1, 3), Fraction(7, 10**6), Fraction(2, 7), Fraction(0), "owner", "m")
    for tokens in ((1, 0, 0, 0), (0, 1, 0, 0), (3, 10**6, 7, 9), (10**9, 10**9, 10**9, 10**9), (0, 0, 0, 0)):
        exact = (tokens[0] * p.input + tokens[1] * p.output + tokens[2] * p.cache_read
                 + tokens[3] * p.cache_write) * P.MICRO / P.TOKENS_PER_PRICE
        assert p.cost_micro(*tokens) == -(-exact.numerator // exact.denominator)
    b = book(openrouter=False)
    first = b.lookup("anthropic", "claude-opus-5-5")
    assert b.lookup("anthropic", "claude-opus-5-5") == first and b.lookup("local", "nothing-knows-me") is None
    assert b.lookup("local", "nothing-knows-me") is None  # an unpriced answer is kept as unpriced
    # a new list is a new book: its own answers
    assert book(owner={"claude-opus-5-5": [1, 2]}).lookup("anthropic", "claude-opus-5-5").source == "owner"


def test_unpriced():
    assert book().lookup("local", "nothing-knows-me") is None


def test_a_dated_snapshot_ships_and_prices_common_models_offline():
    snaps = snapshots()
    day, litellm = snaps["litellm"]
    assert len(day) == 10 and len(litellm) > 1000
    b = PriceBook({}, {"litellm": litellm})
    for provider, model in (("anthropic", "claude-opus-5-5"), ("deepseek", "deepseek-flash"), ("openai", "gpt-6-astra"),
                            ("gemini", "gemini-2.5-flash")):
        assert b.lookup(provider, model) is not None, model


def _transport(ok: set[str]):
    def handle(request: httpx.Request) -> httpx.Response:
        if "openrouter" in request.url.host and "openrouter" in ok:
            return httpx.Response(200, json=OPENROUTER_DOC)
        if "githubusercontent" in request.url.host and "litellm" in ok:
            return httpx.Response(200, json=LITELLM_DOC)
        return httpx.Response(503, text="unavailable")

    return httpx.MockTransport(handle)


def test_the_daily_fetch_keeps_lists_in_the_store_and_the_last_good_copy_on_failure(folders, database_url):
    hub = Hub.open(folders, database_url=database_url)
    try:
        with httpx.Client(transport=_transport({"openrouter", "litellm"})) as c:
            out = fetch_prices(hub, c)
        assert out["openrouter"]["ok"] and out["litellm"]["ok"] and out["litellm"]["stored"]
        kinds = [e.kind for e in hub.store.read() if e.family == "models"]
        assert kinds.count("PriceList.Fetched") == 2
        # the same list again the same day is not stored twice
        with httpx.Client(transport=_transport({"openrouter", "litellm"})) as c:
            again = fetch_prices(hub, c)
        assert again["litellm"]["stored"] is False
        # a failed fetch: the last good copy stays in use
        with httpx.Client(transport=_transport(set())) as c:
            failed = fetch_prices(hub, c)
        assert not failed["openrouter"]["ok"] and failed["openrouter"]["in_use"] == out["openrouter"]["day"]
        kept = {r["source"]: r for r in hub.read_models.states["models"].rows.all("rm_price_lists")}
        assert kept["openrouter"]["count"] == 2 and json.dumps(kept["litellm"]["prices"])
        from agentplaza.api.gateway import Gateway, TreasuryCharger, VaultKeys

        gw = Gateway(hub, VaultKeys(hub), TreasuryCharger(hub))
        assert gw.price_book().lookup("anthropic", "claude-opus-5-5").source == "openrouter"
        # the fetched LiteLLM list (dated today) replaces the shipped snapshot
        assert gw.price_book().lookup("deepseek", "deepseek-flash").input == 200  # OpenRouter's $0.20
    finally:
        hub.close()
