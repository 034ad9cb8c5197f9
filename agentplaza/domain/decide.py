"""The plaza's decision model: a yes-or-no question, a choice among options, or a score.

``agentplaza decide`` asks the plaza's decision model (the model policy's ``decision_models``)
one question and prints a probability for each answer. The rules here are pure: what a question
may be, the answers it has, the prompt the model is sent, and how its reply becomes one
probability per answer (every answer named, each from 0 to 1, summing to 1). The call itself
goes through the hub's gateway machinery (``api/routes/decide.py``): STOP ALL holds it, the
policy names the model, the provider's key comes from the vault, the call is metered.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from .base import Refusal

#: What a question asks for.
YES_NO, CHOICE, SCORE = "yes_no", "choice", "score"
KINDS = (YES_NO, CHOICE, SCORE)
#: A yes-or-no question's two answers, in this order.
YES_NO_ANSWERS = ("yes", "no")
#: The longest question, and the longest option, in characters.
MAX_QUESTION_CHARS = 4000
MAX_OPTION_CHARS = 200
#: A choice offers 2 to 20 options.
MIN_OPTIONS, MAX_OPTIONS = 2, 20
#: A score is a whole number on a scale; the shipped scale is 1 to 5, and a scale spans at most 20 steps.
DEFAULT_SCALE = (1, 5)
MAX_SCALE_STEPS = 20
MIN_SCALE_VALUE, MAX_SCALE_VALUE = -1000, 1000
#: The most tokens the model may answer with (a small JSON object).
MAX_ANSWER_TOKENS = 400
#: The system prompt every decision is asked under.
SYSTEM_PROMPT = ("You are the plaza's decision model. You answer one question with a probability for each of "
                 "the answers offered, as one JSON object mapping each answer to a number from 0 to 1, the "
                 "numbers summing to 1. Reply with that JSON object and nothing else.")


@dataclass(frozen=True)
class Question:
    text: str
    kind: str
    answers: tuple[str, ...]


def _clean(text: object, what: str, limit: int) -> str:
    if not isinstance(text, str) or not text.strip():
        raise Refusal("invalid_options" if what != "the question" else "invalid_request", f"{what} is empty")
    text = text.strip()
    if len(text) > limit:
        raise Refusal("invalid_options" if what != "the question" else "invalid_request",
                      f"{what} is at most {limit} characters")
    return text


def question(text: object, kind: str, options: list | None = None, scale: tuple[int, int] | None = None) -> Question:
    """A question as the decision model is asked it, with its answers; refused when it is not one."""
    q = _clean(text, "the question", MAX_QUESTION_CHARS)
    if kind not in KINDS:
        raise Refusal("invalid_kind", f"a decision is one of {', '.join(KINDS)}")
    if kind != CHOICE and options:
        raise Refusal("invalid_options", f"only a choice takes options; a {kind} question has its own answers")
    if kind != SCORE and scale is not None:
        raise Refusal("invalid_options", "only a score takes a scale")
    if kind == YES_NO:
        return Question(q, kind, YES_NO_ANSWERS)
    if kind == CHOICE:
        if not isinstance(options, list) or not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
            raise Refusal("invalid_options", f"a choice offers {MIN_OPTIONS} to {MAX_OPTIONS} options")
        answers = tuple(_clean(o, "an option", MAX_OPTION_CHARS) for o in options)
        if len({a.casefold() for a in answers}) != len(answers):
            raise Refusal("invalid_options", "a choice names each option once")
        return Question(q, kind, answers)
    lo, hi = scale if scale is not None else DEFAULT_SCALE
    if (type(lo) is not int or type(hi) is not int or not MIN_SCALE_VALUE <= lo < hi <= MAX_SCALE_VALUE
            or hi - lo > MAX_SCALE_STEPS):
        raise Refusal("invalid_options", f"a score's scale is two whole numbers, the lower first, at most "
                      f"{MAX_SCALE_STEPS} apart (from {MIN_SCALE_VALUE} to {MAX_SCALE_VALUE})")
    return Question(q, kind, tuple(str(v) for v in range(lo, hi + 1)))


def prompt(q: Question) -> str:
    """The user message the decision model is sent."""
    what = {YES_NO: "Answer yes or no.", CHOICE: "Choose one of the options.",
            SCORE: f"Give a score from {q.answers[0]} to {q.answers[-1]}."}[q.kind]
    return (f"{what}\n\nQuestion: {q.text}\n\nThe answers: {json.dumps(list(q.answers))}\n"
            "Reply with one JSON object mapping every answer to its probability.")


_OBJECT = re.compile(r"\{.*\}", re.S)


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and f >= 0 else None


def probabilities(q: Question, reply: str) -> dict[str, float]:
    """The model's reply as one probability per answer, in the question's order, summing to 1.

    A JSON object maps answers (matched without regard to case) to numbers; an answer it leaves
    out has 0; the numbers are scaled to sum to 1 (a model giving percentages reads the same). A
    reply that is only one of the answers gives that answer 1. Anything else is refused
    (``decision_unreadable``): the plaza does not guess.
    """
    by_fold = {a.casefold(): a for a in q.answers}
    text = (reply or "").strip()
    found = _OBJECT.search(text)
    if found:
        try:
            data = json.loads(found.group(0))
        except ValueError:
            data = None
        if isinstance(data, dict):
            weights = dict.fromkeys(q.answers, 0.0)
            for k, v in data.items():
                answer = by_fold.get(str(k).strip().casefold())
                n = _number(v)
                if answer is None or n is None:
                    raise Refusal("decision_unreadable", f"the decision model answered {str(k)[:40]!r}, "
                                  "which is not one of the answers with a number of 0 or more")
                weights[answer] = n
            total = sum(weights.values())
            if total > 0:
                return {a: w / total for a, w in weights.items()}
    word = text.strip(" .!\"'`").casefold()
    if word in by_fold:
        return {a: 1.0 if a == by_fold[word] else 0.0 for a in q.answers}
    raise Refusal("decision_unreadable", "the decision model's reply names no probability for the answers offered")


def best(p: dict[str, float]) -> str:
    """The likeliest answer (the first of equals, in the question's order)."""
    return max(p, key=lambda a: p[a])
