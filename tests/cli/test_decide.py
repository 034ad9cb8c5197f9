"""agentplaza decide: the plaza's decision model answers through the gateway's path, with the mock
provider scripted to answer (``[mock:reply ...]`` in the question)."""

from __future__ import annotations

import json

import pytest
from support.hubproc import cli, ok

from agentplaza.domain import decide as rules
from agentplaza.domain.base import Refusal

YES_80 = 'Ship the release? [mock:reply {"yes": 0.8, "no": 0.2}]'


def refused(code: str, fn, *args):
    with pytest.raises(Refusal) as e:
        fn(*args)
    assert e.value.code == code, e.value


# -- the rules ------------------------------------------------------------------------------------


def test_the_answers_of_each_kind_of_question():
    assert rules.question("Ship?", "yes_no").answers == ("yes", "no")
    assert rules.question("Which?", "choice", ["red", "blue"]).answers == ("red", "blue")
    assert rules.question("Rate it", "score").answers == ("1", "2", "3", "4", "5")
    assert rules.question("Rate it", "score", None, (0, 10)).answers == tuple(str(i) for i in range(11))


def test_bad_options_are_refused():
    refused("invalid_options", rules.question, "Which?", "choice", ["only one"])
    refused("invalid_options", rules.question, "Which?", "choice", ["red", "RED"])
    refused("invalid_options", rules.question, "Which?", "choice", ["red", " "])
    refused("invalid_options", rules.question, "Which?", "choice", [f"o{i}" for i in range(21)])
    refused("invalid_options", rules.question, "Ship?", "yes_no", ["a", "b"])
    refused("invalid_options", rules.question, "Rate", "score", None, (5, 1))
    refused("invalid_options", rules.question, "Rate", "score", None, (0, 100))
    refused("invalid_options", rules.question, "Ship?", "yes_no", None, (1, 5))
    refused("invalid_kind", rules.question, "Ship?", "maybe")
    refused("invalid_request", rules.question, "  ", "yes_no")


def test_a_reply_becomes_one_probability_per_answer_summing_to_one():
    q = rules.question("Which?", "choice", ["Red", "Blue", "Green"])
    assert rules.probabilities(q, '{"red": 60, "BLUE": 40}') == {"Red": 0.6, "Blue": 0.4, "Green": 0.0}
    assert rules.probabilities(q, 'Sure: {"Green": 1} (effort: low)') == {"Red": 0.0, "Blue": 0.0, "Green": 1.0}
    assert rules.probabilities(q, "blue.") == {"Red": 0.0, "Blue": 1.0, "Green": 0.0}
    refused("decision_unreadable", rules.probabilities, q, '{"purple": 1}')
    refused("decision_unreadable", rules.probabilities, q, '{"red": -1}')
    refused("decision_unreadable", rules.probabilities, q, '{"red": 0, "blue": 0}')
    refused("decision_unreadable", rules.probabilities, q, "I cannot say")
    assert rules.best({"a": 0.5, "b": 0.5}) == "a"


# -- through a real hub ---------------------------------------------------------------------------------


def mock_decides(c) -> None:
    ok(c.post("/v1/models/providers", json={"id": "mock"}))
    ok(c.patch("/v1/models/policy", json={"decision_models": ["mock/echo"]}))


def test_no_decision_model_is_a_clear_refusal(hub):
    with hub.client() as c:  # the shipped decision model's provider has no key
        r = c.post("/v1/decide", json={"question": "Ship?"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "no_decision_model"
    assert "deepseek has no key" in r.json()["error"]["message"]


def test_a_yes_or_no_question_a_choice_and_a_score_from_the_command_line(hub):
    with hub.client() as c:
        mock_decides(c)
    r = cli(hub, "decide", YES_80)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split()[:2] == ["yes", "80.0%"] and "asked mock/echo" in r.stdout
    r = cli(hub, "decide", 'Colour? [mock:reply {"red": 1, "blue": 3}]', "-o", "red", "-o", "blue", "--json")
    d = json.loads(r.stdout)
    assert [(a["answer"], a["probability"]) for a in d["answers"]] == [("red", 0.25), ("blue", 0.75)]
    assert d["best"] == "blue" and d["kind"] == "choice"
    r = cli(hub, "--json", "decide", "How good? [mock:reply 4]", "--score", "--min", "1", "--max", "3")
    assert r.returncode == 1 and "(decision_unreadable)" in r.stderr  # 4 is not on a 1-3 scale
    d = json.loads(cli(hub, "--json", "decide", "How good? [mock:reply 4]", "--score").stdout)
    assert [a["answer"] for a in d["answers"]] == ["1", "2", "3", "4", "5"] and d["best"] == "4"
    r = cli(hub, "decide", "Colour?", "-o", "red")
    assert r.returncode == 1 and "(invalid_options)" in r.stderr


def test_the_call_is_metered_and_held_by_stop_all(hub):
    with hub.client() as c:
        mock_decides(c)
        ok(c.post("/v1/decide", json={"question": YES_80}))
        calls = ok(c.get("/v1/usage/calls"))["calls"]
        assert [(x["provider"], x["model"], x["role"], x["agent"], x["status"]) for x in calls] == \
            [("mock", "echo", "decide", "owner", "ok")]
        assert calls[0]["input_tokens"] > 0 and calls[0]["charged"] == 0
        ok(c.post("/v1/plaza/stop", json={"reason": "audit"}))
        r = c.post("/v1/decide", json={"question": YES_80})
        assert r.status_code == 409 and r.json()["error"]["code"] == "plaza_held"
        assert len(ok(c.get("/v1/usage/calls"))["calls"]) == 1  # nothing reached a provider
        ok(c.post("/v1/plaza/resume", json={}))
        r = c.post("/v1/decide", json={"question": YES_80, "model": "mock/tool"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "model_not_allowed"
        d = ok(c.post("/v1/decide", json={"question": YES_80, "model": "echo"}))
        assert d["model"] == "mock/echo"


def test_a_failing_decision_model_is_a_clear_refusal(hub):
    with hub.client() as c:
        mock_decides(c)
        r = c.post("/v1/decide", json={"question": "Ship? [mock:fail 503 overloaded]"})
        assert r.status_code == 502 and r.json()["error"]["code"] == "decision_failed"
        assert "overloaded" in r.json()["error"]["message"]
        assert [x["status"] for x in ok(c.get("/v1/usage/calls"))["calls"]] == ["error"]
