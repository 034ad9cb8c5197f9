"""Hypothesis strategies for requests a careless client or an attacker would send.

Bodies start from the route's own pydantic model (its JSON Schema), so many requests are valid and
reach deep into the hub, and are then bent: a field gets a hostile value, an unknown field is added, a
required one dropped, or the whole body is replaced by hostile JSON or by bytes that are not JSON at
all.  Hostile values include what ``json.dumps`` refuses to write (NaN, Infinity, 1e400, digits past
Python's integer limit, deep nesting), so a body is a tree whose ``Raw`` leaves are sent verbatim.
Path and query values come from the same families, or from ids the hub itself answered earlier
(``Pick``: resolved against the harvested pool when the request is sent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st


@dataclass(frozen=True)
class Raw:
    """A JSON fragment sent as written."""

    text: str

    def __repr__(self) -> str:
        return self.text if len(self.text) <= 40 else f"{self.text[:20]}...({len(self.text)} chars)"


@dataclass(frozen=True)
class Pick:
    """One of the values the hub answered earlier (an id, a cid, a name), chosen when the request is sent:
    most often one it answered under this field's name, or named as one this field may take."""

    index: int
    field: str = ""


@dataclass(frozen=True)
class RawBytes:
    """A whole body that is not a JSON tree at all."""

    data: bytes


#: How deep the nesting bombs go: past Python's recursion limit, within the body size limit.
DEEP = 20_000
UNCLOSED = 40_000

HOSTILE_NUMBERS: list[Any] = [
    Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e400"), Raw("-1e400"), Raw("1e-400"), Raw("-0"),
    Raw("9" * 5000),  # past Python's 4300-digit limit for int()
    2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64, 10**30, -(10**30), -1, 0, 1, 1.5, -0.5,
]
HOSTILE_STRINGS: list[str] = [
    "", " ", "\x00", "a\x00b", "\ud800", "a\udfffb", "\udbff\udbff", "é", "\u202egnp.exe", "💥" * 8,
    "x" * 10_000, "y" * 60_000, "../../etc/passwd", "%00", "{0}{1}%s%n", "'; DROP TABLE events; --",
    "99999999999999999999", "-1", "NaN", "null", "\n\r\t\x0b", "\\", '"', "<script>x</script>", "\x7f\x1b[31m",
    "a" * 300, "n0", "owner", "hub", "builder", "reviewer", "worker", "orchestrator", "all",
]
HOSTILE_STRUCTURES: list[Any] = [
    [], {}, [None], {"": None}, {"x": Raw("NaN")}, {"x": "\x00"}, [Raw("1e400")], {"\x00": 1}, {"\ud800": 1},
    Raw("[" * DEEP + "]" * DEEP), Raw('{"a":' * 5000 + "1" + "}" * 5000),
    {f"k{i}": i for i in range(2000)}, [0] * 10_000,
]
#: Values that pass a body model's checks where a field is free-form (a string, a dict) yet may not be
#: writable to the log or readable from it: what the bent bodies try most often.
LOG_POISON: list[Any] = [
    Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e400"), 2**63, 2**64, -(2**63) - 1, "a\x00b", "\ud800",
    {"x": Raw("NaN")}, {"x": "\x00"}, {"x": 2**64}, {"x": "\udfff"}, ["\x00"],
]
#: Bodies that are not a JSON object: broken, truncated, too deep, too large, not UTF-8.
RAW_BODIES: list[bytes] = [
    b"", b"{", b'{"a":', b"\xff\xfe\x00\x00", b"\xef\xbb\xbf{}", b"[" * UNCLOSED, b'{"a":' * 20_000,
    b'{"a":1,"a":2}', b"null", b"[]", b'"x"', b"1e400", b"NaN", b" " * 100, b"x" * 70_000,
    b'{"x":"\\ud800"}', b'{"x":"\\u0000"}', b'{"x":"\xed\xa0\x80"}', b"\x00",
]
#: Words the hub understands somewhere: roles, tiers, modes, kinds, states.
WORDS = ["builder", "reviewer", "researcher", "worker", "orchestrator", "owner", "hub", "autonomous", "ask",
         "passphrase", "keyfile", "recovery", "agent", "payment", "tool", "mock", "all", "pending", "approved",
         "denied", "failed", "withdrawn", "gateway", "own_loop", "add", "hour", "day", "model", "task"]
#: Query parameter names many routes read, besides the words each handler's code names.
QUERY_NAMES = ["after", "limit", "before", "kinds", "role", "model", "status", "sort", "order", "by", "bucket",
               "at", "upto", "name", "since", "until", "agent", "kind", "pending", "task", "account", "cid"]
QUERY_VALUES = ["", "0", "-1", "1", "99999999999999999999", "-99999999999999999999", "9" * 5000, "abc", "1e3",
                "1.5", "NaN", "Infinity", "0x10", " 7", "\uff17", "\x00", "\ud800", "x" * 5000, "true", "all",
                "2026-13-45T25:61:00", "1d", "-1d", "99999999d", "now", "2026-01-01", "asc", "balance"]
PATH_VALUES = ["0", "-1", "1", "2", "99999999999999999999", "9" * 5000, "abc", "..", ".", "a/b", "\x00",
               "\ud800", "é", "x" * 3000, " ", "null", "NaN", "1e400", "n0", "owner", "hub", "treasury", "T-1"]


def encode(value: Any, pick) -> str:
    """The JSON text of a body tree; ``pick(index, field)`` resolves a Pick."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pick):
        return encode(pick(value.index, value.field), pick)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{encode(v, pick)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode(v, pick) for v in value) + "]"
    return json.dumps(value)  # ensure_ascii: NUL and lone surrogates go as \u escapes


def picks(field: str = "") -> st.SearchStrategy:
    return st.integers(0, 10_000).map(lambda i: Pick(i, field))


def hostile_strings() -> st.SearchStrategy:
    bad = st.sampled_from(["\x00", "\ud800", "\udfff", "\x1b", "\u2028", "\ufeff"])
    spliced = st.tuples(st.text(max_size=8), bad, st.text(max_size=8)).map("".join)
    return st.one_of(st.sampled_from(HOSTILE_STRINGS), spliced)


def hostile_values() -> st.SearchStrategy:
    leaf = st.one_of(st.sampled_from(HOSTILE_NUMBERS), hostile_strings(), st.booleans(), st.none())
    nested = st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)
    return st.one_of(leaf, st.sampled_from(HOSTILE_STRUCTURES), nested)


def json_values() -> st.SearchStrategy:
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 1000), st.text(max_size=12), st.sampled_from(WORDS))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def from_schema(schema: dict, defs: dict, field: str = "") -> st.SearchStrategy:
    """Values a JSON Schema (as pydantic writes it) allows, leaning on words and ids the hub knows."""
    if "$ref" in schema:
        return st.deferred(lambda: from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, field))
    if "anyOf" in schema:
        return st.one_of([from_schema(s, defs, field) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "string":
        return st.one_of(st.sampled_from(WORDS), picks(field), picks(field), st.text(max_size=16))
    if kind == "integer":
        return st.one_of(st.integers(0, 100), st.integers(-(2**31), 2**31), picks(field))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), defs, field), max_size=3)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = st.fixed_dictionaries(
            {k: from_schema(v, defs, k) for k, v in props.items() if k in required},
            optional={k: from_schema(v, defs, k) for k, v in props.items() if k not in required})
        extra = schema.get("additionalProperties", False if props else True)
        if extra is False:
            return fixed
        free = st.one_of(json_values(), st.sampled_from(LOG_POISON))
        more = st.dictionaries(st.text(max_size=8), free if extra is True else from_schema(extra, defs), max_size=3)
        return st.tuples(more, fixed).map(lambda kv: {**kv[0], **kv[1]})
    return json_values()


@st.composite
def bent(draw, valid: st.SearchStrategy) -> Any:
    """A valid body with one thing wrong: a hostile value, an unknown field, a missing field, a nested bomb."""
    body = dict(draw(valid))
    how = draw(st.sampled_from(["value", "value", "value", "unknown", "drop", "inner"]))
    hostile = st.one_of(st.sampled_from(LOG_POISON), hostile_values())
    keys = sorted(body)
    if how == "unknown" or not keys:
        body[draw(st.sampled_from(["zzz", "__proto__", "", "\x00", "x" * 500]))] = draw(hostile)
    elif how == "drop":
        body.pop(draw(st.sampled_from(keys)))
    elif how == "inner" and any(isinstance(body[k], dict | list) for k in keys):
        k = draw(st.sampled_from([k for k in keys if isinstance(body[k], dict | list)]))
        body[k] = {"x": draw(hostile)} if isinstance(body[k], dict) else [draw(hostile)]
    else:
        body[draw(st.sampled_from(keys))] = draw(hostile)
    return body


def hostile_objects() -> st.SearchStrategy:
    return st.dictionaries(st.one_of(st.sampled_from(WORDS), st.text(max_size=8)), hostile_values(), max_size=4)


def bodies(models: tuple, raw_shape: bool) -> st.SearchStrategy:
    """A body for a route that reads ``models`` (or a provider-shaped body, or none at all)."""
    if models:
        valid = st.one_of([from_schema(m.model_json_schema(), m.model_json_schema().get("$defs", {}))
                           for m in models])
    elif raw_shape:
        message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]),
                                         "content": st.one_of(st.text(max_size=20), hostile_strings())})
        valid = st.fixed_dictionaries({"model": st.one_of(st.sampled_from(WORDS), st.text(max_size=10)),
                                       "messages": st.lists(message, max_size=2),
                                       "max_tokens": st.one_of(st.integers(1, 100), st.sampled_from(HOSTILE_NUMBERS))},
                                      optional={"stream": st.booleans()})
    else:
        valid = st.just({})
    return st.one_of(valid, valid, bent(valid), bent(valid), bent(valid), hostile_objects(),
                     st.sampled_from(RAW_BODIES).map(RawBytes), st.none())


def query_params(words: tuple[str, ...]) -> st.SearchStrategy:
    name = st.sampled_from(sorted(set(words) | set(QUERY_NAMES)))
    pairs = name.flatmap(lambda n: st.tuples(st.just(n), st.one_of(st.sampled_from(QUERY_VALUES), picks(n),
                                                                  st.text(max_size=10))))
    return st.lists(pairs, max_size=3)


def path_values(param: str) -> st.SearchStrategy:
    return st.one_of(picks(param), picks(param), st.sampled_from(PATH_VALUES), st.text(min_size=1, max_size=10))


#: What Content-Type the request says: mostly JSON; now and then none or another, which the hub refuses.
content_types = st.sampled_from(["application/json"] * 18 + [None, "text/plain"])
#: Correlation ids (they reach every event a request writes): mostly plain; now and then long or odd.
correlation_prefixes = st.sampled_from([""] * 16 + ["\xe9" * 8, "x" * 8000, "a;b=c,d"])


#: What the poison pass puts into a field of each JSON type: values a strict model lets through to the
#: domain (a string with NUL or a lone surrogate, an int past 64 bits, a free-form dict holding NaN ...).
POISON_BY_TYPE: dict[str, list[Any]] = {
    "string": ["a\x00b", "a\ud800b"],
    "integer": [2**63, -(2**63) - 1],
    "object": [{"x": Raw("NaN")}, {"x": Raw("1e400")}, {"x": 2**64, "y": "\x00"}],
    "array": [["a\x00b"]],
}


def _types(schema: dict, defs: dict) -> list[dict]:
    """The non-null branches of a field's schema, with references followed."""
    if "$ref" in schema:
        return _types(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return [t for s in schema["anyOf"] for t in _types(s, defs)]
    return [] if schema.get("type") == "null" else [schema]


def plausible(schema: dict, defs: dict, field: str, known) -> Any:
    """A value the field would likely take: one the hub named for it, else a simple one of its type."""
    branches = _types(schema, defs) or [{}]
    s = branches[0]
    if "enum" in s:
        return s["enum"][0]
    kind = s.get("type")
    if kind in ("string", "integer"):
        value = known(field)
        if value is not None and isinstance(value, str if kind == "string" else int):
            return value
        return WORDS[0] if kind == "string" else 1
    return {"boolean": False, "array": [], "object": {}}.get(kind, "x")


def poisoned(model, known) -> list[tuple[str, dict]]:
    """For each field of ``model``, bodies whose other required fields are plausible and whose one field
    holds each poison of its type: (field, body)."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    props, required = schema.get("properties", {}), set(schema.get("required", ()))
    out = []
    for name, sub in props.items():
        kinds = {t.get("type") for t in _types(sub, defs)}
        for kind in sorted(k for k in kinds if k in POISON_BY_TYPE):
            for poison in POISON_BY_TYPE[kind]:
                body = {k: plausible(v, defs, k, known) for k, v in props.items() if k in required}
                body[name] = poison
                out.append((name, body))
    return out
