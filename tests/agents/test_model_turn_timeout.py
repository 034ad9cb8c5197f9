"""A model turn through the gateway in process is given up after ``MODEL_TURN_TIMEOUT_S``: a gateway step that
never answers fails the turn, and the agent's harness goes on, where before it waited for good."""

from __future__ import annotations

import types

import anyio
import pytest
from anyio.from_thread import start_blocking_portal

from agentplaza.runtime import modelrelay
from vmm.guest import contract


async def _answers(token: str, body: dict, headers: dict) -> tuple[int, bytes]:
    await anyio.sleep(0)
    return 200, b'{"content": [{"type": "text", "text": "hello"}], "model": "m"}'


async def _never_answers(token: str, body: dict, headers: dict) -> tuple[int, bytes]:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


@pytest.mark.parametrize("backend", ["trio", "asyncio"])  # the hub runs on trio
def test_a_call_in_process_answers_or_is_given_up_after_the_limit(backend):
    with start_blocking_portal(backend) as portal:
        assert modelrelay.in_process(portal, _answers, 5)("tok", {}, {})[0] == 200
        with pytest.raises(modelrelay.TurnGivenUp, match="did not answer within 0.2 s"):
            modelrelay.in_process(portal, _never_answers, 0.2)("tok", {}, {})


class _Relay(modelrelay.ModelRelay):
    """The relay's own steps around the gateway (the model, the task, the token) answered here."""

    def model_of(self, agent):
        return "m"

    def task_of(self, agent):
        return None

    def token_for(self, agent, task=None):
        return "tok"


def test_a_turn_the_gateway_never_answers_fails_with_a_clear_error_and_the_next_turn_runs():
    agent = types.SimpleNamespace(cid=3)
    with start_blocking_portal("trio") as portal:
        calls = iter([_never_answers, _answers])

        async def gateway(token: str, body: dict, headers: dict) -> tuple[int, bytes]:
            return await next(calls)(token, body, headers)

        relay = _Relay(hub=None, gateway=modelrelay.in_process(portal, gateway, 0.2))
        r = relay.turn(agent, [{"role": "user", "content": "hi"}], [])
        err = contract.error_of(r)
        assert err["code"] == "gateway_unreachable"
        assert err["message"] == "the gateway did not answer within 0.2 s; the turn was given up"
        assert relay.turn(agent, [{"role": "user", "content": "hi"}], [])["reply"]["text"] == "hello"
