"""No secret in any error text: a provider that quotes the key back gives the caller ``[redacted]``.

A fake provider answers every call 401 with the key it was sent quoted in
each common encoding.  Through a real apid (the official SDKs on the gateway,
``agentplaza models test`` on the command line) the key appears in no answer,
no event, no byte of the state and config folders, and no line of the hub's
output.  Then the scrubber itself: every form, a stream that cuts a value in
two, and the vault feeding it (nothing while sealed).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from support.fake_upstream import FakeUpstream
from support.hubproc import HubProcess, cli
from test_gateway import token
from test_vault_service import Rig

from agentplaza.vault.scrub import MIN_SECRET_CHARS, REDACTED, Scrubber, forms

#: Keys with the characters that each encoding changes ("/", "+", "=").
VAULT_KEY = "sk-ant-api03-Zx/9+q=TeSt_Key-0123456789abcdef"
ENV_KEY = "sk-proj-env/Key+Only=In-The-Hub-Environment-42"
ENV_NAME = "APZ_TEST_OPENAI_KEY"
MSG = [{"role": "user", "content": "x"}]
JSON = {"content-type": "application/json"}


def quoted(key: str) -> str:
    """The key as a careless provider quotes it back, in every common form."""
    raw = key.encode()
    return " ".join([
        f"invalid key {key!r}", f"Authorization: Bearer {key}", f"x-api-key: {key}",
        "b64=" + base64.b64encode(raw).decode(), "b64url=" + base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "basic=" + base64.b64encode(b"user:" + raw).decode(), "hex=" + raw.hex(), "HEX=" + raw.hex().upper(),
        "url=" + urllib.parse.quote(key, safe=""), "form=" + urllib.parse.quote_plus(key),
        "json=" + json.dumps(key)[1:-1].replace("/", "\\/"),
    ])


def encodings(key: str) -> list[str]:
    raw = key.encode()
    return [key, base64.b64encode(raw).decode().rstrip("="), base64.urlsafe_b64encode(raw).decode().rstrip("="),
            raw.hex(), raw.hex().upper(), urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key),
            json.dumps(key)[1:-1].replace("/", "\\/"), base64.b64encode(b"user:" + raw).decode()[8:-4]]


class QuotingUpstream(FakeUpstream):
    """Refuses every call 401, quoting the key it got, in the error body and its message."""

    def answer(self, path: str, headers: dict, body: dict) -> tuple[int, str, bytes]:
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        text = quoted(key)
        if path.startswith("/v1/messages"):
            payload = {"type": "error", "error": {"type": "authentication_error", "message": text}, "echo": key}
        else:
            payload = {"error": {"message": text, "type": "invalid_request_error", "code": key}}
        return 401, "application/json", json.dumps(payload).encode()


@pytest.fixture
def upstream():
    with QuotingUpstream() as up:
        yield up


@pytest.fixture
def hub(folders, upstream):
    h = HubProcess(folders)
    h.env[ENV_NAME] = ENV_KEY
    h.start()
    with h.client() as c:
        r = c.patch("/v1/models/providers/anthropic", json={"base_url": upstream.url}, headers=JSON)
        assert r.status_code == 200, r.text
        r = c.patch("/v1/models/providers/openai", json={"base_url": upstream.url + "/v1",
                                                         "key": {"kind": "env", "name": ENV_NAME}}, headers=JSON)
        assert r.status_code == 200, r.text
        r = c.patch("/v1/models/policy", json={"worker": ["deepseek/deepseek-flash", "anthropic/claude-haiku-5-5",
                                                                 "openai/gpt-6-luna"]},
                    headers=JSON)
        assert r.status_code == 200, r.text
    yield h
    h.stop()


def _files(*folders: Path) -> list[Path]:
    return [p for f in folders for p in Path(f).rglob("*") if p.is_file()]


def test_a_provider_quoting_the_key_in_its_error_puts_it_in_no_answer_event_file_or_log(hub, upstream, folders):
    seen: list[str] = []
    r = cli(hub, "models", "key", "anthropic", "--value", "-", stdin=VAULT_KEY)
    assert r.returncode == 0, r.stderr
    t = token(hub, "41", credits=100)
    # the official SDKs on the gateway: the provider's 401 comes back, scrubbed
    a = anthropic.Anthropic(base_url=t["base_urls"]["anthropic"], api_key="plaza", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as e:
        a.messages.create(model="claude-haiku-5-5", max_tokens=8, messages=MSG)
    assert REDACTED in e.value.response.text
    seen += [str(e.value), e.value.response.text]
    with pytest.raises(anthropic.AuthenticationError) as e:  # streamed: the error comes whole, scrubbed too
        with a.messages.stream(model="claude-haiku-5-5", max_tokens=8, messages=MSG) as s:
            s.until_done()
    seen += [str(e.value), e.value.response.text]
    o = openai.OpenAI(base_url=t["base_urls"]["openai"], api_key="plaza", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:  # a key from the hub's environment, not the vault
        o.chat.completions.create(model="gpt-6-luna", messages=MSG)
    assert REDACTED in e.value.response.text
    seen += [str(e.value), e.value.response.text]
    assert upstream.requests[0]["headers"]["x-api-key"] == VAULT_KEY  # the real keys did go to the provider
    assert upstream.requests[-1]["headers"]["authorization"] == f"Bearer {ENV_KEY}"
    # the owner's models test, on the real command line, human and JSON
    for pid in ("anthropic", "openai"):
        r = cli(hub, "models", "test", pid)
        assert "401" in r.stdout + r.stderr and REDACTED in r.stdout + r.stderr, r.stdout + r.stderr
        seen.append(r.stdout + r.stderr)
        with hub.client() as c:
            r = c.post(f"/v1/models/providers/{pid}/test", json={}, headers=JSON)
            assert r.status_code == 200 and r.json()["ok"] is False
            seen.append(r.text)
    with hub.client() as c:
        for path in ("/v1/events?limit=1000", "/v1/usage/calls", "/v1/models/providers", "/v1/vault/audit?limit=500"):
            seen.append(c.get(path).text)
    hub.stop()
    seen.append(hub.output)
    for key in (VAULT_KEY, ENV_KEY):
        for enc in encodings(key):
            for text in seen:
                assert enc not in text, (enc, text[:300])
            for path in _files(folders.state, folders.config, folders.data):  # the store, the read models, all
                assert enc.encode() not in path.read_bytes(), (enc, path)


# -- the scrubber ---------------------------------------------------------------------------------------


def test_every_form_of_a_held_value_is_scrubbed_and_other_text_is_left_alone():
    s = Scrubber([VAULT_KEY, "short"])
    text = "before " + quoted(VAULT_KEY) + " after short"
    clean = s.scrub(text)
    for enc in encodings(VAULT_KEY):
        assert enc not in clean
    assert clean.startswith("before ") and clean.endswith(" after short")  # a value under 8 characters stays
    assert len("short") < MIN_SECRET_CHARS and s.scrub_bytes(b"nothing here") == b"nothing here"
    assert s.scrub_json({"error": {"message": VAULT_KEY, VAULT_KEY: [VAULT_KEY, 3]}}) == \
        {"error": {"message": REDACTED, REDACTED: [REDACTED, 3]}}
    assert all(len(f) >= MIN_SECRET_CHARS for f in forms(VAULT_KEY))
    # a key the caller used just now goes too, though the vault does not hold it
    assert ENV_KEY not in s.scrub("got " + ENV_KEY, (ENV_KEY,))
    in_url = urllib.parse.quote(ENV_KEY, safe="")
    err = httpx.ConnectError(f"failed for https://user:{in_url}@h.example/v1?key={in_url}&x=1")
    assert in_url not in s.error_text(err) and s.error_text(err).startswith("ConnectError: failed for https://")


def test_a_stream_that_cuts_a_value_in_two_is_scrubbed_and_nothing_waits_at_an_event_end():
    pem = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----"
    s = Scrubber([VAULT_KEY, pem])
    data = (f"data: {{\"t\": \"{VAULT_KEY}\"}}\n\ndata: {pem}\n\ndata: [DONE]\n\n").encode()
    for size in (1, 3, 7, 16, len(data)):
        st = s.stream()
        out = b"".join(st.feed(data[i:i + size]) for i in range(0, len(data), size)) + st.end()
        assert VAULT_KEY.encode() not in out and pem.encode() not in out
        assert out == data.replace(VAULT_KEY.encode(), REDACTED.encode()).replace(pem.encode(), REDACTED.encode())
    st = s.stream()
    assert st.feed(b"data: {\"t\": \"hello\"}\n\n") == b"data: {\"t\": \"hello\"}\n\n"  # a whole event goes at once


def test_the_vault_feeds_the_scrubber_every_kept_value_and_a_sealed_vault_none(folders):
    rig = Rig(folders, None)
    try:
        vault = rig.vault
        e = vault.set(rig.ctx(), "ANTHROPIC_API_KEY", VAULT_KEY, bindings=["provider:anthropic"])
        assert vault.scrubber.scrub(VAULT_KEY) == REDACTED
        vault.rotate(rig.ctx(), e.id, ENV_KEY)
        assert vault.scrubber.scrub(f"{VAULT_KEY} {ENV_KEY}") == f"{REDACTED} {REDACTED}"  # kept versions too
        vault.seal()
        assert vault.scrubber.holding == 0 and vault.scrubber.scrub(VAULT_KEY) == VAULT_KEY
        vault.unseal("keyfile")
        assert vault.scrubber.scrub(ENV_KEY) == REDACTED
        vault = rig.reopen()  # a new process: unsealed by the key file at start, fed again
        assert vault.scrubber.scrub(VAULT_KEY) == REDACTED
    finally:
        rig.close()
