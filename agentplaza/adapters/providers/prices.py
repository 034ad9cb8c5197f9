"""What a model costs: the owner's price, the Muse table, then the public price lists.

For a model the hub uses, in this order: your price (credits per million
tokens) by the model's full then short name; the built-in table for the Muse
models; OpenRouter's public list; LiteLLM's public table by the model's full
name, then by its short name.  The public lists are in US dollars, converted
at one credit = $0.001.  Cache reads and writes use the input price when no
separate price exists.  A model found nowhere is "unpriced".

The public lists are fetched once a day when the network allows and kept in
the store (``PriceList.Fetched``); a failed fetch leaves the last good copy in
use.  A dated snapshot of LiteLLM's table ships in ``prices/`` so an offline
hub can price common models before its first fetch.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx

#: One credit is $0.001.
CREDITS_PER_USD = 1000
#: Prices are per million tokens; usage costs are kept in millionths of a credit.
TOKENS_PER_PRICE = 1_000_000
MICRO = 1_000_000
#: The public lists and where they are fetched from, once a day.
OPENROUTER, LITELLM = "openrouter", "litellm"
SOURCES = {
    OPENROUTER: "https://openrouter.ai/api/v1/models",
    LITELLM: "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json",
}
FETCH_EVERY_S = 24 * 3600
FETCH_TIMEOUT_S = 30.0
#: The largest list a fetch accepts.
MAX_LIST_BYTES = 32 * 1024 * 1024
SNAPSHOT_DIR = Path(__file__).parent / "prices"

#: The built-in table for Meta's Muse models: [input, output] credits per million tokens.
#: The contributor variants cost nothing: the provider is paid in training data.
MUSE_PRICES: dict[str, list[int]] = {
    "muse-wonder-1.0": [1_250, 10_000],
    "muse-spark-1.1": [150, 600],
    "muse-spark-1.2": [200, 800],
    "muse-spark-1.3": [250, 1_000],
    "muse-spark-1.2-contributor": [0, 0],
    "muse-spark-1.3-contributor": [0, 0],
}


@dataclass(frozen=True)
class Price:
    """Credits per million tokens, exact."""

    input: Fraction
    output: Fraction
    cache_read: Fraction
    cache_write: Fraction
    source: str  # "owner", "muse", "openrouter" or "litellm"
    name: str  # the name it was found under

    @cached_property
    def _whole(self) -> tuple[int, int, int, int, int]:
        """The four prices over one common denominator: (denominator, four numerators), so that a call's
        cost is integer arithmetic (exactly what the Fractions give, without making one a call)."""
        fs = (self.input, self.output, self.cache_read, self.cache_write)
        den = math.lcm(*(f.denominator for f in fs))
        return (den, *(f.numerator * (den // f.denominator) for f in fs))  # type: ignore[return-value]

    def cost_micro(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> int:
        """The cost in millionths of a credit, rounded up."""
        den, i, o, r, w = self._whole
        total = (input_tokens * i + output_tokens * o + cache_read * r + cache_write * w) * MICRO
        return -(-total // (den * TOKENS_PER_PRICE))

    def public(self) -> dict:
        def f(x: Fraction) -> float | int:
            return int(x) if x.denominator == 1 else float(x)
        return {"source": self.source, "name": self.name, "input": f(self.input), "output": f(self.output),
                "cache_read": f(self.cache_read), "cache_write": f(self.cache_write), "unit": "credits per million tokens"}


def credits_from_micro(micro: int) -> int:
    """Whole credits for a cost in millionths, rounded up."""
    return -(-micro // MICRO)


def _frac(x: Any) -> Fraction | None:
    if x is None or x == "":
        return None
    try:
        f = Fraction(str(x))
    except (ValueError, ZeroDivisionError):
        return None
    return f if f >= 0 else None


def _credits(values: list, scale: Fraction, source: str, name: str) -> Price | None:
    vals = [_frac(v) for v in list(values) + [None] * (4 - len(values))]
    if vals[0] is None or vals[1] is None:
        return None
    vals = [v * scale if v is not None else None for v in vals]
    return Price(vals[0], vals[1], vals[2] if vals[2] is not None else vals[0],
                 vals[3] if vals[3] is not None else vals[0], source, name)


# -- the public lists' own formats -----------------------------------------------------------


def parse_openrouter(data: Any) -> dict[str, list]:
    """OpenRouter's /api/v1/models: per-token USD strings -> [in, out, cache_read, cache_write] USD per million."""
    out: dict[str, list] = {}
    for m in (data or {}).get("data", []) if isinstance(data, dict) else []:
        if not isinstance(m, dict) or not isinstance(m.get("id"), str) or not isinstance(m.get("pricing"), dict):
            continue
        p = m["pricing"]
        vals = [_frac(p.get(k)) for k in ("prompt", "completion", "input_cache_read", "input_cache_write")]
        if vals[0] is None or vals[1] is None:
            continue
        out[m["id"]] = [str(v * TOKENS_PER_PRICE) if v is not None else None for v in vals]
    return out


def parse_litellm(data: Any) -> dict[str, list]:
    """LiteLLM's model_prices_and_context_window.json -> [in, out, cache_read, cache_write] USD per million."""
    out: dict[str, list] = {}
    if not isinstance(data, dict):
        return out
    for name, m in data.items():
        if not isinstance(m, dict) or name == "sample_spec":
            continue
        vals = [_frac(m.get(k)) for k in ("input_cost_per_token", "output_cost_per_token",
                                          "cache_read_input_token_cost", "cache_creation_input_token_cost")]
        if vals[0] is None or vals[1] is None:
            continue
        out[name] = [str(v * TOKENS_PER_PRICE) if v is not None else None for v in vals]
    return out


PARSERS = {OPENROUTER: parse_openrouter, LITELLM: parse_litellm}


def digest(prices: dict) -> str:
    return hashlib.sha256(json.dumps(prices, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def snapshots() -> dict[str, tuple[str, dict[str, list]]]:
    """The dated snapshots that ship: source -> (day, prices)."""
    found: dict[str, tuple[str, dict]] = {}
    for path in sorted(SNAPSHOT_DIR.glob("*-????-??-??.json")):
        source, day = path.stem[: -11], path.stem[-10:]
        if source in PARSERS:
            found[source] = (day, PARSERS[source](json.loads(path.read_text())))
    return found


def fetch(source: str, client: httpx.Client) -> dict[str, list]:
    """One public list, fetched and parsed; raises on any failure (the caller keeps the last good copy)."""
    r = client.get(SOURCES[source], timeout=FETCH_TIMEOUT_S)
    r.raise_for_status()
    if len(r.content) > MAX_LIST_BYTES:
        raise ValueError(f"the {source} list is larger than {MAX_LIST_BYTES} bytes")
    prices = PARSERS[source](r.json())
    if not prices:
        raise ValueError(f"the {source} list held no prices")
    return prices


# -- looking a price up ------------------------------------------------------------------------


#: The most (provider, model) answers a price book keeps (the gateway's policy lists the models it may call).
LOOKUPS_KEPT = 4096


class PriceBook:
    """Every source in the guide's order; ``lookup`` returns the first that prices the model.

    A book is made from its lists and never changed (a new list makes a new book), so each answer
    is kept: a gateway call looks its model's price up once per book, not once per call."""

    def __init__(self, owner: dict[str, list] | None = None, lists: dict[str, dict[str, list]] | None = None):
        self.owner = owner or {}
        self.lists = lists or {}
        self._found: dict[tuple[str, str], Price | None] = {}

    def lookup(self, provider: str, model: str) -> Price | None:
        key = (provider, model)
        try:
            return self._found[key]
        except KeyError:
            pass
        price = self._lookup(provider, model)
        if len(self._found) >= LOOKUPS_KEPT:
            self._found.clear()
        self._found[key] = price
        return price

    def _lookup(self, provider: str, model: str) -> Price | None:
        full, short = f"{provider}/{model}", model.rsplit("/", 1)[-1]
        for name in (full, model, short):
            if name in self.owner:
                return _credits(self.owner[name], Fraction(1), "owner", name)
        if short in MUSE_PRICES:
            return _credits(MUSE_PRICES[short], Fraction(1), "muse", short)
        usd = Fraction(CREDITS_PER_USD)
        openrouter = self.lists.get(OPENROUTER, {})
        for name in (full, model):  # an OpenRouter id is provider/model; through OpenRouter it is the model itself
            if name in openrouter:
                return _credits(openrouter[name], usd, OPENROUTER, name)
        litellm = self.lists.get(LITELLM, {})
        for name in (full, short):
            if name in litellm:
                return _credits(litellm[name], usd, LITELLM, name)
        return None
