"""The gate at the edge: no value the store could not hold or read back gets past a request.

Each request the issue quotes, replayed against a real hub on SQLite and on PostgreSQL: a 4xx that
names the field, the hub alive, the log unchanged and readable, ``audit verify`` intact, and a
restart that succeeds.  Then the gate's own rules, the guest channel's, the provider's usage, and
approvals whose detail cannot act.
"""

from __future__ import annotations

import json

import pytest
from support.fake_upstream import KEYS, FakeUpstream
from support.hubproc import HubProcess, cli
from support.treasury import Plaza

from agentplaza import gate
from agentplaza.adapters.providers.wire import USAGE_TOKENS_MAX, Meter
from agentplaza.commands import approvals as ap
from agentplaza.domain.approvals import Approval, approval_id
from agentplaza.domain.base import Refusal
from agentplaza.domain.refusals import Kind

JSON = {"content-type": "application/json"}
DEEP = b"[" * 40_000

#: (method, path, raw body or None, status, code, what the message names)
QUOTED = [
    ("POST", "/v1/rules/explain", b'{"role":"builder","tool":"x","args":{"x":NaN}}', 422, "invalid_value", "args.x"),
    ("POST", "/v1/rules/explain", b'{"role":"builder","tool":"x","args":{"x":Infinity}}', 422, "invalid_value", "args.x"),
    ("POST", "/v1/rules/explain", b'{"role":"builder","tool":"x","args":{"x":-Infinity}}', 422, "invalid_value",
     "args.x"),
    ("POST", "/v1/rules/explain", b'{"role":"builder","tool":"x","args":{"x":1e400}}', 422, "invalid_value", "args.x"),
    ("POST", "/v1/rules/explain", b'{"role":"builder","tool":"x","args":{"n":9223372036854775808}}', 422,
     "invalid_value", "args.n"),
    ("POST", "/v1/plaza/stop", b'{"reason":"a\\u0000b"}', 422, "invalid_value", "reason"),
    ("POST", "/v1/tasks", b'{"title":"t\\u0000x","acceptance":"done"}', 422, "invalid_value", "title"),
    ("POST", "/v1/tasks", b'{"title":"t\\ud800x","acceptance":"done"}', 422, "invalid_value", "title"),
    ("POST", "/v1/plaza/stop", b'{"reason":"ok","\\u0000":1}', 422, "invalid_value", "a key"),
    ("GET", "/v1/events?after=99999999999999999999", None, 422, "invalid_request", "after"),
    ("GET", "/v1/events?after=-99999999999999999999", None, 422, "invalid_request", "after"),
    ("GET", "/v1/approvals?agent=%00", None, 422, "invalid_request", "agent"),
    ("POST", "/v1/replay/rebuild", DEEP, 422, "invalid_value", "nests"),
    ("POST", "/v1/plaza/stop", DEEP, 422, "invalid_value", "nests"),
    ("POST", "/v1/plaza/stop", b"{" * 40_000, 422, "invalid_value", "nests"),
]

#: Approvals other areas make whose detail could not act: (kind, detail, what the message names).
BAD_DETAILS = [
    ("agent", {}, "detail.role"),
    ("agent", {"role": "builder", "count": 17}, "detail.count"),
    ("payment", {}, "detail.payment"),
]


def _send(c, method: str, path: str, raw: bytes | None):
    if raw is None:
        return c.request(method, path)
    return c.request(method, path, content=raw, headers=JSON)


def test_each_quoted_request_is_refused_naming_its_field_and_changes_nothing(folders, database_url):
    h = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        with h.client() as c:
            assert c.post("/v1/plaza/stop", json={"reason": "before"}).status_code == 200
            assert c.post("/v1/plaza/resume", json={}).status_code == 200
            before = c.get("/v1/hub").json()["position"]
            for method, path, raw, status, code, names in QUOTED:
                r = _send(c, method, path, raw)
                assert (r.status_code, r.json()["error"]["code"]) == (status, code), (path, raw and raw[:60], r.text)
                assert names in r.json()["error"]["message"], r.text
                assert c.get("/v1/health").json() == {"ok": True}
            assert c.get("/v1/hub").json()["position"] == before
            log = c.get("/v1/events", params={"after": 0, "limit": 1000}).json()["events"]
            assert len(log) == before
            assert c.get("/v1/plaza").json()["state"] == "running"
        audit = cli(h, "audit", "verify")
        assert audit.returncode == 0 and audit.stdout.startswith("intact"), audit.stdout + audit.stderr
    finally:
        h.stop()
    again = HubProcess(folders, database_url, args=("--node", "off")).start()
    try:
        with again.client() as c:
            # the log reads back as it was (a start may add its own events after it)
            assert c.get("/v1/events", params={"after": 0, "limit": before}).json()["events"] == log
            assert c.post("/v1/plaza/stop", json={"reason": "after a restart"}).status_code == 200
    finally:
        again.stop()


# -- the gate's rules, on their own ------------------------------------------------------------------


@pytest.mark.parametrize("raw, where", [
    (b'{"a":{"b":[1,2,NaN]}}', "a.b[2]"),
    (b'{"a":-9223372036854775809}', "a"),
    (b'{"a":' + b"9" * 5000 + b"}", "a"),  # past the digits Python reads at all
    (b'{"a b":{"c":"\\u0000"}}', '"a b".c'),
    (b'{"a":"' + b"x" * (gate.BODY_STRING_CHARS_MAX + 1) + b'"}', "a"),
    (b"[" * (gate.DEPTH_MAX + 1) + b"]" * (gate.DEPTH_MAX + 1), "body"),
    (b'{"a":[' + b",".join([b"1"] * (gate.ITEMS_MAX + 1)) + b"]}", "a"),
])
def test_the_gate_names_the_path_of_what_it_refuses(raw, where):
    with pytest.raises(gate.OutOfBounds) as e:
        gate.loads(raw)
    assert e.value.path == where


def test_the_gate_passes_what_the_store_holds():
    raw = b'{"a":[1,-9223372036854775808,9223372036854775807,1.5e300,"\\u00e9 \\ud83d\\ude00",' \
          b'{"s":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"]]]"}],"b":null}'
    assert gate.loads(raw)["a"][4] == "é 😀"
    assert gate.loads(b"[" * gate.DEPTH_MAX + b"]" * gate.DEPTH_MAX) is not None
    with pytest.raises(gate.NotJson):
        gate.loads(b'\xff{"a":1}')


def test_integer_parameters_are_read_within_signed_64_bits():
    assert gate.query_int("after", None, 0) == 0
    assert gate.query_int("after", "0009", 0) == 9
    assert gate.query_int("after", str(gate.INT64_MAX), 0) == gate.INT64_MAX
    for raw in ("99999999999999999999", str(gate.INT64_MAX + 1), "-1", "1e3", "١٢", "1_000"):
        with pytest.raises(gate.OutOfBounds):
            gate.query_int("after", raw, 0)


# -- approvals whose detail cannot act --------------------------------------------------------------


@pytest.fixture
def p(folders, database_url):
    plaza = Plaza(folders.state, database_url)
    yield plaza
    plaza.close()


@pytest.mark.parametrize(("kind", "detail", "names"), BAD_DETAILS)
def test_an_approval_whose_detail_could_not_act_is_refused_naming_its_field_and_changes_nothing(p, kind, detail,
                                                                                                names):
    before = p.store.max_position()
    with pytest.raises(Refusal) as e:
        ap.request(p.cmds, p.ctx(), kind, "x", detail=detail)
    assert (e.value.kind, e.value.code) == (Kind.INVALID, "invalid_detail") and names in e.value.message
    assert p.store.max_position() == before


@pytest.mark.parametrize("kind", ["agent", "payment"])
def test_a_malformed_approval_already_in_the_log_is_refused_approval_and_can_be_denied(p, kind):
    ctx = p.ctx()

    def write_it(unit):  # as a hub from before details were checked wrote it: no detail
        payload = dict(number="a1", kind=kind, title="old", agent=None, ref=None, detail={},
                       actor=ctx.actor, reason=None, correlation_id=ctx.correlation_id)
        unit.add(Approval._create(Approval.Requested, id=approval_id("a1"), timestamp=ctx.at, **payload))

    p.cmds.run(write_it)
    before = p.cmds.store.max_position()
    with pytest.raises(Refusal) as e:
        ap.decide(p.cmds, p.ctx(), "a1", True)
    assert (e.value.code, e.value.kind) == ("invalid_detail", Kind.INVALID) and "deny it" in e.value.message
    assert p.cmds.store.max_position() == before
    ap.decide(p.cmds, p.ctx("owner", "malformed"), "a1", False)
    assert ap.load(p.cmds, "a1").status == "denied"


# -- a provider's usage ----------------------------------------------------------------------------


@pytest.mark.parametrize("usage, field", [
    ({"prompt_tokens": 2**63, "completion_tokens": 1}, "usage.prompt_tokens"),
    ({"prompt_tokens": -5, "completion_tokens": 1}, "usage.prompt_tokens"),
    ({"prompt_tokens": 3, "completion_tokens": 1.5}, "usage.completion_tokens"),
    ({"prompt_tokens": 3, "completion_tokens": "2"}, "usage.completion_tokens"),
    ({"prompt_tokens": USAGE_TOKENS_MAX + 1}, "usage.prompt_tokens"),
    ({"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2**64}}, "usage.prompt_tokens_details.cached_tokens"),
    ({"prompt_tokens": 3, "cost": "1e400"}, "usage.cost"),
])
def test_a_usage_the_plaza_cannot_record_is_a_fault_with_no_tokens(usage, field):
    m = Meter("openai")
    t = m.body({"usage": usage})
    assert m.fault is not None and m.fault.startswith(field + ":")
    assert (t.input, t.output, t.cache_read, t.cache_write, t.cost_usd) == (0, 0, 0, 0, None)


def test_a_usage_in_range_is_counted():
    m = Meter("openai")
    t = m.body({"usage": {"prompt_tokens": 19, "completion_tokens": 10, "prompt_tokens_details": None,
                          "cache_creation_input_tokens": None, "cost": "0.0012"}})
    assert m.fault is None and (t.input, t.output, t.cache_read) == (19, 10, 0) and t.cost_usd * 10_000 == 12


def test_a_provider_answering_a_usage_of_two_to_the_63_gets_502_and_records_no_tokens(folders, database_url):
    from test_gateway import ENV_KEYS, token, wait_calls

    with FakeUpstream() as up:
        up.usage = {"prompt_tokens": 2**63, "completion_tokens": 10, "total_tokens": 2**63 + 10}
        h = HubProcess(folders, database_url, args=("--node", "off"))
        h.env[ENV_KEYS["openai"]] = KEYS["openai"]
        h.start()
        try:
            with h.client() as c:
                r = c.patch("/v1/models/providers/openai", json={
                    "base_url": up.url + "/v1", "key": {"kind": "env", "name": ENV_KEYS["openai"]}})
                assert r.status_code == 200, r.text
                r = c.patch("/v1/models/policy", json={"worker": ["deepseek/deepseek-flash", "openai/gpt-6-luna"]})
                assert r.status_code == 200, r.text
            t = token(h)
            with h.client() as c:
                before = c.get("/v1/hub").json()["position"]
                r = c.post(t["base_urls"]["openai"] + "/chat/completions", headers={"authorization": "Bearer plaza"},
                           json={"model": "openai/gpt-6-luna", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 502, r.text
                assert r.json()["error"]["code"] == "bad_upstream" and "usage.prompt_tokens" in r.json()["error"]["message"]
                call = wait_calls(h, 1)[0]
                assert (call["status"], call["http_status"], call["input_tokens"], call["output_tokens"]) == ("error", 502, 0, 0)
                assert c.get("/v1/hub").json()["position"] > before  # the call is recorded, as an error
            audit = cli(h, "audit", "verify")
            assert audit.returncode == 0 and audit.stdout.startswith("intact"), audit.stdout
        finally:
            h.stop()
        again = HubProcess(folders, database_url, args=("--node", "off"))
        again.env[ENV_KEYS["openai"]] = KEYS["openai"]
        again.start()
        again.stop()


# -- the guest channel -----------------------------------------------------------------------------


class _Lines:
    """A harness's stream, in process: the lines it sends, the answers it gets."""

    def __init__(self, *lines: bytes):
        self.sent = [line + b"\n" for line in lines]
        self.answers: list[dict] = []

    def read(self) -> bytes:
        return self.sent.pop(0) if self.sent else b""

    def write(self, data: bytes) -> None:
        self.answers.append(json.loads(data))


def test_the_guest_channel_refuses_what_the_log_could_not_hold_before_any_op_reads_it(folders, database_url):
    from agentplaza.api.hub import Hub
    from agentplaza.commands import agents as ac
    from agentplaza.runtime.fleet import AgentRuntime
    from agentplaza.runtime.session import HarnessSession

    hub = Hub.open(folders, database_url=database_url)
    try:
        cmds = hub.commands
        cid = ac.spawn(cmds, cmds.context("owner"), "orchestrator", 1).value[0]
        stream = _Lines(b'{"op":"hello"}',
                        b'{"op":"tool","tool":"plaza_agent_propose","args":{"role":"builder","why":"x","count":NaN}}',
                        b'{"op":"name","name":"a\\u0000b"}',
                        b'{"op":"tool","tool":"plaza_status","args":' + b"[" * 100_000 + b"}",
                        b'{"op":"tool","tool":"plaza_agent_propose","args":{"role":"builder","why":"x","count":1e400}}',
                        b'["not", "an", "object"]')
        before = cmds.store.max_position()
        HarnessSession(AgentRuntime(hub, node="off"), cid, stream).run()
        hello, *refused, not_object = stream.answers
        assert "error" not in hello, hello
        assert [a["error"]["code"] for a in refused] == ["invalid_value"] * 4
        assert [a["error"]["message"].split(":")[0] for a in refused] == ["args.count", "name", "request", "args.count"]
        assert not_object["error"]["code"] == "bad_request"
        kinds = [r.kind for r in cmds.store.read(before, 100)]
        assert "Approval.Requested" not in kinds and all("Named" not in k for k in kinds)
    finally:
        hub.close()
