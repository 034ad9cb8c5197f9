"""A local fake provider that speaks each real wire format, as the providers document them.

Anthropic Messages, OpenAI Chat Completions and Gemini generateContent, whole
and streamed (server-sent events).  It answers with fixed, recorded shapes
(text, token usage with cache counts) and remembers each request it got, so
tests can see what the gateway sent: the real key, the provider's own model
name, the effort.  Standard library only, so it shares nothing with the hub.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEYS = {"anthropic": "sk-ant-test-key", "openai": "sk-openai-test-key", "gemini": "gemini-test-key"}


def _sse(events: list[tuple[str | None, dict]], crlf: bool = False) -> bytes:
    end = "\r\n\r\n" if crlf else "\n\n"
    out = []
    for name, data in events:
        out.append((f"event: {name}\n" if name else "") + "data: " + json.dumps(data) + end)
    return "".join(out).encode()


def anthropic_message(model: str, text: str) -> dict:
    # https://docs.anthropic.com/en/api/messages (response example)
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 100,
                  "cache_read_input_tokens": 1000},
    }


def anthropic_stream(model: str, words: list[str]) -> bytes:
    # https://docs.anthropic.com/en/api/messages-streaming (basic streaming request)
    ev: list[tuple[str | None, dict]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [],
            "model": model, "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 25, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 10}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
    ]
    for w in words:
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": w}}))
    ev += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 15}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return _sse(ev)


def openai_completion(model: str, text: str) -> dict:
    # https://platform.openai.com/docs/api-reference/chat/object
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952,
        "model": model, "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None, "annotations": []},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
                  "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
        "service_tier": "default",
    }


def openai_stream(model: str, words: list[str], include_usage: bool) -> bytes:
    # https://platform.openai.com/docs/api-reference/chat/streaming
    base = {"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1694268190, "model": model,
            "system_fingerprint": "fp_44709d6fcb"}
    ev: list[tuple[str | None, dict]] = [(None, {**base, "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]})]
    for w in words:
        ev.append((None, {**base, "choices": [{"index": 0, "delta": {"content": w}, "logprobs": None, "finish_reason": None}]}))
    ev.append((None, {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]}))
    if include_usage:
        ev.append((None, {**base, "choices": [], "usage": {"prompt_tokens": 19, "completion_tokens": 10,
                                                           "total_tokens": 29, "prompt_tokens_details": {"cached_tokens": 0}}}))
    return _sse(ev) + b"data: [DONE]\n\n"


def gemini_response(model: str, text: str) -> dict:
    # https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse
    return {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 12, "totalTokenCount": 20,
                          "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 8}]},
        "modelVersion": model, "responseId": "mock-response-id",
    }


def gemini_stream(model: str, words: list[str]) -> bytes:
    ev = []
    for i, w in enumerate(words):
        last = i == len(words) - 1
        chunk = {"candidates": [{"content": {"parts": [{"text": w}], "role": "model"}, "index": 0,
                                 **({"finishReason": "STOP"} if last else {})}],
                 "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": i + 1, "totalTokenCount": 9 + i},
                 "modelVersion": model}
        ev.append((None, chunk))
    return _sse(ev, crlf=True)


class _Server(ThreadingHTTPServer):
    #: Connections waiting to be accepted: the benches' callers connect at once (the default of 5 drops
    #: the others' first packets, and each waits a second to try again).
    request_queue_size = 128


class FakeUpstream:
    """``with FakeUpstream() as up:`` serves on 127.0.0.1:<up.port> until the block ends."""

    text = "Hello from the fake upstream"

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.usage: dict | None = None  # set: every whole answer carries this usage instead of its own
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                       "body": body})
                status, ctype, payload = outer.answer(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path: str, headers: dict, body: dict) -> tuple[int, str, bytes]:
        status, ctype, payload = self._answer(path, headers, body)
        if self.usage is not None and ctype == "application/json" and status == 200:
            whole = json.loads(payload)
            whole["usageMetadata" if "usageMetadata" in whole else "usage"] = self.usage
            payload = json.dumps(whole).encode()
        return status, ctype, payload

    def _answer(self, path: str, headers: dict, body: dict) -> tuple[int, str, bytes]:
        words = [w if i == 0 else " " + w for i, w in enumerate(self.text.split())]
        if path.startswith("/v1/messages"):
            if headers.get("x-api-key") != KEYS["anthropic"]:
                return 401, "application/json", json.dumps({"type": "error", "error": {
                    "type": "authentication_error", "message": "invalid x-api-key"}}).encode()
            if body.get("stream"):
                return 200, "text/event-stream", anthropic_stream(body["model"], words)
            return 200, "application/json", json.dumps(anthropic_message(body["model"], self.text)).encode()
        if path.startswith("/v1/chat/completions"):
            if headers.get("authorization") != f"Bearer {KEYS['openai']}":
                return 401, "application/json", json.dumps({"error": {
                    "message": "Incorrect API key provided", "type": "invalid_request_error",
                    "param": None, "code": "invalid_api_key"}}).encode()
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return 200, "text/event-stream", openai_stream(body["model"], words, usage)
            return 200, "application/json", json.dumps(openai_completion(body["model"], self.text)).encode()
        if path.startswith("/v1beta/models/"):
            if headers.get("x-goog-api-key") != KEYS["gemini"]:
                return 400, "application/json", json.dumps({"error": {
                    "code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}).encode()
            model = path.split("/v1beta/models/", 1)[1].split(":", 1)[0]
            if ":streamGenerateContent" in path:
                return 200, "text/event-stream", gemini_stream(model, words)
            return 200, "application/json", json.dumps(gemini_response(model, self.text)).encode()
        return 404, "application/json", b'{"error": {"message": "not found"}}'

    def __enter__(self) -> FakeUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
