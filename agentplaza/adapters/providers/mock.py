"""The mock provider: answers in every wire format without calling any model.

Deterministic: the same request gets the same answer, byte for byte.  Told
what to do by its model name or by directives in the last user message:

- ``[mock:reply TEXT]``: answer TEXT (model ``reply`` answers "mock reply").
- ``[mock:tool NAME {"json": "input"}]``: call the tool NAME with that input
  (model ``tool`` calls the request's first tool with ``{}``).
- ``[mock:fail STATUS MESSAGE]``: fail with that HTTP status (model ``fail``: 500).
- ``[mock:cost USD]``: report that the call cost USD dollars (as OpenRouter does, in ``usage.cost``).
- ``[mock:tokens IN OUT [CACHE_READ [CACHE_WRITE]]]``: report those token counts.

Otherwise (model ``echo`` and any other) it echoes the last user message.
Input tokens are the words of the whole request, output tokens the words of
the answer.  A request with ``stream`` set gets the answer word by word, in
the wire's own server-sent events.  The effort the call was given is echoed
in the reply as ``(effort: E)`` when one was set, so tests can see a pin win.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from .presets import ANTHROPIC, GEMINI, OPENAI

_DIRECTIVE = re.compile(r"\[mock:(reply|tool|fail|cost|tokens)(?:\s+([^\]]*))?\]")


@dataclass
class Script:
    reply: str | None = None
    tool: tuple[str, dict] | None = None
    fail: tuple[int, str] | None = None
    cost: str | None = None
    tokens: list[int] | None = None
    words_in: int = 0
    last_user: str = ""


@dataclass
class MockAnswer:
    status: int
    body: dict | None = None  # a whole answer
    events: list[bytes] = field(default_factory=list)  # or a stream of server-sent events


def _texts(value: Any) -> list[str]:
    """Every piece of text in a request part, however it is nested."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        out: list[str] = []
        for k in ("text", "content", "parts"):
            if k in value:
                out += _texts(value[k])
        return out
    return []


def _last_user(wire: str, body: dict) -> str:
    msgs = body.get("contents" if wire == GEMINI else "messages") or []
    for m in reversed(msgs if isinstance(msgs, list) else []):
        if isinstance(m, dict) and m.get("role") == "user":
            return " ".join(_texts(m.get("parts" if wire == GEMINI else "content")))
    return ""


def script_of(wire: str, body: dict, model: str) -> Script:
    s = Script()
    s.last_user = _last_user(wire, body)
    everything = _texts(body.get("system")) + _texts(body.get("messages")) + _texts(body.get("contents")) \
        + _texts(body.get("systemInstruction"))
    s.words_in = max(sum(len(t.split()) for t in everything), 1)
    tools = body.get("tools") or []
    for kind, arg in _DIRECTIVE.findall(s.last_user):
        arg = arg.strip()
        if kind == "reply":
            s.reply = arg
        elif kind == "tool":
            name, _, raw = arg.partition(" ")
            try:
                args = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                args = {"input": raw}
            s.tool = (name, args if isinstance(args, dict) else {"input": args})
        elif kind == "fail":
            code, _, msg = arg.partition(" ")
            s.fail = (int(code) if code.isdigit() else 500, msg or "the mock was told to fail")
        elif kind == "cost":
            s.cost = arg
        elif kind == "tokens":
            s.tokens = [int(x) for x in arg.split() if x.isdigit()][:4]
    if model == "fail" and s.fail is None:
        s.fail = (500, "the mock model fail always fails")
    if model == "tool" and s.tool is None:
        s.tool = (_first_tool(wire, tools), {})
    if model == "reply" and s.reply is None:
        s.reply = "mock reply"
    if s.reply is None:
        cleaned = _DIRECTIVE.sub("", s.last_user).strip()
        s.reply = cleaned or "mock reply"
    return s


def _first_tool(wire: str, tools: list) -> str:
    for t in tools if isinstance(tools, list) else []:
        if not isinstance(t, dict):
            continue
        if wire == OPENAI and isinstance(t.get("function"), dict):
            return str(t["function"].get("name", "tool"))
        if wire == GEMINI:
            for f in t.get("functionDeclarations") or []:
                return str(f.get("name", "tool"))
        if "name" in t:
            return str(t["name"])
    return "tool"


def _sse(data: dict, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def _usage_numbers(s: Script, text: str) -> tuple[int, int, int, int]:
    if s.tokens:
        t = s.tokens + [0] * (4 - len(s.tokens))
        return t[0], t[1], t[2], t[3]
    return s.words_in, max(len(text.split()), 1), 0, 0


def answer(wire: str, body: dict, model: str, stream: bool, effort: str | None = None, call_id: str = "mock") -> MockAnswer:
    s = script_of(wire, body, model)
    if s.fail:
        status, message = s.fail
        from .wire import error_body

        return MockAnswer(status, error_body(wire, status, "mock_failure", message))
    text = s.reply if effort is None else f"{s.reply} (effort: {effort})"
    tin, tout, cread, cwrite = _usage_numbers(s, text)
    words = text.split(" ")
    chunks = [w if i == 0 else " " + w for i, w in enumerate(words)]
    if wire == ANTHROPIC:
        return _anthropic(s, model, stream, text, chunks, (tin, tout, cread, cwrite), call_id)
    if wire == OPENAI:
        return _openai(s, model, stream, text, chunks, (tin, tout, cread, cwrite), call_id, body)
    return _gemini(s, model, stream, text, chunks, (tin, tout, cread, cwrite))


def _cost_field(s: Script) -> dict:
    return {"cost": float(s.cost)} if s.cost is not None else {}


def _anthropic(s: Script, model: str, stream: bool, text: str, chunks: list[str], t: tuple, call_id: str) -> MockAnswer:
    usage = {"input_tokens": t[0], "output_tokens": t[1], "cache_creation_input_tokens": t[3],
             "cache_read_input_tokens": t[2], **_cost_field(s)}
    mid = f"msg_mock_{call_id}"
    if s.tool:
        block = {"type": "tool_use", "id": f"toolu_mock_{call_id}", "name": s.tool[0], "input": s.tool[1]}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": text}
        stop = "end_turn"
    if not stream:
        return MockAnswer(200, {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [block],
                                "stop_reason": stop, "stop_sequence": None, "usage": usage})
    start_usage = {"input_tokens": t[0], "output_tokens": 1, "cache_creation_input_tokens": t[3],
                   "cache_read_input_tokens": t[2]}
    ev = [_sse({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant", "model": model,
                                                      "content": [], "stop_reason": None, "stop_sequence": None,
                                                      "usage": start_usage}}, "message_start")]
    if s.tool:
        ev.append(_sse({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}},
                       "content_block_start"))
        ev.append(_sse({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(s.tool[1])}}, "content_block_delta"))
    else:
        ev.append(_sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                       "content_block_start"))
        ev.append(_sse({"type": "ping"}, "ping"))
        for c in chunks:
            ev.append(_sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c}},
                           "content_block_delta"))
    ev.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    ev.append(_sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": t[1], **_cost_field(s)}}, "message_delta"))
    ev.append(_sse({"type": "message_stop"}, "message_stop"))
    return MockAnswer(200, events=ev)


def _openai(s: Script, model: str, stream: bool, text: str, chunks: list[str], t: tuple, call_id: str, body: dict) -> MockAnswer:
    usage = {"prompt_tokens": t[0] + t[2], "completion_tokens": t[1], "total_tokens": t[0] + t[2] + t[1],
             "prompt_tokens_details": {"cached_tokens": t[2]}, **_cost_field(s)}
    cid = f"chatcmpl-mock-{call_id}"
    if s.tool:
        call = {"id": f"call_mock_{call_id}", "type": "function",
                "function": {"name": s.tool[0], "arguments": json.dumps(s.tool[1])}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": text}
        finish = "stop"
    if not stream:
        return MockAnswer(200, {"id": cid, "object": "chat.completion", "created": 0, "model": model,
                                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                                "usage": usage})
    base = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model}
    ev = [b"data: " + orjson.dumps({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                         "finish_reason": None}]}) + b"\n\n"]
    if s.tool:
        delta = {"tool_calls": [{"index": 0, **call}]}
        ev.append(b"data: " + orjson.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}) + b"\n\n")
    else:
        for c in chunks:
            ev.append(b"data: " + orjson.dumps({**base, "choices": [{"index": 0, "delta": {"content": c},
                                                                     "finish_reason": None}]}) + b"\n\n")
    ev.append(b"data: " + orjson.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}) + b"\n\n")
    if (body.get("stream_options") or {}).get("include_usage"):
        ev.append(b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n")
    ev.append(b"data: [DONE]\n\n")
    return MockAnswer(200, events=ev)


def _gemini(s: Script, model: str, stream: bool, text: str, chunks: list[str], t: tuple) -> MockAnswer:
    usage = {"promptTokenCount": t[0] + t[2], "candidatesTokenCount": t[1], "totalTokenCount": t[0] + t[2] + t[1],
             **({"cachedContentTokenCount": t[2]} if t[2] else {}), **_cost_field(s)}
    if s.tool:
        parts = [{"functionCall": {"name": s.tool[0], "args": s.tool[1]}}]
    else:
        parts = [{"text": text}]
    if not stream:
        return MockAnswer(200, {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP",
                                                "index": 0}], "usageMetadata": usage, "modelVersion": model})
    pieces = [[{"text": c}] for c in chunks] if not s.tool else [parts]
    ev = []
    for i, p in enumerate(pieces):
        last = i == len(pieces) - 1
        cand = {"content": {"parts": p, "role": "model"}, "index": 0, **({"finishReason": "STOP"} if last else {})}
        ev.append(b"data: " + orjson.dumps({"candidates": [cand], "modelVersion": model,
                                             **({"usageMetadata": usage} if last else {})}) + b"\r\n\r\n")
    return MockAnswer(200, events=ev)
