"""The sign-in page against a hosted hub, in a real browser: apid serves HTTPS with its own certificate
on 127.0.0.2 (a loopback address this test owns; ``--https`` makes the hub hosted there) with loopback
trust off, so the browser is treated as one on another machine, as tests/test_hosting.py does. The
browser trusts the hub's self-signed certificate for this test only (``ignore_https_errors``).

A browser that is not on the hub's machine gets the sign-in page; a wrong token shows the API's refusal
as a readable message beside the form; the right token signs in with a cookie that is HttpOnly, Secure
and SameSite=Strict (the page's script cannot read it, and no token is kept in the page's storage); the
screens work over the stream; Sign out ends the session (its cookie no longer opens anything)."""

from __future__ import annotations

import httpx
import pytest
from support.hubproc import HubProcess, free_port

from agentplaza.api.auth import SESSION_COOKIE

from .test_console_governance import AXE, SHOWN_MS, axe_violations, settled, watch_errors

pytestmark = pytest.mark.xdist_group("hosting")

HOST = "127.0.0.2"


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    from agentplaza.config import Folders

    root = tmp_path_factory.mktemp("console-hosted")
    f = Folders(root / "state", root / "config", root / "data").make()
    port = free_port()
    h = HubProcess(f, port=port, host=HOST, args=(
        "--https", "--loopback-trust", "off", "--node", "off", "--public-url", f"https://{HOST}:{port}"))
    for name in ("APZ_TOKEN", "APZ_NODE"):
        h.env.pop(name, None)
    h.env["APZ_PRICE_FETCH"] = "off"
    h.start()
    h.token = (f.state / "owner-token").read_text().strip()
    try:
        yield h
    finally:
        h.stop()


def test_a_browser_off_the_hubs_machine_signs_in_with_the_token_uses_the_screens_and_signs_out(browser, hosted):
    from playwright.sync_api import expect

    if not AXE.exists():
        pytest.fail(f"the console test needs axe-core at {AXE}: run bash scripts/test.sh", pytrace=False)
    expect.set_options(timeout=SHOWN_MS)
    h = hosted
    assert h.url.startswith("https://")
    context = browser.new_context(viewport={"width": 1280, "height": 800}, ignore_https_errors=True)
    try:
        page = context.new_page()
        errors = watch_errors(page)
        page.goto(h.url + "/")
        expect(page.get_by_role("heading", name="Sign in to AgentPlaza")).to_be_visible()
        assert axe_violations(page) == []

        page.get_by_label("Owner token").fill("apz_owner_not-the-token")
        page.get_by_role("button", name="Sign in").click()
        refused = page.get_by_role("form", name="Sign in").get_by_role("alert")
        expect(refused).to_have_text("that is not the owner token (unauthorized)")
        assert context.cookies() == []

        page.get_by_label("Owner token").fill(h.token)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("Live", exact=True)).to_be_visible()
        (cookie,) = [c for c in context.cookies() if c["name"] == SESSION_COOKIE]
        assert (cookie["httpOnly"], cookie["secure"], cookie["sameSite"]) == (True, True, "Strict")
        assert SESSION_COOKIE not in page.evaluate("() => document.cookie")
        stored = page.evaluate("() => JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})")
        assert h.token not in stored and h.token not in page.content()

        settled(page)
        expect(page.get_by_test_id("budget")).to_contain_text("100,000")
        for screen, shows in (("Treasury", "Journal"), ("Nodes", "Join codes"), ("Egress", "Audit")):
            page.get_by_role("link", name=screen, exact=True).click()
            settled(page)
            expect(page.locator("main")).to_contain_text(shows)
        # The stream works over HTTPS too: a change made elsewhere shows without a reload.
        made = httpx.post(h.url + "/v1/join-codes", json={"label": "hosted"}, verify=False,
                          headers={"authorization": f"Bearer {h.token}"})
        assert made.status_code == 200, made.text
        page.get_by_role("link", name="Nodes", exact=True).click()
        expect(page.get_by_role("table", name="Join codes")).to_contain_text("hosted")

        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Sign in to AgentPlaza")).to_be_visible()
        assert [c for c in context.cookies() if c["name"] == SESSION_COOKIE] == []
        after = httpx.get(h.url + "/v1/hub", verify=False, headers={"cookie": f"{SESSION_COOKIE}={cookie['value']}"})
        assert after.status_code == 401
        assert errors == []
    finally:
        context.close()
