"""One short question to a model in a provider's own wire, and the text of its answer.

The hub asks on its own behalf (the plaza's decision model): a system prompt, one user message,
a small answer. Each wire shapes the request its own way and puts the answer's text elsewhere.
"""

from __future__ import annotations

from typing import Any

from .presets import ANTHROPIC, GEMINI, OPENAI


def ask_body(wire: str, model: str, system: str, message: str, max_tokens: int) -> dict:
    """The request body that asks ``message`` under ``system``."""
    if wire == ANTHROPIC:
        return {"model": model, "max_tokens": max_tokens, "system": system,
                "messages": [{"role": "user", "content": message}]}
    if wire == OPENAI:
        return {"model": model, "max_tokens": max_tokens,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": message}]}
    assert wire == GEMINI, wire
    return {"systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": message}]}],
            "generationConfig": {"maxOutputTokens": max_tokens}}


def answer_text(wire: str, data: Any) -> str:
    """The text of a whole answer (empty when it carries none)."""
    if not isinstance(data, dict):
        return ""
    if wire == ANTHROPIC:
        blocks = data.get("content") or []
        return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    if wire == OPENAI:
        choices = data.get("choices") or []
        msg = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        return content if isinstance(content, str) else ""
    candidates = data.get("candidates") or []
    first = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
    parts = (first.get("content") or {}).get("parts") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def error_text(data: Any) -> str:
    """The message of a provider's error answer, in any wire's shape (empty when none)."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
    return ""
