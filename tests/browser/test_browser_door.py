"""The browser door (issue 14), in a real browser: a page from another web site, opened by the owner
on the hub's machine, cannot drive the hub.

Headless Chromium opens the attacker's page (tests/browser/attacker.js) from each of four places:
another port of 127.0.0.1, localhost, 127.0.0.2, and a DNS name that "rebinds" to the hub's own
address. The page tries, one at a time, what a browser sends without asking the owner: fetch with
mode "no-cors" and Content-Type text/plain (STOP ALL, a mint, a planted secret, a law, a provider
whose key is a shell command, then that provider's test, which runs the command), an auto-submitted
text/plain form, a cross-origin read of the secrets list and a WebSocket to the live bus. After each
attempt the test asks the hub, over its own connection, what changed. Nothing may: the log keeps its
position, the plaza runs, no secret, law or provider is added, no command ran (its marker file does
not exist), nothing was readable and the WebSocket streamed nothing.

A page on the hub's own origin keeps working: it writes with JSON and listens on the WebSocket.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from .attacker import ATTACKER_JS, REBIND_HOST

#: How long the test waits for the hub to answer one attempt, or for one WebSocket message.
ANSWER_WAIT_MS = 15_000


@dataclass(frozen=True)
class Site:
    """Where the attacker's page comes from."""

    name: str
    tag: str  # the page's own letters in what it plants (a secret's name is upper-case letters)
    host: str  # the host name in the page's address
    rebound: bool = False  # the page sits on the hub's address under a foreign name


SITES = [
    Site("another port of 127.0.0.1", "a", "127.0.0.1"),
    Site("localhost", "b", "localhost"),
    Site("127.0.0.2", "c", "127.0.0.2"),
    Site(f"{REBIND_HOST} rebound to the hub's address", "d", REBIND_HOST, rebound=True),
]


@dataclass(frozen=True)
class Attack:
    name: str  # the function in attacker.js
    method: str
    path: str  # {tag} is the page's letters
    what: str


ATTACKS = [
    Attack("plaza_stop", "POST", "/v1/plaza/stop", "fetch POST /v1/plaza/stop (STOP ALL)"),
    Attack("plaza_form", "POST", "/v1/plaza/stop", "auto-submitted text/plain form POST /v1/plaza/stop"),
    Attack("treasury_mint", "POST", "/v1/treasury/mint", "fetch POST /v1/treasury/mint of 1,000,000,000,000 credits"),
    Attack("vault_secret", "POST", "/v1/vault/secrets", "fetch POST /v1/vault/secrets (a secret planted)"),
    Attack("rule_add", "POST", "/v1/rules", "fetch POST /v1/rules (a law added)"),
    Attack("provider_add", "POST", "/v1/models/providers", "fetch POST /v1/models/providers (a key of kind command)"),
    Attack("provider_test", "POST", "/v1/models/providers/evil-{tag}/test",
           "fetch POST /v1/models/providers/evil-{tag}/test (runs the key's command)"),
    Attack("secrets_read", "GET", "/v1/vault/secrets", "fetch GET /v1/vault/secrets read by the page"),
]


# -- asking the hub, over the test's own connection ------------------------------------------------------


def position(http) -> int:
    r = http.get("/v1/hub")
    assert r.status_code == 200, r.text
    return r.json()["position"]


def kinds_after(http, after: int) -> list[str]:
    r = http.get("/v1/events", params={"after": after, "limit": 1000})
    assert r.status_code == 200, r.text
    return [e["data"]["kind"] for e in r.json()["events"]]


def plaza_held(http) -> bool:
    return http.get("/v1/plaza").json()["held"]


def mint_one_credit(http) -> None:
    """A change the test itself makes, the way the CLI on this machine does: no Origin, JSON."""
    r = http.post("/v1/treasury/mint", json={"amount": 1, "memo": "the test's own change"})
    assert r.status_code == 200, r.text


def leftovers(http, tag: str, marker: Path) -> list[str]:
    """What a page with these letters could have left in the hub."""
    left = []
    if plaza_held(http):
        left.append("the plaza is held")
    secret = "EVIL_" + tag.upper()
    if any(s["name"] == secret for s in http.get("/v1/vault/secrets").json()["secrets"]):
        left.append(f"the secret {secret} is in the vault")
    if http.get(f"/v1/rules/evil-{tag}").status_code != 404:
        left.append(f"the law evil-{tag} is in the rules")
    if any(p["id"] == f"evil-{tag}" for p in http.get("/v1/models/providers").json()["providers"]):
        left.append(f"the provider evil-{tag} is added")
    if marker.exists():
        left.append(f"the key's command ran on the hub's machine ({marker.name} exists)")
    return left


# -- the page ---------------------------------------------------------------------------------------------


def open_page(context, hub, sites: dict[str, int], site: Site, marker: Path):
    hub_port = urlsplit(hub.url).port
    cfg = {"tag": site.tag, "marker": str(marker), "json": site.rebound}
    page = context.new_page()
    if site.rebound:
        # What a rebound page's script meets: the hub under the attacker's name, the same origin as the
        # page, so it may even send JSON. The script was the attacker's before the name moved.
        here = f"{REBIND_HOST}:{hub_port}"
        cfg.update(hub="", ws=f"ws://{here}/v1/ws")
        page.goto(f"http://{here}/v1/health")
        page.evaluate("cfg => { window.APZ_ATTACK = cfg; }", cfg)
        page.add_script_tag(content=ATTACKER_JS)
    else:
        port = sites["127.0.0.2" if site.host == "127.0.0.2" else "127.0.0.1"]
        cfg.update(hub=hub.url, ws=f"ws://127.0.0.1:{hub_port}/v1/ws")
        page.goto(f"http://{site.host}:{port}/?cfg={quote(json.dumps(cfg))}")
    page.wait_for_function("window.attacks !== undefined")
    return page


def attempt(page, http, attack: Attack, tag: str, marker: Path) -> list[str]:
    """One attack, once the hub has answered it: what it got through, in words."""
    path = attack.path.format(tag=tag)
    what = attack.what.format(tag=tag)
    before = position(http)

    def is_it(r) -> bool:
        return urlsplit(r.url).path == path and r.method == attack.method

    with page.expect_request(is_it, timeout=ANSWER_WAIT_MS) as sent:
        seen = page.evaluate("name => window.run(name)", attack.name)
    answer = sent.value.response()  # waits for the hub's answer; None where the browser kept it from the page
    found = []
    written = kinds_after(http, before)
    if written:
        found.append(f"wrote {len(written)} event{'s' * (len(written) != 1)} ({', '.join(written)})")
    if plaza_held(http):
        found.append("held the plaza")
        r = http.post("/v1/plaza/resume", json={"reason": "the browser test undoes the page's STOP ALL"})
        assert r.status_code == 200, r.text  # so that the next attempt is judged on a running plaza
    if attack.name == "provider_test" and marker.exists():
        found.append("the hub ran the page's shell command")
    if seen.get("readable"):
        found.append(f"the page read the answer: {seen['body'][:80]}")
    if not found and answer is not None and answer.status < 400:
        found.append("not refused")
    if not found:
        return []
    status = answer.status if answer else "(kept from the page)"
    return [f"{what}: answered {status}; {'; '.join(found)}"]


def attempt_websocket(page, http) -> list[str]:
    from playwright.sync_api import TimeoutError as NoEvent

    seen = page.evaluate("window.run('websocket')")
    if not seen["opened"]:
        return []
    mint_one_credit(http)  # an event for the socket to stream, if it streams
    try:
        page.wait_for_function("window.results.websocket.messages > 0", timeout=ANSWER_WAIT_MS)
    except NoEvent:  # the socket opened, which is the finding
        return ["new WebSocket(/v1/ws, apz.events.v1): opened (no event arrived)"]
    n = page.evaluate("window.results.websocket.messages")
    return [f"new WebSocket(/v1/ws, apz.events.v1): opened and streamed the plaza's live events ({n})"]


@pytest.mark.parametrize("site", SITES, ids=[s.tag + "-" + s.host for s in SITES])
def test_a_page_from_another_site_cannot_drive_the_hub(browser, door_hub, attacker_sites, tmp_path, site):
    marker = tmp_path / "the-page-ran-a-command"
    http = door_hub.client()
    start = position(http)
    context = browser.new_context(bypass_csp=site.rebound)
    try:
        page = open_page(context, door_hub, attacker_sites, site, marker)
        through = []
        for attack in ATTACKS:
            through += attempt(page, http, attack, site.tag, marker)
        through += attempt_websocket(page, http)
    finally:
        context.close()
    left = leftovers(http, site.tag, marker)
    if not through and position(http) != start:
        left.append(f"the log moved from {start} to {position(http)}: {', '.join(kinds_after(http, start))}")
    report = [f"a page from {site.name} got through:", *("  " + t for t in through)]
    if left:
        report += ["and left:", *("  " + t for t in left)]
    assert not through and not left, "\n".join(report)


def test_the_hubs_own_origin_still_works(browser, door_hub):
    own = door_hub.url
    http = door_hub.client()
    r = http.post("/v1/treasury/mint", json={"amount": 1, "memo": "from the hub's own origin"},
                  headers={"Origin": own, "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 200, r.text
    assert http.get("/v1/hub", headers={"Origin": own, "Sec-Fetch-Site": "same-origin"}).status_code == 200

    # A page on the hub's own address (the console's place) listens, writes with JSON and reads.
    # bypass_csp: this page is an API answer, whose policy may forbid scripts; the console's will not.
    context = browser.new_context(bypass_csp=True)
    try:
        page = context.new_page()
        assert page.goto(own + "/v1/health").status == 200
        done = page.evaluate("""async () => {
            window.heard = [];
            const ws = new WebSocket(location.origin.replace("http", "ws") + "/v1/ws", "apz.events.v1");
            ws.onmessage = (m) => window.heard.push(JSON.parse(m.data).data.kind);
            const opened = await new Promise((ok) => { ws.onopen = () => ok(true); ws.onclose = () => ok(false); });
            const mint = await fetch("/v1/treasury/mint", {method: "POST", headers: {"Content-Type": "application/json"},
                                                          body: JSON.stringify({amount: 1, memo: "the hub's own page"})});
            const read = await fetch("/v1/treasury");
            return {opened, mint: mint.status, read: read.status, minted: (await read.json()).minted};
        }""")
        assert done["opened"] and done["mint"] == 200 and done["read"] == 200, done
        page.wait_for_function("window.heard.length > 0", timeout=ANSWER_WAIT_MS)
    finally:
        context.close()
