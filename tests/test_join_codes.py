"""Join codes, the nodes that join, and owner token rotation on a real store with an injected clock
(SQLite and PostgreSQL); the per-address limits and the 12-hour session with an injected clock."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from agentplaza.api.auth import SESSION_TTL_S, Sessions
from agentplaza.api.ratelimit import REDEEM_ATTEMPTS_PER_MIN, PerAddress
from agentplaza.commands import nodes as cmd
from agentplaza.commands.unit import Commands
from agentplaza.domain.base import Refusal
from agentplaza.domain.nodes import INVALID_CODE_MESSAGE, TTL_MIN_DEFAULT, TTL_MIN_MAX
from agentplaza.events.store import EventStore
from agentplaza.joincode import NotACode, parse
from agentplaza.projections.nodes import EXPIRED, NodesProjection, codes, joined
from agentplaza.projections.runner import ReadModels, make_engine, read_model_url

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
KEY = "A" * 43
HUB = "https://hub.example.net:7700"
PIN = "ab" * 32


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def plaza(folders, database_url):
    clock = Clock()
    store = EventStore.open(state_dir=folders.state, database_url=database_url)
    cmds = Commands(store, clock)
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    rms = ReadModels(engine, store, [NodesProjection()])
    rms.setup()
    yield cmds, rms, clock
    store.close()
    engine.dispose()


def owner(cmds):
    return cmds.context("owner")


def make(cmds, ttl=TTL_MIN_DEFAULT, label="atlas"):
    return parse(cmd.make_code(cmds, owner(cmds), label, ttl, HUB, PIN).value["code"])


def redeem(cmds, code, address="10.0.0.9", secret=None):
    return cmd.redeem(cmds, cmds.context("hub"), code.id, secret or code.secret, KEY, address).value


def test_a_code_is_valid_for_its_minutes_and_no_longer(plaza):
    cmds, rms, clock = plaza
    code = make(cmds, ttl=15)
    clock.now = T0 + dt.timedelta(minutes=15)
    with pytest.raises(Refusal) as r:
        redeem(cmds, code)
    assert (r.value.code, r.value.message) == ("join_code_invalid", INVALID_CODE_MESSAGE)
    rms.catch_up()
    assert codes(rms, clock.now)[0]["state"] == EXPIRED
    assert codes(rms, T0)[0]["state"] == "open"  # it was open until then


def test_a_code_lives_between_1_and_60_minutes(plaza):
    cmds, _, _ = plaza
    for ttl in (0, TTL_MIN_MAX + 1, -5):
        with pytest.raises(Refusal) as r:
            make(cmds, ttl=ttl)
        assert r.value.code == "invalid_ttl"
    assert make(cmds, ttl=TTL_MIN_MAX).id


def test_a_code_works_once_and_the_nodes_get_the_next_ranges(plaza):
    cmds, rms, _ = plaza
    first, second = make(cmds), make(cmds, label="boreas")
    a = redeem(cmds, first)
    assert (a.name, a.cid_first, a.cid_last) == ("n1", 1000, 1099)
    with pytest.raises(Refusal) as r:
        redeem(cmds, first)
    assert r.value.message == INVALID_CODE_MESSAGE
    b = redeem(cmds, second)
    assert (b.name, b.cid_first, b.cid_last) == ("n2", 1100, 1199)
    rms.catch_up()
    assert [(n["name"], n["label"], n["public_key"]) for n in joined(rms)] == [("n1", "atlas", KEY), ("n2", "boreas", KEY)]
    assert {c["id"]: (c["state"], c["node"]) for c in codes(rms, T0)} == {first.id: ("used", "n1"), second.id: ("used", "n2")}


def test_the_third_wrong_secret_ends_the_code_and_each_failure_is_in_the_log(plaza):
    cmds, rms, _ = plaza
    code = make(cmds)
    for _ in range(3):
        assert redeem(cmds, code, secret="wrong") is None
    with pytest.raises(Refusal) as r:
        redeem(cmds, code)
    assert r.value.message == INVALID_CODE_MESSAGE
    rms.catch_up()
    row = codes(rms, T0)[0]
    assert (row["state"], row["failures"]) == ("ended", 3)
    kinds = [e.kind for e in cmds.store.read(0, 100)]
    assert kinds.count("JoinCode.RedemptionFailed") == 3 and kinds.count("JoinCode.Ended") == 1


def test_the_events_keep_the_hash_of_the_secret_and_never_the_secret(plaza):
    cmds, _, _ = plaza
    code = make(cmds)
    redeem(cmds, code)
    stored = [repr(e.data) for e in cmds.store.read(0, 100)]
    assert not any(code.secret in s for s in stored)
    assert any(hashlib.sha256(code.secret.encode()).hexdigest() in s for s in stored)


def test_revoking_an_unused_code_and_not_a_used_one(plaza):
    cmds, _, _ = plaza
    unused, used = make(cmds), make(cmds)
    cmd.revoke_code(cmds, owner(cmds), unused.id)
    with pytest.raises(Refusal) as r:
        redeem(cmds, unused)
    assert r.value.code == "join_code_invalid"
    redeem(cmds, used)
    for code_id, refused in ((used.id, "join_code_used"), (unused.id, "join_code_closed"),
                             ("0123456789ab", "unknown_join_code")):
        with pytest.raises(Refusal) as r:
            cmd.revoke_code(cmds, owner(cmds), code_id)
        assert r.value.code == refused


def test_a_rotation_from_another_machine_is_refused_and_one_from_here_is_the_logs_hash(plaza):
    cmds, rms, _ = plaza
    with pytest.raises(Refusal) as r:
        cmd.rotate_owner_token(cmds, owner(cmds), from_this_machine=False)
    assert r.value.code == "not_from_this_machine"
    assert cmd.rotated_owner_token_sha256(cmds) is None
    token = cmd.rotate_owner_token(cmds, owner(cmds), from_this_machine=True).value
    assert cmd.rotated_owner_token_sha256(cmds) == hashlib.sha256(token.encode()).hexdigest()
    assert not any(token in repr(e.data) for e in cmds.store.read(0, 100))


def test_a_join_code_text_carries_the_address_and_the_pin_and_anything_else_is_no_code():
    from agentplaza.joincode import JoinCode

    c = JoinCode(HUB, PIN, "0123456789ab", "s3cret")
    assert parse(c.text()) == c
    for bad in ("", "apzjoin1.", "apzjoin1.e30", "apzjoin2." + c.text()[9:], c.text() + "x" * 1000, "apzjoin1.!!"):
        with pytest.raises(NotACode):
            parse(bad)


def test_five_attempts_a_minute_from_one_address():
    t = [0.0]
    limit = PerAddress(REDEEM_ATTEMPTS_PER_MIN, clock=lambda: t[0])
    assert [limit.attempt("a") for _ in range(5)] == [None] * 5
    assert limit.attempt("a") is not None and limit.attempt("b") is None
    t[0] = 59.0
    assert limit.attempt("a") is not None
    t[0] = 60.5
    assert limit.attempt("a") is None


def test_a_session_lasts_12_hours():
    t = [1_000.0]
    s = Sessions(clock=lambda: t[0])
    value, expires = s.open()
    assert expires - t[0] == SESSION_TTL_S == 12 * 3600
    t[0] += SESSION_TTL_S - 1
    assert s.valid(value)
    t[0] += 1
    assert not s.valid(value)


def test_a_rotation_over_http_is_refused_from_another_machine_and_the_logs_hash_wins_at_the_next_start(folders):
    import json

    import anyio
    import httpx

    from agentplaza.api.app import create_app
    from agentplaza.api.auth import token_hash
    from agentplaza.api.hub import Hub

    hub = Hub.open(folders)
    first = hub.new_owner_token
    app = create_app(hub)

    async def rotate(client_ip: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(client_ip, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/v1/hub/owner-token/rotate", json={}, headers={"authorization": f"Bearer {first}"})

    try:
        far = anyio.run(rotate, "10.1.2.3")
        assert far.status_code == 403 and far.json()["error"]["code"] == "not_from_this_machine"
        assert hub.owner_token_sha256 == token_hash(first)  # nothing changed
        here = anyio.run(rotate, "127.0.0.1")
        assert here.status_code == 200, here.text
        new = here.json()["token"]
        assert hub.owner_token_sha256 == token_hash(new)
    finally:
        hub.close()
    record = folders.state / "hub.json"
    stale = json.loads(record.read_text()) | {"owner_token_sha256": token_hash(first)}
    record.write_text(json.dumps(stale))  # a stale record (another hub rotated on the shared store)
    again = Hub.open(folders)
    try:
        assert again.owner_token_sha256 == token_hash(new)  # the log's rotation wins
    finally:
        again.close()


def test_a_rotation_ends_every_other_sign_in_and_keeps_the_one_that_rotated(folders):
    """The console that rotates the owner token goes on: its own sign-in is kept (nothing it has in flight is
    refused while it learns the new token), and every other sign-in, and the old token, stop at once."""
    import anyio
    import httpx

    from agentplaza.api.app import create_app
    from agentplaza.api.auth import SESSION_COOKIE
    from agentplaza.api.hub import Hub

    hub = Hub.open(folders)
    hub.loopback_trust = False  # a sign-in's cookie is then how a browser on this machine gets in
    old = hub.new_owner_token
    app = create_app(hub)

    async def session() -> tuple[str, str, dict]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            def signed(r: httpx.Response) -> str:
                assert r.status_code == 200, r.text
                return r.headers["set-cookie"].split(";")[0].split("=", 1)[1]

            mine = signed(await c.post("/v1/auth/session", json={"token": old}))
            theirs = signed(await c.post("/v1/auth/session", json={"token": old}))
            as_me = {"cookie": f"{SESSION_COOKIE}={mine}"}
            rotated = await c.post("/v1/hub/owner-token/rotate", json={}, headers=as_me)
            assert rotated.status_code == 200, rotated.text
            new = rotated.json()["token"]
            codes = {
                "mine": (await c.get("/v1/overview", headers=as_me)).status_code,
                "theirs": (await c.get("/v1/overview", headers={"cookie": f"{SESSION_COOKIE}={theirs}"})).status_code,
                "old token": (await c.get("/v1/overview", headers={"authorization": f"Bearer {old}"})).status_code,
                "new token": (await c.get("/v1/overview", headers={"authorization": f"Bearer {new}"})).status_code,
            }
            return mine, theirs, codes

    try:
        mine, theirs, codes = anyio.run(session)
        assert mine != theirs
        assert codes == {"mine": 200, "theirs": 401, "old token": 401, "new token": 200}
    finally:
        hub.close()
