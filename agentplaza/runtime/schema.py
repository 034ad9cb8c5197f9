"""The small subset of JSON Schema the tools' input schemas use, and the check of a value against it.

``check`` validates exactly the keywords in ``KEYWORDS``: ``type`` (one or a list), ``properties``,
``required``, ``additionalProperties: false``, ``enum``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``minLength`` and ``items``; its answer names the field that does not fit, in
words a model can act on. Anthropic's tools take such a schema as it is (no ``anyOf`` at the top
level: a tool with several uses is one flat object whose description says which fields go together).
"""

from __future__ import annotations

from typing import Any

#: The JSON Schema keywords the specs may use (``check`` validates every one of them).
KEYWORDS = frozenset({"type", "description", "properties", "required", "additionalProperties", "enum",
                      "minimum", "maximum", "exclusiveMinimum", "minLength", "items"})


def obj(properties: dict | None = None, required: tuple = ()) -> dict:
    """An object schema with these properties (no others)."""
    schema: dict = {"type": "object", "properties": properties or {}, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def string(description: str, **kw) -> dict:
    return {"type": "string", "description": description, **kw}


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_NAMES = {"object": "an object", "array": "a list", "string": "a string", "integer": "a whole number",
          "number": "a number", "boolean": "true or false", "null": "null"}


def _kind(v: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](v):
            return _NAMES[name]
    return type(v).__name__


def check(schema: dict, value: Any, where: str = "") -> str | None:
    """The first way ``value`` does not fit ``schema`` (the subset in ``KEYWORDS``), naming the field,
    or None when it fits."""
    field = where or "the input"
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            want = " or ".join(_NAMES[t] for t in types)
            return f"{field} must be {want}, not {_kind(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{field} must be one of {', '.join(map(str, schema['enum']))}"
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{field} must be at least {schema['minimum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{field} must be more than {schema['exclusiveMinimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{field} must be at most {schema['maximum']}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"{field} must not be empty" if schema["minLength"] == 1 else \
            f"{field} must be at least {schema['minLength']} characters"
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            bad = check(schema["items"], item, f"{field}[{i}]")
            if bad:
                return bad
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                return f"{_join(where, name)} is required"
        if schema.get("additionalProperties") is False:
            extra = sorted(k for k in value if k not in props)
            if extra:
                takes = f"the fields are {', '.join(props)}" if props else "it takes no fields"
                return f"unknown field {_join(where, extra[0])} ({takes})"
        for name, sub in props.items():
            if name in value:
                bad = check(sub, value[name], _join(where, name))
                if bad:
                    return bad
    return None


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
